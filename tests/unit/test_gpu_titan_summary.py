"""tools/gpu/titan_summary.py, the summary of `measure.sh torchtitan`, run as
measure.sh runs it on what two such calls recorded on two H200s
(docs/measurements/h200x2-validation/torchtitan/: the logs of Llama 3 8B
through the launcher and through a hand-typed torchrun, and runs.txt with
each start's exit status and wall time).
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(REPO, "docs", "measurements", "h200x2-validation", "torchtitan")
SCRIPT = os.path.join(REPO, "tools", "gpu", "titan_summary.py")


def summary(out):
    done = subprocess.run([sys.executable, SCRIPT, str(out)],
                          env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "plugins")),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def recorded_call(tmp_path):
    for name in os.listdir(RECORDED):
        if name.endswith(".out") or name == "runs.txt":
            shutil.copy(os.path.join(RECORDED, name), tmp_path / name)
    return tmp_path


def test_each_run_and_the_ratios_of_the_recorded_calls(recorded_call):
    text = summary(recorded_call)
    assert "bf16-compile-launcher-1.out: tokens/s per GPU 9380, MFU 54.93%" in text
    assert "float8-compile-torchrun-2.out: tokens/s per GPU 12343" in text
    assert "bf16-compile: launcher / torchrun tokens/s = 1.0013 (9372 / 9360, goal >= 0.99)" in text
    assert "float8-compile: launcher / torchrun tokens/s = 1.0035 (12334 / 12291, goal >= 0.99)" in text
    # Wall times: the medians of runs.txt's lines (104.2 and 110.7 s; 102.0 and 104.8 s).
    assert "bf16-compile: launcher / torchrun wall time = 1.0392 (medians 107.5 / 103.4 s of 2 and 2 runs)" in text


def test_a_start_that_failed_is_not_timed(recorded_call):
    runs = recorded_call / "runs.txt"
    runs.write_text(re.sub(r"bf16-compile launcher run 1: exit 0", "bf16-compile launcher run 1: exit 1",
                           runs.read_text()))
    text = summary(recorded_call)
    assert "bf16-compile: launcher / torchrun wall time = 1.0077 (medians 104.2 / 103.4 s of 1 and 2 runs)" in text


def test_without_a_hand_typed_run_there_is_no_ratio(recorded_call):
    for path in recorded_call.glob("*-torchrun-*.out"):
        path.unlink()
    text = summary(recorded_call)
    assert "launcher-1.out: tokens/s per GPU" in text
    assert "launcher / torchrun tokens/s" not in text
