"""throughput_report run by Ansible itself on this machine, and the same code
as the mlinfra throughput-report command without Ansible.

The Composer and DeepSpeed logs are real runs' (tests/fixtures/logs/README.md);
the TorchTitan ones are written from the format.
"""

import json
import os
import subprocess
import sys

from ansible_cli import BIN, REPO, ansible_env, run_module
from module_call import call_module

LOGS = os.path.join(REPO, "tests", "fixtures", "logs")
COMPOSER = os.path.join(LOGS, "composer")
GOOD = [os.path.join(COMPOSER, "composer-gpu-%d-good.log" % gpu) for gpu in (1, 2)]
BAD = [os.path.join(COMPOSER, "composer-gpu-%d-bad.log" % gpu) for gpu in (1, 2)]


def module(args, check=False):
    return call_module("throughput_report", args, check=check)


def module_with_diff(args, check=False):
    cmd = [os.path.join(BIN, "ansible"), "localhost", "-c", "local", "--diff",
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-m", "mlinfra.multinode.throughput_report", "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, check=False)
    start = proc.stdout.find("{")
    assert start >= 0, proc.stdout + proc.stderr
    return json.JSONDecoder().raw_decode(proc.stdout[start:])[0]["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_real_composer_runs_through_ansible():
    result = run_module("throughput_report", {"logs": [os.path.join(COMPOSER, "*.log")]})
    assert not result.get("failed") and result["changed"] is False
    assert sorted(result["degraded"]) == sorted(BAD)
    assert dict((run["path"], run["degraded"]) for run in result["runs"]) == dict(
        [(path, False) for path in GOOD] + [(path, True) for path in BAD])
    baseline = result["baseline"]["tokens_per_sec_per_device"]
    assert round(baseline["value"], 4) == 3488.3086 and baseline["source"] == "runs"
    assert (result["threshold"], result["warmup_steps"]) == (0.15, 10)
    assert "baseline_file" not in result and not result.get("warnings")
    run = [run for run in result["runs"] if run["path"] == BAD[0]][0]
    assert run["throughput"] == 2298.1036 and run["mfu"] == 0.318 and run["unit"] == "tokens/s per device"
    assert run["devices"] == 16 and run["figures"]["tokens_per_sec"] == 36769.6582
    assert run["reasons"] == ["34.1% below the baseline 3488.31 tokens/s per device (threshold 15%)"]


def test_save_baseline_only_outside_check_mode_then_idempotent(tmp_path):
    target = str(tmp_path / "baseline.json")
    args = {"logs": GOOD, "save_baseline": target}
    checked = module(args, check=True)
    assert checked["changed"] is True and checked["baseline_file"]["written"] is False
    assert not os.path.exists(target)
    written = module(args)
    assert written["changed"] is True and written["baseline_file"]["written"] is True
    with open(target) as handle:
        saved = json.load(handle)
    assert saved == written["baseline_file"]["content"]
    assert round(saved["baselines"]["tokens_per_sec_per_device"]["value"], 4) == 3488.3086
    again = module(args)
    assert again["changed"] is False and again["baseline_file"]["written"] is False
    assert module(args, check=True)["changed"] is False
    # A later single run against the saved baseline.
    bad = module({"logs": [BAD[1]], "baseline": target})
    assert bad["degraded"] == [BAD[1]] and bad["baseline"]["tokens_per_sec_per_device"]["source"] == target
    good = module({"logs": [GOOD[0]], "baseline": target})
    assert good["degraded"] == [] and good["changed"] is False


def test_diff_of_the_baseline_file(tmp_path):
    target = str(tmp_path / "baseline.json")
    result = module_with_diff({"logs": GOOD, "save_baseline": target}, check=True)
    assert result["changed"] is True and not os.path.exists(target)
    assert result["diff"]["before"] == "" and '"kind": "mlinfra.multinode.throughput_baseline"' in \
        result["diff"]["after"]


def test_fail_on_degraded_fails_and_writes_nothing(tmp_path):
    target = str(tmp_path / "baseline.json")
    result = module({"logs": GOOD + [BAD[0]], "fail_on_degraded": True, "save_baseline": target})
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == "1 of 3 run(s) degraded: %s: 34.1%% below the baseline 3488.31 tokens/s per device " \
                            "(threshold 15%%)" % BAD[0]
    assert result["degraded"] == [BAD[0]] and not os.path.exists(target)
    assert not module({"logs": GOOD, "fail_on_degraded": True}).get("failed")


def test_numeric_baseline_and_warnings_on_real_deepspeed_runs():
    logs = [os.path.join(LOGS, "deepspeed", name) for name in
            ("deepspeed-normal-1.log", "deepspeed-drop.log")]
    result = module({"logs": logs, "baseline": 42768.2})
    assert result["degraded"] == [logs[1]]
    assert result["baseline"]["samples_per_sec"]["source"] == "given"
    drop = result["runs"][1]["drop"]
    assert drop["step"] == 200
    one = module({"logs": [logs[0]]})
    assert "compared with itself only" in one["warnings"][0]


def test_errors_name_the_path_and_the_fix_and_write_nothing(tmp_path):
    target = str(tmp_path / "baseline.json")
    unknown = tmp_path / "unknown.log"
    unknown.write_text("hello\n")
    cases = [
        ({"logs": []}, "logs is empty: give at least one log path or glob"),
        ({"logs": [str(tmp_path / "runs-*.log")]}, "%s matches no file: check the pattern"
         % (tmp_path / "runs-*.log")),
        ({"logs": [str(unknown)]}, "%s is in no known format" % unknown),
        ({"logs": GOOD, "threshold": 15}, "threshold is a fraction between 0 and 1"),
        ({"logs": GOOD, "baseline": str(tmp_path / "none.json")}, "cannot read the baseline file"),
        ({"logs": BAD, "baseline": 3488.3}, "every tokens_per_sec_per_device run is degraded: nothing normal to save"),
        ({"logs": GOOD, "format": "benchmark"}, "is not valid JSON"),
    ]
    for args, message in cases:
        result = module(dict(args, save_baseline=target))
        assert result["failed"] is True and result["changed"] is False, args
        assert message in result["msg"], (args, result["msg"])
        assert not os.path.exists(target)
    result = module({"logs": GOOD, "format": "nccl"})
    assert result["failed"] and "value of format must be one of: auto, torchtitan, composer, deepspeed, megatron, benchmark" \
        in result["msg"]


def command(*args):
    # -S: no site-packages, so Ansible cannot be imported; the command must
    # not need it.
    return subprocess.run([sys.executable, "-S", os.path.join(REPO, "files", "bin", "mlinfra"), "throughput-report"]
                          + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=60, check=False)


def test_command_without_ansible(tmp_path):
    proc = command(os.path.join(COMPOSER, "*.log"))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["run", "format", "throughput", "unit", "vs", "base", "mfu", "steps", "verdict"]
    assert lines[1].split()[:9] == ["composer-gpu-1-bad.log", "composer", "2298.1", "tokens/s", "per", "device",
                                    "-34.1%", "0.318", "11-11"]
    assert "DEGRADED: 34.1% below the baseline 3488.31 tokens/s per device (threshold 15%)" in lines[1]
    assert lines[2].endswith("  ok")
    assert "baseline tokens_per_sec_per_device: 3488.31 tokens/s per device (robust median of 2 of 4 runs); degraded when more than " \
           "15% below" in proc.stdout
    assert "4 run(s), 2 degraded" in proc.stdout
    # The same report as the module, as JSON.
    as_json = command("--output", "json", os.path.join(COMPOSER, "*.log"))
    report = json.loads(as_json.stdout)
    assert report["degraded"] == module({"logs": [os.path.join(COMPOSER, "*.log")]})["degraded"]
    target = str(tmp_path / "baseline.json")
    saved = command("--save-baseline", target, *GOOD)
    assert saved.returncode == 0 and "baseline written to %s" % target in saved.stdout
    assert "baseline unchanged in" in command("--save-baseline", target, *GOOD).stdout
    judged = command("--baseline", target, BAD[0])
    assert judged.returncode == 1 and "DEGRADED" in judged.stdout
    broken = command(str(tmp_path / "nothing-*.log"))
    assert broken.returncode == 2 and broken.stdout == ""
    assert broken.stderr == "mlinfra throughput-report: %s matches no file: check the pattern\n" % (
        tmp_path / "nothing-*.log")


def test_documentation_renders():
    proc = subprocess.run([os.path.join(BIN, "ansible-doc"), "--json", "mlinfra.multinode.throughput_report"],
                          cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["mlinfra.multinode.throughput_report"]["doc"]
    assert sorted(doc["options"]) == ["baseline", "devices", "fail_on_degraded", "format", "logs", "save_baseline", "threshold",
                                      "warmup_steps"]
    assert doc["options"]["threshold"]["default"] == 0.15 and doc["options"]["warmup_steps"]["default"] == 10
