"""The throughput readers on real training logs that users pasted into public
issue threads (tests/fixtures/logs/real, each file's source and what its
lines say in SOURCES.md there): TorchTitan with and without rank prefixes,
Megatron-LM with and without its per-GPU throughput field, and DeepSpeed's
timer lines from 2020 to 2023, each figure as printed."""

import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.throughput import parse_log

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "logs", "real")


def series(name, figure):
    parsed = parse_log(os.path.join(REAL, name + ".log"))
    return parsed, [(entry["step"], round(entry["figures"][figure], 3)) for entry in parsed["measurements"]]


def test_every_real_log_is_read_and_has_a_source():
    names = sorted(name for name in os.listdir(REAL) if name.endswith(".log"))
    assert len(names) >= 8
    with open(os.path.join(REAL, "SOURCES.md"), encoding="utf-8") as handle:
        sources = handle.read()
    for name in names:
        assert "| `%s` |" % name in sources and parse_log(os.path.join(REAL, name))["measurements"], name


def test_torchtitan_rank_zero_with_other_lines_between():
    parsed, tps = series("torchtitan-rank0-prefix-gc-profiler-lines", "tokens_per_sec_per_device")
    assert parsed["format"] == "torchtitan"
    assert tps == [(200, 5856), (210, 5593), (220, 5868), (230, 5869), (240, 5864), (250, 5862)]


def test_torchtitan_lines_of_every_rank_without_a_prefix_count_each_step_once():
    parsed, tps = series("torchtitan-all-ranks-unprefixed-grad-norm", "tokens_per_sec_per_device")
    assert tps == [(4, 10050), (5, 10007)]
    assert parsed["notes"] == ["8 lines for 2 steps without a rank prefix (every rank's); the first of each step read"]


def test_megatron_per_gpu_throughput_and_the_job_s_samples_per_second():
    parsed, tflops = series("megatron-mixtral-16xh100-tflops-per-gpu", "tflops_per_device")
    assert parsed["format"] == "megatron" and tflops == [(43, 239.8), (44, 236.0), (45, 228.4)]
    # 128 samples per iteration of 5444.9 ms.
    assert series("megatron-mixtral-16xh100-tflops-per-gpu", "samples_per_sec")[1][0] == (43, round(128 / 5.4449, 3))


def test_megatron_without_a_throughput_field_gives_the_global_batch_over_the_iteration_time():
    parsed, samples = series("megatron-llm-no-throughput-field-elapsed-only", "samples_per_sec")
    assert parsed["format"] == "megatron"
    assert samples == [(step, round(1024 / (ms / 1000), 3)) for step, ms in
                       ((122, 86545.2), (123, 87871.6), (124, 89474.8), (125, 89075.2))]
    assert all("tflops_per_device" not in entry["figures"] for entry in parsed["measurements"])


@pytest.mark.parametrize("name, expected", [
    # Before 0.5: one SamplesPerSec after "<epoch>/<step>,", here among notebook output.
    ("deepspeed-old-timer-samplespersec-ipython-noise", [(40, 83.486), (50, 83.738)]),
    # 0.7.7: CurrSamplesPerSec, the step's own speed, beside the running average.
    ("deepspeed-0.7.7-stdout-prefix-runningavg-currsamples",
     [(17, 159.629), (18, 145.089), (19, 157.806), (20, 155.105), (21, 155.011), (22, 155.144)]),
    # 2020, pasted as a Markdown quote: "[INFO <date>] 0/450, SamplesPerSec=...".
    ("deepspeed-2020-blockquote-samplespersec", [(450, 7.459)]),
    # Megatron-DeepSpeed prints both for one step; DeepSpeed's timer is read.
    ("deepspeed-megatron-epoch-microstep-globalstep-plus-samples-sec", [(34, 8.009)]),
])
def test_deepspeed_timer_lines_of_every_release(name, expected):
    parsed, samples = series(name, "samples_per_sec")
    assert parsed["format"] == "deepspeed" and samples == expected
