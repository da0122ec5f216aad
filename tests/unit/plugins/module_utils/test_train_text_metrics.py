"""A Job pod's log text read as metrics (train_launch.text_metrics, the
train_log_metrics filter's logic) and throughput_logs.parse_lines, which it reads
the lines with. The lines built here are written from TorchTitan's metrics
line format; tests/fixtures/logs/torchtitan holds a real run's log."""

import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.report import throughput_logs
from ansible_collections.mlinfra.multinode.plugins.module_utils.train.run_status import text_metrics

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
TORCHTITAN_LOG = os.path.join(REPO, "tests", "fixtures", "logs", "torchtitan", "torchtitan-normal-1.log")

NO_METRICS = {"metrics": None, "first_loss": None, "latest_loss": None, "steps_logged": 0}


def titan(step, loss, tps, mfu, rank=0, memory="1.00", tflops="0.50", colour=False):
    line = ("step: %2d  loss: %8.4f  grad_norm:  1.0000  memory: %sGiB(1.00%%)  tps: %s  tflops: %s  mfu: %s%%"
            % (step, loss, memory, tps, tflops, mfu))
    if colour:
        line = "\x1b[31m" + line.replace("  loss", "  \x1b[32mloss").replace("  tps", "  \x1b[34mtps") + "\x1b[39m"
    return "[rank%d]:[titan] 2026-01-01 10:00:%02d,000 - root - INFO - %s" % (rank, step % 60, line)


def test_latest_step_and_the_first_and_latest_loss():
    text = "\n".join([
        "[rank0]:[titan] 2026-01-01 10:00:00,000 - root - INFO - Starting job: default job",
        titan(1, 8.1, "1,000", "0.04"),
        "[rank0]:[titan] 2026-01-01 10:00:02,000 - root - INFO - validate step: 3  loss: 9.9000",
        titan(3, 6.5, "1,100", "0.05", colour=True),
        titan(5, 4.1234, "1,234", "0.05", memory="1.50", tflops="0.60"),
        "[rank0]:[titan] 2026-01-01 10:00:06,000 - root - INFO - Training completed",
    ]) + "\n"
    result = text_metrics(text)
    assert result["steps_logged"] == 3
    assert result["first_loss"] == pytest.approx(8.1)
    assert result["latest_loss"] == pytest.approx(4.1234)
    metrics = result["metrics"]
    assert metrics["step"] == 5
    assert metrics["loss"] == pytest.approx(4.1234)
    assert metrics["tps"] == pytest.approx(1234.0)
    # mfu as a fraction, not a percentage.
    assert metrics["mfu"] == pytest.approx(0.0005)
    assert metrics["tflops"] == pytest.approx(0.6)
    assert metrics["memory_gib"] == pytest.approx(1.5)


def test_one_ranks_series_when_every_rank_is_teed():
    text = "\n".join([titan(1, 8.0, "900", "0.04", rank=1), titan(1, 8.1, "1,000", "0.04"),
                      titan(2, 7.0, "950", "0.04", rank=1), titan(2, 7.5, "1,050", "0.05"),
                      titan(3, 6.0, "990", "0.04", rank=1)])
    result = text_metrics(text)
    assert result["steps_logged"] == 2
    assert result["metrics"]["step"] == 2 and result["metrics"]["tps"] == pytest.approx(1050.0)
    assert (result["first_loss"], result["latest_loss"]) == (pytest.approx(8.1), pytest.approx(7.5))


@pytest.mark.parametrize("separator", ["\r\n", "\r"])
def test_carriage_returns_separate_lines(separator):
    result = text_metrics(separator.join([titan(1, 8.1, "1,000", "0.04"), titan(10, 5.0, "2,000", "0.10")]))
    assert result["steps_logged"] == 2
    assert result["metrics"]["step"] == 10 and result["metrics"]["mfu"] == pytest.approx(0.001)
    assert result["first_loss"] == pytest.approx(8.1) and result["latest_loss"] == pytest.approx(5.0)


def test_the_real_torchtitan_log():
    with open(TORCHTITAN_LOG) as handle:
        text = handle.read()
    parsed = throughput_logs.parse_log(TORCHTITAN_LOG, "torchtitan")["measurements"]
    result = text_metrics(text)
    assert result["steps_logged"] == len(parsed) > 1
    assert result["metrics"]["step"] == parsed[-1]["step"]
    assert result["metrics"]["tps"] == parsed[-1]["figures"]["tokens_per_sec_per_device"]
    # The first line of the log, as printed: loss 8.09509.
    assert result["first_loss"] == pytest.approx(8.09509)
    assert 0 < result["metrics"]["mfu"] < 1


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    "Defaulted container \"trainer\" out of: trainer, autodetect (init)\n[INFO] Starting torchrun...\n",
    # A step but no throughput figure, and a validation line: not metrics lines.
    "[rank0]:[titan] step: 1  loss: 8.1\n[rank0]:[titan] validate step: 2  loss: 7.0  tps: 5\n",
])
def test_no_metrics_lines(text):
    assert text_metrics(text) == NO_METRICS


def test_no_metrics_result_is_a_fresh_dict():
    first = text_metrics("nothing")
    first["steps_logged"] = 99
    assert text_metrics("nothing") == NO_METRICS


def test_parse_lines_refuses_the_benchmark_format():
    with pytest.raises(throughput_logs.ThroughputError, match="cannot read lines as 'benchmark'"):
        throughput_logs.parse_lines([titan(1, 8.1, "1,000", "0.04")], "benchmark")
    with pytest.raises(throughput_logs.ThroughputError, match="cannot read lines as 'titan'"):
        throughput_logs.parse_lines([], "titan")


def test_parse_lines_reads_lines_already_read():
    lines = [titan(1, 8.1, "1,000", "0.04"), "# marked by hand", titan(2, 7.9, "1,200", "0.05", colour=True)]
    parsed = throughput_logs.parse_lines(iter(lines), "torchtitan")
    assert parsed["format"] == "torchtitan" and parsed["annotations"] == 1
    assert [m["step"] for m in parsed["measurements"]] == [1, 2]
    assert parsed["measurements"][1]["figures"]["tokens_per_sec_per_device"] == pytest.approx(1200.0)
    with pytest.raises(throughput_logs.ThroughputError, match="pod j-0.s log has no torchtitan throughput lines"):
        throughput_logs.parse_lines(["hello"], "torchtitan", path="pod j-0's log")
