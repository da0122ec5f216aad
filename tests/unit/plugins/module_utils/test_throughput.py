"""Throughput parsers and the degradation rule.

Which inputs are real (tests/fixtures/logs/README.md has the details):
- composer/: real MosaicML Composer logs, two normal and two degraded runs
  of one job, byte-identical copies.
- deepspeed/: real DeepSpeed 0.19.8 runs made on an H100 for these tests,
  three normal, one slowed from the start, one slowed from step 200.
- torchtitan/: real TorchTitan 0.2.2 runs made on an H100 for these tests,
  four normal, one slowed from the start, one slowed from step 210.
- benchmark/: the numbers of a real nccl-tests run in the benchmark's JSON
  shape (and one copy slowed by hand).
Written from the format description, not produced by a run:
- torchtitan/written/ and every line built inside the tests below.
"""

import gzip
import itertools
import json
import os
import random
import re
import shutil

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.throughput import DEFAULT_THRESHOLD, \
    ThroughputError, baseline_document, expand_logs, find_drop, judge_runs, load_baseline, parse_log, \
    render_baseline, robust_reference, summarize_run, throughput_report

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LOGS = os.path.join(REPO, "tests", "fixtures", "logs")
SHARED_COMPOSER = os.path.join(REPO, "..", "shared", "data", "composer-logs")

GOOD = ["composer-gpu-1-good.log", "composer-gpu-2-good.log"]
BAD = ["composer-gpu-1-bad.log", "composer-gpu-2-bad.log"]
# Train throughput/tokens_per_sec, Train throughput/device/tokens_per_sec
# and Train throughput/device/mfu of each real run (16 GPUs), as printed in
# its log.
COMPOSER_FIGURES = {
    "composer-gpu-1-good.log": (55803.1245, 3487.6953, 0.4826),
    "composer-gpu-2-good.log": (55822.7507, 3488.9219, 0.4828),
    "composer-gpu-1-bad.log": (36769.6582, 2298.1036, 0.3180),
    "composer-gpu-2-bad.log": (36656.8598, 2291.0537, 0.3170),
}
GOOD_PER_DEVICE = (3487.6953 + 3488.9219) / 2
DEEPSPEED_NORMAL = ["deepspeed-normal-1.log", "deepspeed-normal-2.log", "deepspeed-normal-3.log"]
TITAN_NORMAL = ["torchtitan-normal-1.log", "torchtitan-normal-2.log", "torchtitan-normal-3.log"]


def log(*parts):
    return os.path.join(LOGS, *parts)


def composer(name):
    return log("composer", name)


def report(paths, **kwargs):
    return throughput_report(paths, **kwargs)


def verdicts(result):
    return dict((os.path.basename(run["path"]), run["degraded"]) for run in result["runs"])


def test_fixtures_are_the_shared_real_logs():
    if not os.path.isdir(SHARED_COMPOSER):
        pytest.skip("no ../shared/data/composer-logs beside this clone to compare the copies with")
    for name in GOOD + BAD:
        with open(composer(name), "rb") as copy, open(os.path.join(SHARED_COMPOSER, name), "rb") as original:
            assert copy.read() == original.read(), name


@pytest.mark.parametrize("name", sorted(COMPOSER_FIGURES))
def test_real_composer_logs_give_their_printed_figures(name):
    run = summarize_run(composer(name), parse_log(composer(name)))
    tokens, per_device, mfu = COMPOSER_FIGURES[name]
    # Per device, so that runs on different numbers of GPUs compare; the
    # log's two figures say how many ran it.
    assert run["format"] == "composer" and run["metric"] == "tokens_per_sec_per_device"
    assert run["unit"] == "tokens/s per device" and (run["devices"], run["devices_from"]) == (16, "log")
    assert run["throughput"] == per_device and run["mfu"] == mfu
    assert run["first_step"] == run["last_step"] == run["steady_from_step"] == 11
    assert run["samples"] == run["measurements"] == 1 and run["spread"] is None and run["drop"] is None
    assert run["figures"]["tokens_per_sec"] == tokens
    assert set(run["figures"]) >= {"samples_per_sec", "batches_per_sec", "flops_per_sec", "flops_per_sec_per_device"}
    # The hand-written "# GOOD ..." / "# BAD ..." lines around the figure.
    assert "2 line(s) starting with '#' ignored as annotations" in run["notes"]
    assert run["warnings"] == []


def test_annotation_lines_are_not_log_content(tmp_path):
    with open(composer("composer-gpu-1-bad.log"), "rb") as handle:
        lines = handle.read().split(b"\r\n")
    without = tmp_path / "without-annotations.log"
    without.write_bytes(b"\r\n".join(line for line in lines if not line.startswith(b"#")))
    # An annotation that looks like a figure must not become one either.
    forged = tmp_path / "forged.log"
    forged.write_bytes(b"\r\n".join(
        line.replace(b"# BAD BAD", b"# Train throughput/tokens_per_sec: 99999 BAD") for line in lines))
    runs = [summarize_run(str(path), parse_log(str(path))) for path in (without, forged)]
    assert [run["throughput"] for run in runs] == [2298.1036, 2298.1036]


def test_real_composer_runs_degraded_ones_flagged_normal_ones_not():
    result = report([log("composer", "*.log")])
    assert verdicts(result) == {"composer-gpu-1-bad.log": True, "composer-gpu-1-good.log": False,
                                "composer-gpu-2-bad.log": True, "composer-gpu-2-good.log": False}
    baseline = result["baseline"]["tokens_per_sec_per_device"]
    assert baseline["value"] == pytest.approx(GOOD_PER_DEVICE)
    assert (baseline["source"], baseline["runs"], baseline["of_runs"]) == ("runs", 2, 4)
    below = dict((os.path.basename(run["path"]), run["below_baseline"]) for run in result["runs"])
    assert below["composer-gpu-1-bad.log"] == pytest.approx(0.3412, abs=2e-4)
    assert below["composer-gpu-2-bad.log"] == pytest.approx(0.3432, abs=2e-4)
    assert abs(below["composer-gpu-1-good.log"]) < 0.001 and abs(below["composer-gpu-2-good.log"]) < 0.001
    bad = [run for run in result["runs"] if run["degraded"]]
    assert bad[0]["reasons"] == ["34.1% below the baseline 3488.31 tokens/s per device (threshold 15%)"]
    assert result["warnings"] == []


def test_every_mix_with_no_more_degraded_than_normal_runs_is_judged_right():
    for good_count in (1, 2):
        for bad_count in range(1, good_count + 1):
            for goods in itertools.combinations(GOOD, good_count):
                for bads in itertools.combinations(BAD, bad_count):
                    names = list(goods) + list(bads)
                    result = report([composer(name) for name in names])
                    assert verdicts(result) == dict((name, name in BAD) for name in names), names


def test_with_most_runs_degraded_only_a_baseline_tells(tmp_path):
    names = ["composer-gpu-1-good.log"] + BAD
    result = report([composer(name) for name in names])
    # The runs alone cannot tell: nothing is flagged, and the warning says why.
    assert not any(verdicts(result).values())
    assert any("most runs are degraded: compare with a saved baseline" in w for w in result["warnings"])
    saved = tmp_path / "baseline.json"
    saved.write_text(report([composer(name) for name in GOOD], save_baseline=str(saved))["baseline_text"])
    judged = report([composer(name) for name in names], baseline=str(saved))
    assert verdicts(judged) == {"composer-gpu-1-good.log": False, "composer-gpu-1-bad.log": True,
                                "composer-gpu-2-bad.log": True}
    assert judged["baseline"]["tokens_per_sec_per_device"]["source"] == str(saved)
    assert judged["baseline"]["tokens_per_sec_per_device"]["runs"] == 2


def test_a_saved_baseline_judges_a_single_run(tmp_path):
    saved = tmp_path / "baseline.json"
    first = report([composer(name) for name in GOOD], save_baseline=str(saved))
    saved.write_text(first["baseline_text"])
    document = json.loads(first["baseline_text"])
    assert document["kind"] == "mlinfra.multinode.throughput_baseline" and document["version"] == 1
    entry = document["baselines"]["tokens_per_sec_per_device"]
    assert entry["value"] == pytest.approx(GOOD_PER_DEVICE) and entry["unit"] == "tokens/s per device"
    assert [os.path.basename(run["path"]) for run in entry["runs"]] == GOOD
    for name in GOOD + BAD:
        alone = report([composer(name)], baseline=str(saved))
        assert verdicts(alone) == {name: name in BAD}
        assert alone["warnings"] == []
    # A number does the same.
    assert verdicts(report([composer(BAD[0])], baseline=3488.3)) == {BAD[0]: True}
    assert verdicts(report([composer(BAD[0])], baseline="3488.3")) == {BAD[0]: True}
    # Without a baseline a single run is compared with itself only, and told so.
    alone = report([composer(BAD[0])])
    assert verdicts(alone) == {BAD[0]: False}
    assert "compared with itself only; give a baseline" in alone["warnings"][0]


def test_baseline_is_saved_from_the_normal_runs_only(tmp_path):
    target = str(tmp_path / "baseline.json")
    result = report([log("composer", "*.log")], save_baseline=target)
    assert not os.path.exists(target)   # the caller writes it
    entry = json.loads(result["baseline_text"])["baselines"]["tokens_per_sec_per_device"]
    assert [os.path.basename(run["path"]) for run in entry["runs"]] == GOOD
    assert render_baseline(json.loads(result["baseline_text"])) == result["baseline_text"]
    with pytest.raises(ThroughputError, match="every tokens_per_sec_per_device run is degraded: nothing normal"):
        report([composer(name) for name in BAD], baseline=3488.3, save_baseline=target)


def fake_runs(values, metric="tokens_per_sec_per_device"):
    return [{"path": "run-%02d.log" % index, "metric": metric, "unit": "tokens/s per device", "throughput": value,
             "drop": None, "reasons": [], "degraded": False} for index, value in enumerate(values)]


def test_run_to_run_noise_is_not_flagged_and_a_third_slower_run_is():
    rng = random.Random(7)
    for trial in range(200):
        count = rng.randint(2, 12)
        values = [55812.9 * rng.gauss(1.0, 0.03) for run_index in range(count)]
        runs = fake_runs(values)
        judge_runs(runs, DEFAULT_THRESHOLD)
        assert not any(run["degraded"] for run in runs), (trial, values)
        # One run 34% below the others, as the degraded Composer runs were.
        runs = fake_runs(values + [min(values) * 0.66])
        judge_runs(runs, DEFAULT_THRESHOLD)
        assert [run["degraded"] for run in runs] == [False] * count + [True], (trial, values)


def test_robust_reference_holds_until_half_the_runs_are_degraded():
    assert robust_reference([100, 101, 99, 66], 0.15) == (100, [0, 1, 2])
    assert robust_reference([100, 100, 66, 66], 0.15)[0] == 100
    assert robust_reference([100, 66, 100, 66, 66, 100], 0.15)[0] == 100
    # More than half degraded: the slow ones are the reference.
    assert robust_reference([100, 66, 66], 0.15)[0] == 66


def test_noisy_normal_runs_warn_that_the_threshold_is_within_the_noise():
    runs = fake_runs([100, 92, 108, 95, 105])
    warnings = judge_runs(runs, 0.15)[1]
    assert not any(run["degraded"] for run in runs)
    assert len(warnings) == 1 and "scatter by 7.4% (1.4826 MAD), so a threshold of 15% may flag noise" in warnings[0]


def test_real_deepspeed_runs():
    # Real runs on one H100: three normal ones (with their own single slow
    # steps), one slowed from the start, one slowed from step 200 on.
    names = DEEPSPEED_NORMAL + ["deepspeed-slow.log", "deepspeed-drop.log"]
    result = report([log("deepspeed", name) for name in names])
    runs = dict((os.path.basename(run["path"]), run) for run in result["runs"])
    assert verdicts(result) == dict((name, name in ("deepspeed-slow.log", "deepspeed-drop.log")) for name in names)
    for name in DEEPSPEED_NORMAL:
        run = runs[name]
        assert run["format"] == "deepspeed" and run["metric"] == "samples_per_sec" and run["unit"] == "samples/s"
        assert (run["measurements"], run["samples"], run["steady_from_step"], run["last_step"]) == (40, 39, 20, 400)
        assert run["drop"] is None and run["mfu"] is None
        assert "running_avg_samples_per_sec" in run["figures"] and "memory_allocated_gb" in run["figures"]
    assert runs["deepspeed-normal-1.log"]["throughput"] == pytest.approx(44301.585, abs=0.01)
    assert runs["deepspeed-slow.log"]["below_baseline"] == pytest.approx(0.375, abs=0.005)
    assert runs["deepspeed-slow.log"]["drop"] is None
    drop = runs["deepspeed-drop.log"]["drop"]
    # The wait began at step 200; the fall is found there.
    assert drop["step"] == 200 and drop["fraction"] == pytest.approx(0.31, abs=0.02)
    assert "fell 31.3% from step 200 on" in runs["deepspeed-drop.log"]["reasons"][1]


def test_a_drop_partway_is_flagged_even_when_the_median_is_normal(tmp_path):
    # The real drop run cut after step 270: its slow part (steps 200-270) is
    # a minority, so its median is normal and only the fall flags it.
    with open(log("deepspeed", "deepspeed-drop.log")) as handle:
        lines = handle.read().splitlines()
    kept = [line for line in lines
            if "global_step=" not in line or int(line.split("global_step=")[1].split(",")[0]) <= 270]
    cut = tmp_path / "deepspeed-drop-cut.log"
    cut.write_text("\n".join(kept) + "\n")
    result = report([str(cut)] + [log("deepspeed", name) for name in DEEPSPEED_NORMAL])
    run = result["runs"][0]
    assert run["last_step"] == 270 and run["below_baseline"] < DEFAULT_THRESHOLD
    assert run["degraded"] and run["drop"]["step"] == 200
    assert len(run["reasons"]) == 1 and run["reasons"][0].startswith("fell ")


def test_find_drop():
    steps = list(range(10, 310, 10))
    assert find_drop(steps, [100.0] * 30, 0.15) is None
    assert find_drop(steps, [100.0, 60.0] * 15, 0.15) is None
    falling = [100.0] * 12 + [66.0] * 18
    assert find_drop(steps, falling, 0.15) == {"step": 130, "before": 100.0, "after": 66.0,
                                               "fraction": pytest.approx(0.34)}
    # One slow step, or a dip that recovers, is not a drop.
    assert find_drop(steps, [100.0] * 14 + [20.0] + [100.0] * 15, 0.15) is None
    assert find_drop(steps, [100.0] * 10 + [60.0] * 4 + [100.0] * 16, 0.15) is None
    # A fall in the last sixth of the run (as real normal runs had, before
    # recovering) is too short to tell from noise.
    assert find_drop(steps, [100.0] * 25 + [66.0] * 5, 0.15) is None
    assert find_drop(steps, [100.0] * 22 + [66.0] * 8, 0.15)["step"] == 230
    # Too few measurements on one side to believe.
    assert find_drop(steps[:5], [100.0, 100.0, 100.0, 60.0, 60.0], 0.15) is None
    # Long runs are searched on block medians.
    long_steps = list(range(1, 5001))
    found = find_drop(long_steps, [100.0] * 3000 + [66.0] * 2000, 0.15)
    assert 2990 <= found["step"] <= 3026 and found["fraction"] == pytest.approx(0.34)


def test_real_torchtitan_runs():
    # Real runs on one H100: normal ones (with dips of their own that
    # recover), one slowed from the start, one slowed from step 210 on.
    names = TITAN_NORMAL + ["torchtitan-slow.log", "torchtitan-drop.log"]
    result = report([log("torchtitan", name) for name in names])
    assert verdicts(result) == dict((name, name in ("torchtitan-slow.log", "torchtitan-drop.log")) for name in names)
    runs = dict((os.path.basename(run["path"]), run) for run in result["runs"])
    normal = runs["torchtitan-normal-1.log"]
    assert normal["format"] == "torchtitan" and normal["metric"] == "tokens_per_sec_per_device"
    assert (normal["measurements"], normal["samples"], normal["steady_from_step"], normal["last_step"]) == \
        (41, 39, 20, 400)
    assert normal["throughput"] == 347946 and normal["notes"] == []
    assert set(normal["figures"]) == {"tokens_per_sec_per_device", "tflops", "mfu", "loss", "memory_gib"}
    assert normal["mfu"] == pytest.approx(0.0245, abs=0.001) and normal["figures"]["memory_gib"] == 1.52
    for name in TITAN_NORMAL:
        assert runs[name]["drop"] is None, name
    assert result["baseline"]["tokens_per_sec_per_device"]["value"] == 343000
    # The run that was not pinned to a core (another series, slower as a
    # whole) was 19% slower for its steps 330-390: too short to be a drop.
    unpinned = log("torchtitan", "torchtitan-normal-unpinned.log")
    assert summarize_run(unpinned, parse_log(unpinned))["drop"] is None
    drop = runs["torchtitan-drop.log"]
    assert drop["drop"]["step"] == 210 and drop["drop"]["fraction"] == pytest.approx(0.376, abs=0.01)
    assert runs["torchtitan-slow.log"]["below_baseline"] == pytest.approx(0.525, abs=0.01)


def test_torchtitan_lines_written_from_the_format():
    path = log("torchtitan", "written", "two-ranks.log")
    parsed = parse_log(path)
    assert parsed["format"] == "torchtitan"
    # Two ranks teed into one file: rank 0's series is the run's; the
    # "validate step: 100 ... tps:" line is not training throughput.
    assert parsed["notes"] == ["lines of ranks 0, 1; rank 0 read"]
    assert [m["step"] for m in parsed["measurements"]] == [1] + list(range(10, 201, 10))
    first = parsed["measurements"][0]["figures"]
    assert first == {"tokens_per_sec_per_device": 717.0, "tflops": 36.55, "mfu": pytest.approx(0.037),
                     "loss": 12.261, "memory_gib": 60.44}
    run = summarize_run(path, parsed)
    assert run["metric"] == "tokens_per_sec_per_device" and run["unit"] == "tokens/s per device"
    assert run["steady_from_step"] == 20 and run["samples"] == 19
    assert 0.3 < run["mfu"] < 0.35 and run["figures"]["tflops"] > 300
    old = summarize_run(log("torchtitan", "written", "old-wps.log"),
                        parse_log(log("torchtitan", "written", "old-wps.log")))
    assert old["metric"] == "tokens_per_sec_per_device" and old["last_step"] == 60
    assert "tflops" not in old["figures"] and old["mfu"] is not None


@pytest.mark.parametrize("line,step,tps,mfu", [
    ("step:  5  loss:  7.1234  memory: 12.34GiB(15.60%)  tps: 1,234  tflops: 56.78  mfu: 12.34%", 5, 1234.0, 0.1234),
    ("[rank3]:[titan] 2025-01-01 00:00:00,000 - root - INFO - \x1b[31mstep: 30  \x1b[32mloss:  2.5000  "
     "\x1b[34mtps: 12,345  \x1b[35mmfu: 40.00%\x1b[39m", 30, 12345.0, 0.40),
    ("epoch: 1 step: 40  loss (per sample): 2.1  tps: 987  tflops: 1.00  mfu: 1.00%", 40, 987.0, 0.01),
])
def test_torchtitan_line_variants(tmp_path, line, step, tps, mfu):
    path = tmp_path / "titan.log"
    path.write_text("Training starts at step 1\n" + line + "\n")
    measurement = parse_log(str(path))["measurements"][0]
    assert measurement["step"] == step
    assert measurement["figures"]["tokens_per_sec_per_device"] == tps
    assert measurement["figures"]["mfu"] == pytest.approx(mfu)


def test_deepspeed_old_timer_lines_and_the_flops_profiler(tmp_path):
    old = tmp_path / "old.log"
    old.write_text("".join("[INFO] [timer.py:199:stop] epoch=0/micro_step=%d/global_step=%d, SamplesPerSec=%s\n"
                           % (step, step, 100 + step) for step in range(10, 110, 10)))
    run = summarize_run(str(old), parse_log(str(old)))
    assert run["format"] == "deepspeed" and run["samples"] == 9 and run["throughput"] == 160
    profiler = tmp_path / "profiler.log"
    profiler.write_text(
        "-------------------------- DeepSpeed Flops Profiler --------------------------\n"
        "Profile Summary at step 10:\n"
        "%s%s\n" % ("samples/second: ".ljust(72), "123.45"))
    run = summarize_run(str(profiler), parse_log(str(profiler), "deepspeed"))
    assert run["throughput"] == 123.45 and run["notes"][0].startswith("no ThroughputTimer lines")


def test_real_benchmark_numbers():
    result = report([log("benchmark", "*.json")])
    runs = dict((os.path.basename(run["path"]), run) for run in result["runs"])
    bf16 = runs["allreduce-bf16.json"]
    assert bf16["format"] == "benchmark" and bf16["metric"] == "busbw" and bf16["unit"] == "GB/s"
    # 8 GiB, out-of-place 352.74 and in-place 354.12 GB/s.
    assert bf16["throughput"] == pytest.approx(353.43) and bf16["samples"] == 2 and bf16["measurements"] == 28
    assert bf16["figures"]["size"] == 8589934592 and bf16["figures"]["peak_busbw"] == 354.12
    assert bf16["figures"]["avg_busbw"] == pytest.approx(246.95, abs=0.1)   # nccl-tests: 246.954
    assert "collective: all_reduce" in bf16["notes"]
    assert verdicts(result) == {"allreduce-bf16-slowed.json": True, "allreduce-bf16.json": False,
                                "allreduce-fp32.json": False}


@pytest.mark.parametrize("document,message", [
    ('{"results": []}', "has no list 'results'"),
    ('{"results": [{"size": 8, "algbw": 1}]}', r"results\[0\] needs a numeric 'size' \(bytes\) and 'busbw'"),
    ('[1, 2]', "has no list 'results'"),
    ('{"results": [', "is not valid JSON"),
])
def test_benchmark_json_of_the_wrong_shape(tmp_path, document, message):
    path = tmp_path / "bench.json"
    path.write_text(document)
    with pytest.raises(ThroughputError, match=message):
        parse_log(str(path), "benchmark")


def test_gzip_logs(tmp_path):
    packed = tmp_path / "composer-gpu-1-good.log.gz"
    with open(composer("composer-gpu-1-good.log"), "rb") as source, gzip.open(str(packed), "wb") as target:
        shutil.copyfileobj(source, target)
    run = summarize_run(str(packed), parse_log(str(packed)))
    assert run["format"] == "composer" and run["throughput"] == 3487.6953


def test_warmup_steps():
    path = log("torchtitan", "torchtitan-normal-1.log")
    parsed = parse_log(path)
    # Step 1 of the real run: compilation and set-up, a fifteenth of the
    # steady speed.
    assert parsed["measurements"][0]["figures"]["tokens_per_sec_per_device"] == 22420
    everything = summarize_run(path, parsed, warmup_steps=0)
    assert everything["steady_from_step"] == 1 and everything["samples"] == 41
    all_warmup = summarize_run(path, parsed, warmup_steps=1000)
    assert all_warmup["samples"] == 1 and all_warmup["steady_from_step"] == 400
    assert all_warmup["warnings"] == ["all 41 measurements are within the first 1000 (warm-up) steps; the last "
                                      "one, at step 400, is used"]
    result = report([path], warmup_steps=1000)
    assert result["warnings"][-1].startswith(path + ": all 41 measurements")


def test_formats_of_different_metrics_are_judged_apart():
    result = report([composer(GOOD[0]), log("deepspeed", "deepspeed-normal-1.log")])
    assert sorted(result["baseline"]) == ["samples_per_sec", "tokens_per_sec_per_device"]
    assert "runs of 2 different metrics (tokens_per_sec_per_device, samples_per_sec)" in result["warnings"][0]
    # DeepSpeed's samples/s are the whole job's, and its log does not say on
    # how many devices: it cannot be put beside a run measured per device.
    assert result["warnings"][1] == (
        "%s: the whole job's samples/s and no number of devices in the log, so not compared with the runs measured "
        "per device; give devices (the job's number of GPUs) to compare them" % log("deepspeed", "deepspeed-normal-1.log"))
    with pytest.raises(ThroughputError, match="a numeric baseline is for runs of one metric"):
        report([composer(GOOD[0]), log("deepspeed", "deepspeed-normal-1.log")], baseline=100)


def composer_on(tmp_path, name, devices, keep_device_lines=True):
    """The real 16-GPU Composer log as the same job on ``devices`` GPUs
    would print it at the same speed per device: every whole-job figure
    scaled, the per-device ones kept. Written here from the real one; no
    real log of one job at two scales was found."""
    with open(composer(name), "rb") as handle:
        lines = handle.read().split(b"\r\n")
    scaled = []
    for line in lines:
        found = re.match(rb"^(\s*Train throughput/)((?:tokens|samples|batches|flops)_per_sec): (\S+)$", line)
        if found:
            line = b"%s%s: %.4f" % (found.group(1), found.group(2), float(found.group(3)) * devices / 16)
        elif b"Train throughput/device/" in line and not keep_device_lines:
            continue
        scaled.append(line)
    path = tmp_path / ("%dgpu-%s" % (devices, name))
    path.write_bytes(b"\r\n".join(scaled))
    return str(path)


def test_runs_on_different_numbers_of_gpus_are_compared_per_device(tmp_path):
    eight = composer_on(tmp_path, GOOD[0], 8)
    result = report([eight, composer(GOOD[1]), composer(BAD[0])])
    runs = dict((os.path.basename(run["path"]), run) for run in result["runs"])
    # Half the tokens/s of the 16-GPU runs, and as fast per device: normal.
    assert runs["8gpu-composer-gpu-1-good.log"]["figures"]["tokens_per_sec"] == pytest.approx(55803.1245 / 2)
    assert [(run["devices"], run["degraded"]) for run in runs.values()] == [(8, False), (16, False), (16, True)]
    assert result["warnings"] == []


def test_whole_job_figures_without_a_device_count_are_said_to_be_so(tmp_path):
    eight = composer_on(tmp_path, GOOD[0], 8, keep_device_lines=False)
    sixteen = composer_on(tmp_path, GOOD[1], 16, keep_device_lines=False)
    result = report([eight, sixteen])
    # Compared as whole-job figures the 8-GPU run looks degraded; the report
    # says why that comparison may not hold.
    assert [run["metric"] for run in result["runs"]] == ["tokens_per_sec", "tokens_per_sec"]
    assert result["degraded"] == [eight]
    assert result["warnings"][-1] == (
        "%s, %s: whole-job figures, and the logs do not say how many devices ran them: compared as they are, which "
        "holds only for runs on the same number of devices; give devices to compare per device" % (eight, sixteen))
    # Against a run measured per device they are not compared at all.
    mixed = report([eight, composer(GOOD[1])])
    assert sorted(mixed["baseline"]) == ["tokens_per_sec", "tokens_per_sec_per_device"]
    assert mixed["warnings"][1].startswith("%s: the whole job's tokens/s and no number of devices in the log" % eight)


def test_devices_given_turn_whole_job_figures_into_per_device_ones(tmp_path):
    path = log("deepspeed", "deepspeed-normal-1.log")
    alone = summarize_run(path, parse_log(path))
    halved = report([path], devices=2)["runs"][0]
    assert (halved["metric"], halved["unit"], halved["devices"], halved["devices_from"]) == (
        "samples_per_sec_per_device", "samples/s per device", 2, "given")
    assert halved["throughput"] == pytest.approx(alone["throughput"] / 2)
    # A log that says its count wins over the option, with a warning.
    run = report([composer(GOOD[0])], devices=8)["runs"][0]
    assert (run["devices"], run["devices_from"], run["throughput"]) == (16, "log", 3487.6953)
    assert run["warnings"] == ["its log says 16 devices ran it; that is used, not devices=8"]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ThroughputError, match="devices is the number of GPUs each run used, 1 or more"):
            report([path], devices=bad)


def test_a_file_in_no_known_format(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("nothing to see\nstep: 5 without a throughput\n# Train throughput/tokens_per_sec: 5\n")
    with pytest.raises(ThroughputError) as error:
        parse_log(str(text))
    assert str(error.value).startswith("%s is in no known format: none of its 3 lines" % text)
    assert "or name its format" in str(error.value)
    with pytest.raises(ThroughputError, match="has no torchtitan throughput lines"):
        parse_log(composer(GOOD[0]), "torchtitan")
    jsonl = tmp_path / "metrics.jsonl"
    jsonl.write_text('{"step": 1, "loss": 2}\n')
    with pytest.raises(ThroughputError, match=r"is in no known format.*\(.*has no list 'results'"):
        parse_log(str(jsonl))


def test_paths_and_globs(tmp_path):
    with pytest.raises(ThroughputError, match="logs is empty: give at least one log path or glob"):
        expand_logs([])
    missing = str(tmp_path / "runs" / "*.log")
    with pytest.raises(ThroughputError, match=r"^%s matches no file: check the pattern$" % missing.replace("*", r"\*")):
        expand_logs([missing])
    with pytest.raises(ThroughputError, match="is a directory: give the log files, for example"):
        expand_logs([str(tmp_path)])
    with pytest.raises(ThroughputError, match="does not exist: check the path"):
        expand_logs([str(tmp_path / "gone.log")])
    with pytest.raises(ThroughputError, match=r"matches no file \(relative to .*an absolute path avoids that\)"):
        expand_logs(["no-such-dir-here/*.log"])
    # Each file once, globs sorted.
    paths = expand_logs([log("composer", "*-good.log"), composer(GOOD[1])])
    assert [os.path.basename(path) for path in paths] == GOOD


def test_baseline_errors(tmp_path):
    metrics = ["tokens_per_sec"]
    with pytest.raises(ThroughputError, match="cannot read the baseline file .*: No such file"):
        load_baseline(str(tmp_path / "none.json"), metrics)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ThroughputError, match="is not JSON"):
        load_baseline(str(broken), metrics)
    other = tmp_path / "other.json"
    other.write_text('{"value": 3}')
    with pytest.raises(ThroughputError, match="is not a baseline file written by save_baseline"):
        load_baseline(str(other), metrics)
    saved = tmp_path / "saved.json"
    saved.write_text(render_baseline({"kind": "mlinfra.multinode.throughput_baseline", "version": 1,
                                      "baselines": {"busbw": {"value": 350.0}}}))
    with pytest.raises(ThroughputError, match=r"has no baseline for tokens_per_sec \(it has: busbw\)"):
        load_baseline(str(saved), metrics)
    with pytest.raises(ThroughputError, match="baseline must be a throughput above 0"):
        load_baseline(-5, metrics)
    assert load_baseline(str(saved), ["busbw"])["busbw"]["value"] == 350.0
    assert load_baseline(None, metrics) == {}


def test_options_out_of_range():
    with pytest.raises(ThroughputError, match="threshold is a fraction between 0 and 1"):
        report([composer(GOOD[0])], threshold=15)
    with pytest.raises(ThroughputError, match="warmup_steps must be 0 or more"):
        report([composer(GOOD[0])], warmup_steps=-1)
    with pytest.raises(ThroughputError, match="the directory of save_baseline .* does not exist: create it first"):
        report([composer(GOOD[0])], save_baseline="/nonexistent/baseline.json")


def test_baseline_document_lists_runs_deterministically():
    runs = [summarize_run(composer(name), parse_log(composer(name))) for name in GOOD]
    baselines = judge_runs(runs)[0]
    assert render_baseline(baseline_document(runs, baselines)) == render_baseline(baseline_document(runs, baselines))
