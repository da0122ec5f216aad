"""The closing line of a successful training run (train role, every start
mode), as an operator reads it."""

from ansible_collections.mlinfra.multinode.plugins.module_utils.train_summary import summary_line

RUN = {"metric": "tokens_per_sec_per_device", "unit": "tokens/s per device", "throughput": 13740.0, "mfu": None,
       "degraded": False, "reasons": []}
RANK0 = {"state": "succeeded", "first_loss": 5.5488, "latest_loss": 3.0886, "metrics": {"step": 30, "loss": 3.0886}}
RANK1 = {"state": "succeeded", "first_loss": 5.61, "latest_loss": 3.2, "metrics": {"step": 30}}


def test_the_line_says_where_how_fast_and_how_the_loss_fell():
    line = summary_line("demo", ["h-kim-0", "h-kim-1"], 1, RUN, [RANK0, RANK1], {}, "/logs/demo")
    assert line == ("run demo succeeded on 2 pod(s) x 1 process(es): 13740.0 tokens/s per device; "
                    "loss 5.5488 -> 3.0886 over 30 steps; not degraded; logs and summary: /logs/demo/")


def test_the_loss_is_rank_zeros_and_a_pod_that_did_not_answer_is_passed_over():
    line = summary_line("demo", ["a", "b"], 8, RUN, [None, RANK1], {}, "/logs/demo/")
    assert "loss 5.6100 -> 3.2000 over 30 steps;" in line and "x 8 process(es)" in line
    assert line.endswith("logs and summary: /logs/demo/")


def test_a_loss_the_log_did_not_give_is_said_to_be_missing_not_dashed():
    for status in ({"state": "succeeded", "first_loss": None, "latest_loss": None, "metrics": None},
                   {"state": "succeeded"}, "no answer"):
        line = summary_line("r", ["p-0"], 1, RUN, [status], {}, "/l")
        assert "; loss not reported in the log of rank 0's pod; " in line and "-> -" not in line
    no_step = dict(RANK0, metrics=None)
    assert "; loss 5.5488 -> 3.0886; " in summary_line("r", ["p-0"], 1, RUN, [no_step], {}, "/l")


def test_mfu_degradation_and_baseline_are_named():
    run = dict(RUN, mfu=0.4826, degraded=True, reasons=["34.1% below the baseline 20000.0 tokens/s per device"])
    baseline = {"tokens_per_sec_per_device": {"value": 20000.0, "unit": "tokens/s per device"}}
    line = summary_line("slow", ["p-0", "p-1"], 1, run, [RANK0, RANK1], baseline, "/l")
    assert "13740.0 tokens/s per device, MFU 48.3%; loss" in line
    assert ("; DEGRADED: 34.1% below the baseline 20000.0 tokens/s per device "
            "(baseline 20000.0 tokens/s per device); logs") in line


def test_a_throughput_that_could_not_be_read_is_not_a_number():
    line = summary_line("r", ["p-0"], 1, dict(RUN, throughput=None), [RANK0], {}, "/l")
    assert ": throughput not reported; loss 5.5488" in line


def test_a_run_that_is_its_own_baseline_is_not_said_to_be_compared():
    """Without train_baseline, throughput_report's baseline of one run is
    that run's own figure: the line says nothing was compared."""
    itself = {"tokens_per_sec_per_device": {"value": 13740.0, "unit": "tokens/s per device", "source": "runs",
                                            "runs": 1, "of_runs": 1}}
    line = summary_line("r", ["p-0", "p-1"], 1, RUN, [RANK0, RANK1], itself, "/l")
    assert "; not degraded within the run; no other run to compare it with (train_baseline); logs" in line
    assert "(baseline" not in line
    several = {"tokens_per_sec_per_device": dict(itself["tokens_per_sec_per_device"], runs=3, of_runs=3)}
    assert "not degraded (baseline 13740.0 tokens/s per device)" in summary_line(
        "r", ["p-0"], 1, RUN, [RANK0], several, "/l")
