"""tools/gpu/bench_summary.py, the summary of `measure.sh bench-compare`,
run as measure.sh runs it on an output directory made of what one such call
recorded on two H200s (docs/measurements/h200x2-bench-compare/): nccl-tests
tables of two versions, the benchmark's JSON, and the NCCL logs of the three
environments. The other environments' JSON results are the recorded one
with known factors applied, so that the ratios the script prints are known.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(REPO, "docs", "measurements", "h200x2-bench-compare")
SCRIPT = os.path.join(REPO, "tools", "gpu", "bench_summary.py")
MIB = 1024 * 1024


def scaled(path, factor):
    """The benchmark's result line of ``path`` with every busbw times ``factor``."""
    with open(path) as handle:
        result = json.loads(handle.read().strip().splitlines()[-1])
    for row in result["document"]["ops"]["all_reduce"]["rows"]:
        row["busbw_gbps"] *= factor
    return json.dumps(result)


def summary(out):
    done = subprocess.run([sys.executable, SCRIPT, str(out)], env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "plugins")),
                          capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def recorded_call(tmp_path):
    """One round of bf16 and fp32: the detected environment as recorded,
    none 0.5% faster, the fixed one 10% slower; nccl-tests as recorded."""
    for dtype in ("bfloat16", "float32"):
        detected = os.path.join(RECORDED, "bench-detected-%s-1.json" % dtype)
        shutil.copy(detected, tmp_path / ("bench-detected-%s-1.json" % dtype))
        (tmp_path / ("bench-none-%s-1.json" % dtype)).write_text(scaled(detected, 1.005))
        (tmp_path / ("bench-seed-%s-1.json" % dtype)).write_text(scaled(detected, 0.9))
        shutil.copy(os.path.join(RECORDED, "nccltests-%s-1.txt" % dtype), tmp_path / ("nccltests-%s-1.txt" % dtype))
        for env in ("none", "detected", "seed"):
            (tmp_path / ("work-%s-%s-1" % (env, dtype))).mkdir()
            shutil.copy(os.path.join(RECORDED, "nccl-log-%s-bfloat16-1.log" % env),
                        tmp_path / ("work-%s-%s-1" % (env, dtype)) / "bench-node0.log")
    return tmp_path


def table_row(text, dtype, size):
    block = text.split("\n%s  busbw GB/s" % dtype)[1]
    return next(line.split() for line in block.splitlines() if line.split()[:1] == [size])


def test_ratios_against_nccl_tests_and_none(recorded_call):
    status, text = summary(recorded_call)
    # Detected is 1/1.005 of none: 0.995 at every size, within the goal.
    assert "detected / none, lowest from 16M up: 0.9950 (goal >= 0.99)" in text
    assert "fixed / none, lowest at any size: 0.8955" in text
    # The bench's own figure over nccl-tests' in-place busbw, read from the
    # recorded files: 8 GiB bf16.
    with open(os.path.join(RECORDED, "bench-detected-bfloat16-1.json")) as handle:
        rows = json.loads(handle.read().strip().splitlines()[-1])["document"]["ops"]["all_reduce"]["rows"]
    bench_8g = next(row["busbw_gbps"] for row in rows if row["size"] == 8192 * MIB)
    size, nccl_tests, graph, bench, ratio = table_row(text, "bfloat16", "8G")[:5]
    assert float(nccl_tests) == 351.41  # in-place column of nccltests-bfloat16-1.txt
    assert graph == "-"  # this call ran no nccl-tests -G
    assert float(bench) == pytest.approx(bench_8g, abs=0.005)
    assert float(ratio) == pytest.approx(bench_8g / 351.41, abs=1e-4)
    # The recorded bf16 round (the benchmark before its loops were held) is
    # below 0.99 of nccl-tests at some size from 16 MiB up, and below 0.97
    # at 2 MiB, so the script says the goals were missed.
    ratios = dict((name, float(table_row(text, "bfloat16", name)[4])) for name in (
        "1M", "2M", "4M", "8M", "16M", "32M", "64M", "128M", "256M", "512M", "1G", "2G", "4G", "8G"))
    worst = min(ratios[name] for name in ratios if name not in ("1M", "2M", "4M", "8M"))
    assert "bench / nccl-tests, lowest from 16M up: %.4f (goal >= 0.99)" % worst in text
    assert "bench / nccl-tests, lowest at any size: %.4f (goal >= 0.97)" % min(ratios.values()) in text
    assert min(ratios.values()) < 0.97 and status == 1


def test_nccl_tables_without_an_op_line_are_read(recorded_call):
    """nccl-tests before 2.14 print no "Collective test starting" line."""
    with open(recorded_call / "nccltests-float32-1.txt") as handle:
        assert "Collective test starting" not in handle.read()
    _status, text = summary(recorded_call)
    assert "holds no all_reduce_perf table" not in text
    assert table_row(text, "float32", "1M")[1] != "-"


def test_nccl_tests_graph_mode_is_a_second_reference(recorded_call):
    """nccl-tests -G 20 as measure.sh runs it (to 256 MiB), recorded on two
    H200s (docs/measurements/h200x2-validation/)."""
    shutil.copy(os.path.join(REPO, "docs", "measurements", "h200x2-validation", "nccltests_graph-bfloat16-1.txt"),
                recorded_call / "nccltests_graph-bfloat16-1.txt")
    _status, text = summary(recorded_call)
    size, nccl_tests, graph, bench, ratio, ratio_graph = table_row(text, "bfloat16", "1M")[:6]
    # Its 1 MiB in-place busbw, whose eager loop is launch-bound on that host.
    assert float(graph) == 73.1
    assert float(ratio_graph) == pytest.approx(float(bench) / 73.1, abs=1e-4)
    assert table_row(text, "bfloat16", "512M")[2] == "-"
    lowest = min(float(table_row(text, "bfloat16", name)[5]) for name in (
        "1M", "2M", "4M", "8M", "16M", "32M", "64M", "128M", "256M"))
    assert "bench / nccl-tests -G 20, lowest at any size: %.4f" % lowest in text


def test_a_cut_round_is_left_out_and_said(recorded_call):
    (recorded_call / "nccltests-bfloat16-2.txt").write_text("# nThread 1 nGpus 2 minBytes 1048576\n")
    _status, text = summary(recorded_call)
    assert "left out: %s holds no all_reduce_perf table" % (recorded_call / "nccltests-bfloat16-2.txt") in text
    assert table_row(text, "bfloat16", "8G")[1] == "351.41"


def test_nccl_set_up_differs_only_by_the_variables_own_lines(recorded_call):
    _status, text = summary(recorded_call)
    assert "NCCL set-up, detected against none (round 1): + NCCL_SOCKET_IFNAME set to =eth0\n" in text
    assert "NCCL set-up, seed against none (round 1): + NCCL_P2P_LEVEL set by environment to NVL\n" in text


def test_environments_that_did_not_run_are_left_out(recorded_call):
    for path in recorded_call.glob("bench-seed-*"):
        path.unlink()
    for dtype in ("bfloat16", "float32"):
        shutil.rmtree(str(recorded_call / ("work-seed-%s-1" % dtype)))
    _status, text = summary(recorded_call)
    assert table_row(text, "bfloat16", "8G")[7] == "-"
    assert "fixed / none" not in text and "NCCL set-up, seed" not in text
    assert "NCCL set-up, detected against none (round 1): + NCCL_SOCKET_IFNAME set to =eth0\n" in text


def test_a_different_nccl_set_up_is_shown(recorded_call):
    log = recorded_call / "work-detected-bfloat16-1" / "bench-node0.log"
    text = log.read_text()
    assert "via P2P/CUMEM" in text
    log.write_text(text.replace("Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM", "Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct"))
    _status, summary_text = summary(recorded_call)
    line = next(line for line in summary_text.splitlines()
                if line.startswith("NCCL set-up, detected against none") and "SHM" in line)
    assert "+ Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct" in line
    assert "- Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM" in line


def test_spread_of_the_rounds(recorded_call):
    # A second round of none, 10% slower at every size: the spread of its
    # rounds is 10% of their median (1.005 and 0.9045 of detected).
    detected = recorded_call / "bench-detected-bfloat16-1.json"
    (recorded_call / "bench-none-bfloat16-2.json").write_text(scaled(str(detected), 1.005 * 0.9))
    _status, text = summary(recorded_call)
    spread = 100 * (1.005 - 0.9045) / ((1.005 + 0.9045) / 2)
    assert "rounds of one environment differ by up to %.1f%% below 16M, %.1f%% from 16M up" % (
        spread, spread) in text
