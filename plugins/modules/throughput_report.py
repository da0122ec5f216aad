#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: throughput_report
short_description: Throughput of training runs from their logs, and which runs are degraded
version_added: 0.1.0
description:
  - Reads one training log per run and returns each run's steady-state throughput, the baseline it is compared
    with, and whether the run is degraded. Meant for the sporadic slowdowns of multi-node training, where some
    runs of the same job go a third slower than the others and stay slow.
  - "Formats, recognised per file (O(format=auto)) or named:
    V(torchtitan): the metrics line TorchTitan logs every C(metrics.log_freq) steps,
    C(step: 10  loss:  7.1234  grad_norm:  1.2345  memory: 12.34GiB ...  tps: 1,234  tflops: 56.78  mfu: 12.34%),
    with or without colour codes and C([rankN]:) prefixes (the lowest rank's lines are read); tps is tokens per
    second per device.
    V(composer): MosaicML Composer's console logger, C([batch=11/100]:) followed by lines such as
    C(Train throughput/tokens_per_sec: 55803.1245) and C(Train throughput/device/mfu: 0.4826).
    V(deepspeed): DeepSpeed's ThroughputTimer line,
    C(epoch=0/micro_step=20/global_step=20, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=..., MemAllocated=...),
    printed every C(steps_per_print) steps when DeepSpeed logs at level info (its C(log_level) setting), and the
    form of releases before 0.8, C([timer.py:189:stop] 0/40, SamplesPerSec=83.48, ...); without such lines, the
    C(samples/second:) of the FLOPS profiler's summary.
    V(megatron): Megatron-LM's line C(iteration 43/ 100 | ... | elapsed time per iteration (ms): 5444.9 |
    throughput per GPU (TFLOP/s/GPU): 239.8 | ... | global batch size: 128 | lm loss: ... |), and Megatron-
    DeepSpeed's with C(samples/sec:) and C(approx flops per GPU:).
    V(benchmark): the benchmark's JSON, a document with a list C(results), one entry per message size (and per
    in-place or out-of-place run) with C(size) in bytes and C(busbw) and C(algbw) in GB/s, as nccl-tests
    reports them, for example
    C({\"collective\": \"all_reduce\", \"results\": [{\"size\": 8589934592, \"algbw\": 352.74, \"busbw\": 352.74}]}).
    Log files may be gzip-compressed (C(.gz))."
  - "The figure compared, per device so that runs on different numbers of GPUs compare: tokens/s per device for
    TorchTitan, Composer's C(throughput/device/tokens_per_sec) (samples/s or batches/s per device when the model
    reports no tokens), TFLOP/s per device for Megatron-LM with C(--log-throughput), and for the benchmark the bus
    bandwidth at the largest message size (the bandwidth-bound one; the small sizes measure latency). Figures of
    the whole job, samples/s of the global batch for DeepSpeed (C(CurrSamplesPerSec), the speed of the step it
    is printed at) and for Megatron-LM without C(--log-throughput) (the batch over the iteration's time), are
    divided by the number of devices where it is known: the log's own (Composer prints both figures, whose ratio
    it is), else O(devices). Where it is not, they are compared as they are, with a warning, and not with runs
    measured per device. A run's throughput is the median of its
    measurements after the warm-up steps (O(warmup_steps)); RV(runs[].spread) is their median absolute
    deviation over the median."
  - "A run is degraded when its throughput is more than O(threshold) below the baseline of its metric, or when
    it falls by more than O(threshold) partway through and stays down (RV(runs[].drop) then says from which
    step). Without O(baseline), the baseline is a robust median of the runs themselves: the median, taken
    again over the runs not more than O(threshold) below it until no more are set aside, so that up to half of
    the runs can be degraded without moving it. When more than half are, the runs alone cannot say which are
    normal (a warning says so): save a baseline from runs known to be normal (O(save_baseline)) and compare
    later runs with it."
  - "Why 15%: real logs of a Composer job with this problem (two nodes over InfiniBand on Kubernetes, 16 GPUs)
    give 55803.1 and 55822.8 tokens/s for two normal runs (MFU 0.483), which differ by 0.04%, and 36769.7 and
    36656.9 tokens/s for two degraded ones (MFU 0.318 and 0.317), 34.1% and 34.3% below the normal runs' median
    55812.9. Normal runs of small models on one H100, noisier from step to step, lie within 3.4% (three
    TorchTitan runs) and 7% (three DeepSpeed runs) of their median. 15% is under half the drop seen and over
    twice that noise. When the normal runs scatter so much that O(threshold) is within three standard
    deviations (1.4826 MAD) of them, a warning says so."
  - "What separates the degraded runs from the normal ones (RV(attribution)), when facts were recorded beside
    the logs: a run's facts file is named like its log with the extension C(.facts.json) (C(run-03.json) ->
    C(run-03.facts.json), C(h-kim-0.log.gz) -> C(h-kim-0.facts.json)); C(soak.yml) writes one per run, and
    for runs of a cluster the collection did not deploy they can be written by hand, as JSON
    C({\"run\": 3, \"pods\": [{\"pod\": \"train-0\", \"node\": \"gpu-7\", \"uid\": \"...\",
    \"placement\": {...}, \"rails\": [...], \"port_counters\": {...}}]}) of which only C(pods) and each
    pod's C(node) are required (the filter C(mlinfra.multinode.soak_run_facts) documents every key). Facts
    files matched by a glob in O(logs) are not read as logs."
  - Only O(save_baseline) changes anything; the task reports C(changed) only when the file is written (or,
    in check mode, would be), and never writes in check mode.
  - The same code runs without Ansible, in pods and on laptops, as the C(mlinfra throughput-report) command in
    the collection's C(files/bin).
author:
  - mlinfra maintainers (@mlinfra)
options:
  logs:
    description:
      - Log files, or glob patterns such as V(/var/log/train/run-*.log); one run per file. A pattern that matches
        no file, a missing file, and a file in no known format fail the task, naming the path.
      - Relative paths are relative to the directory the module runs in; absolute ones avoid surprises.
    type: list
    elements: path
    required: true
  format:
    description:
      - Format of every file. V(auto) recognises each file by its lines (a file holding lines of several
        formats is read as the one it has most measurements of).
    type: str
    choices: [auto, torchtitan, composer, deepspeed, megatron, benchmark]
    default: auto
  warmup_steps:
    description:
      - Measurements logged at step this number or earlier are warm-up and left out. The default, 10, drops
        TorchTitan's step 1 (compilation, memory allocation, NCCL set-up) and its step 10, which still averages
        over early steps, and DeepSpeed's first print (every 10 steps by default), while keeping Composer's
        first figure, which it reports only once its speed-monitor window of batches is full (batch 11 in the
        Composer logs above).
      - When a run has no measurement after the warm-up, its last one is used, with a warning.
      - Does not apply to the benchmark's JSON, whose warm-up iterations the benchmark leaves out itself.
    type: int
    default: 10
  threshold:
    description:
      - How far below the baseline a run's throughput must be to count as degraded, as a fraction (V(0.15) is
        15%). The same fraction is the fall within one run that counts as a drop.
    type: float
    default: 0.15
  baseline:
    description:
      - Compare with this instead of the runs' own robust median. Either a throughput in the unit of the runs'
        metric (only for runs of a single metric), or the path of a file written by O(save_baseline) earlier.
    type: raw
  devices:
    description:
      - How many GPUs ran each run whose log does not say, to compare figures of the whole job per device. A log
        that says it wins, with a warning when it differs.
    type: int
  save_baseline:
    description:
      - Write a baseline file here, JSON with, per metric, the median throughput of this task's runs that are
        not degraded and those runs' paths, throughputs and times. Pass it as O(baseline) later.
      - Left as it is when its content would not change. Its directory must exist.
      - Fails, writing nothing, when every run of a metric is degraded.
    type: path
  fail_on_degraded:
    description:
      - Fail the task when a run is degraded, writing no baseline file. By default the task only reports.
    type: bool
    default: false
attributes:
  check_mode:
    description: Reads and judges the logs as in a normal run; O(save_baseline) is not written.
    support: full
  diff_mode:
    description: Shows the change to the O(save_baseline) file.
    support: full
notes:
  - A run's time (RV(runs[].time)) is its log file's modification time.
  - "A fall within a run counts only when it lasts until the run's end, for at least a quarter of the
    measurements after the warm-up (and at least three), with three quarters of the measurements on each side
    of it on their side: real normal runs had dips of 20-30% that lasted up to a sixth of the run and
    recovered. A run needs at least six measurements after the warm-up for this. The Composer logs above hold
    one throughput figure each (their runs stopped at batch 11), so those runs can only be compared with other
    runs."
  - Needs only the Python standard library where it runs.
"""

EXAMPLES = r"""
- name: Judge the last runs of a job against each other
  mlinfra.multinode.throughput_report:
    logs:
      - /var/log/train/run-*.log
  register: throughput

- name: Show the degraded ones and why
  ansible.builtin.debug:
    msg: "{{ item.path }}: {{ item.reasons | join('; ') }}"
  loop: "{{ throughput.runs | selectattr('degraded') }}"
  loop_control:
    label: "{{ item.path }}"

- name: Save a baseline from runs known to be normal
  mlinfra.multinode.throughput_report:
    logs: [/var/log/train/good-*.log]
    save_baseline: /var/lib/mlinfra/throughput-baseline.json

- name: Fail when a new run is more than 15% below that baseline
  mlinfra.multinode.throughput_report:
    logs: [/var/log/train/latest.log]
    baseline: /var/lib/mlinfra/throughput-baseline.json
    fail_on_degraded: true

- name: Benchmark results against a known bus bandwidth in GB/s
  mlinfra.multinode.throughput_report:
    logs: [/tmp/allreduce-*.json]
    format: benchmark
    baseline: 350
    threshold: 0.1
"""

RETURN = r"""
runs:
  description: One entry per log file, in the order of O(logs) (the files of a glob sorted by name).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Absolute path of the log.
      type: str
    format:
      description: V(torchtitan), V(composer), V(deepspeed), V(megatron) or V(benchmark).
      type: str
    metric:
      description: >-
        The figure compared: V(tokens_per_sec_per_device), V(samples_per_sec_per_device),
        V(batches_per_sec_per_device), V(tflops_per_device), V(busbw), or a whole job's V(tokens_per_sec),
        V(samples_per_sec) or V(batches_per_sec) when the number of devices is not known.
      type: str
    devices:
      description: How many devices ran the run; null when neither its log nor O(devices) says.
      type: int
    devices_from:
      description: Where RV(runs[].devices) comes from, V(log) or V(given); null when unknown.
      type: str
    unit:
      description: Its unit.
      type: str
      sample: tokens/s per device
    throughput:
      description: The run's steady-state value of RV(runs[].metric), the median after the warm-up steps.
      type: float
      sample: 3487.6953
    figures:
      description: >-
        Median after the warm-up of every figure the log has (for Composer for example tokens_per_sec,
        tokens_per_sec_per_device, samples_per_sec, flops_per_sec, mfu; for TorchTitan tflops, mfu, loss,
        memory_gib; for the benchmark busbw, algbw and size at the largest size, avg_busbw and peak_busbw).
      type: dict
    mfu:
      description: Model FLOPS utilisation as a fraction (TorchTitan's percentage divided by 100), or null.
      type: float
      sample: 0.4826
    measurements:
      description: Throughput measurements in the log (result entries for the benchmark).
      type: int
    samples:
      description: How many of them the throughput rests on.
      type: int
    first_step:
      description: Step of the first measurement (null for the benchmark).
      type: int
    last_step:
      description: Step of the last measurement, how far the run got as far as its log says.
      type: int
    steady_from_step:
      description: Step of the first measurement after the warm-up.
      type: int
    spread:
      description: Median absolute deviation of those measurements over their median; null for fewer than two.
      type: float
    mtime:
      description: Modification time of the log, seconds since the epoch.
      type: float
    time:
      description: The same in UTC, ISO 8601.
      type: str
      sample: "2026-11-22T07:56:02Z"
    baseline:
      description: The baseline this run was compared with.
      type: float
    below_baseline:
      description: How far below it the run is, as a fraction (negative when above).
      type: float
      sample: 0.3412
    drop:
      description: The fall within the run, or null when the throughput does not fall and stay lower.
      type: dict
      contains:
        step:
          description: The step from which the throughput stays lower.
          type: int
        before:
          description: Median throughput before that step.
          type: float
        after:
          description: Median throughput from that step on.
          type: float
        fraction:
          description: The throughput lost, as a fraction of RV(runs[].drop.before).
          type: float
          sample: 0.3762
    degraded:
      description: Whether the run is degraded.
      type: bool
    reasons:
      description: Why it is degraded; empty when it is not.
      type: list
      elements: str
      sample: ["34.1% below the baseline 3488.31 tokens/s per device (threshold 15%)"]
    notes:
      description: How the log was read (ranks, lines ignored as hand-written annotations, and so on).
      type: list
      elements: str
    warnings:
      description: What may make this run's figure less reliable.
      type: list
      elements: str
baseline:
  description: The baseline used per metric, a mapping of the metric's name (RV(runs[].metric)) to the keys below.
  returned: always
  type: dict
  sample:
    tokens_per_sec_per_device: {value: 3488.3086, unit: tokens/s per device, source: runs, runs: 2, of_runs: 4, spread: 0.00018}
  contains:
    value:
      description: The baseline throughput.
      type: float
    unit:
      description: Its unit.
      type: str
    source:
      description: V(runs) (the runs' robust median), V(given) (a number in O(baseline)), or the baseline file's path.
      type: str
    runs:
      description: How many runs it rests on (null for a number).
      type: int
    of_runs:
      description: How many runs of this metric were judged.
      type: int
    spread:
      description: Median absolute deviation of the runs it rests on over their median (null when unknown).
      type: float
attribution:
  description: >-
    What separates the degraded runs from the normal ones, from the facts beside the logs; null when no log
    has facts. Each factor (a node, a pair of nodes, a pod by uid, a pod's CPUs off its GPUs' NUMA node, a GPU
    far from its NIC, a port counter that moved more than twice its usual rate per GB) is scored by its share
    of the degraded runs less its share of the normal runs; those in more than half the degraded runs and
    scoring at least 0.5 are listed, the best first.
  returned: always
  type: dict
  contains:
    verdict:
      description: >-
        V(attributed), V(nothing separates) (said plainly, with where to look next), V(no run degraded),
        V(every run degraded) (nothing to compare with: the factors they share are listed) or V(no facts)
        (the degraded runs have none).
      type: str
    summary:
      description: The verdict in a sentence, naming the first factor.
      type: str
      sample: "degraded runs 1, 3: symbol_error moved on node-b mlx5_6/1 (net1) (in 2 of 2 degraded runs, 0 of 2 normal runs)"
    factors:
      description: The separating factors, best first.
      type: list
      elements: dict
      contains:
        kind:
          description: V(counter), V(placement), V(rail), V(node), V(node_pair) or V(pod).
          type: str
        factor:
          description: What it is.
          type: str
          sample: symbol_error moved on node-b mlx5_6/1 (net1)
        score:
          description: Its share of the degraded runs less its share of the normal runs (1 at best).
          type: float
        degraded_runs:
          description: The degraded runs it was found in.
          type: list
          elements: int
        normal_runs:
          description: The normal runs it was found in.
          type: list
          elements: int
        in_degraded:
          description: The same in words.
          type: str
          sample: 2 of 2 degraded runs
        in_normal:
          description: The same in words.
          type: str
        evidence:
          description: What it was in each degraded run (a counter's delta, a pod's placement, ...).
          type: list
          elements: str
        nodes:
          description: The node or nodes it names; empty for a placement.
          type: list
          elements: str
        port:
          description: The RDMA port of a counter; null for other kinds.
          type: str
        counter:
          description: The counter's name; null for other kinds.
          type: str
        moved:
          description: How much a counter moved over the degraded runs; 0 for other kinds.
          type: int
    degraded_runs:
      description: The numbers of the degraded runs with facts.
      type: list
      elements: int
    normal_runs:
      description: The numbers of the normal runs with facts.
      type: list
      elements: int
    runs_without_facts:
      description: The numbers of the judged runs without facts, left out.
      type: list
      elements: int
degraded:
  description: Paths of the degraded runs.
  returned: always
  type: list
  elements: str
threshold:
  description: The threshold used.
  returned: always
  type: float
warmup_steps:
  description: The warm-up steps left out.
  returned: always
  type: int
baseline_file:
  description: The O(save_baseline) file, whether it was written, and its content.
  returned: when O(save_baseline) is given
  type: dict
  contains:
    path:
      description: Its path.
      type: str
    written:
      description: Whether it was written by this task (false in check mode and when it was already up to date).
      type: bool
    content:
      description: The baseline document, as written to the file (what O(baseline) reads back).
      type: dict
      contains:
        kind:
          description: V(mlinfra.multinode.throughput_baseline), which marks the file as a baseline.
          type: str
        version:
          description: Version of the document's layout.
          type: int
          sample: 1
        baselines:
          description: The metric's name (RV(runs[].metric)) to its baseline, a mapping with the keys below.
          type: dict
          contains:
            value:
              description: Median throughput of this report's runs of that metric that are not degraded.
              type: float
            unit:
              description: Its unit.
              type: str
            spread:
              description: Median absolute deviation of those runs over their median; null for fewer than two.
              type: float
            runs:
              description: Those runs.
              type: list
              elements: dict
              contains:
                path:
                  description: Absolute path of the run's log.
                  type: str
                format:
                  description: The log's format, as in RV(runs[].format).
                  type: str
                throughput:
                  description: The run's throughput.
                  type: float
                time:
                  description: Modification time of the log in UTC, ISO 8601.
                  type: str
no_throughput_lines:
  description: >-
    On failure, whether it failed because a log holds no throughput line of O(format) (or, with V(auto), of any
    known format): a run that succeeded without logging its throughput, for a caller that allows one.
  returned: failure
  type: bool
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.mlinfra.multinode.plugins.module_utils.common.files import write_atomically
from ansible_collections.mlinfra.multinode.plugins.module_utils.report.throughput import DEFAULT_THRESHOLD, \
    DEFAULT_WARMUP_STEPS, FORMATS, ThroughputError, baseline_file_state, throughput_report
from ansible_collections.mlinfra.multinode.plugins.module_utils.report.throughput_logs import NoThroughputLines


def argument_spec():
    return dict(
        logs=dict(type="list", elements="path", required=True),
        format=dict(type="str", choices=list(FORMATS), default="auto"),
        warmup_steps=dict(type="int", default=DEFAULT_WARMUP_STEPS),
        threshold=dict(type="float", default=DEFAULT_THRESHOLD),
        baseline=dict(type="raw"),
        save_baseline=dict(type="path"),
        devices=dict(type="int"),
        fail_on_degraded=dict(type="bool", default=False),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        report = throughput_report(params["logs"], fmt=params["format"], warmup_steps=params["warmup_steps"],
                                   threshold=params["threshold"], baseline=params["baseline"],
                                   save_baseline=params["save_baseline"], devices=params["devices"])
    except ThroughputError as exc:
        module.fail_json(msg=str(exc), changed=False, no_throughput_lines=isinstance(exc, NoThroughputLines))
    text = report.pop("baseline_text")
    # Ansible returns what module.warn() is given as the result's warnings.
    for warning in report.pop("warnings"):
        module.warn(warning)
    if report["degraded"] and params["fail_on_degraded"]:
        runs = [run for run in report["runs"] if run["degraded"]]
        attribution = report["attribution"]
        module.fail_json(msg="%d of %d run(s) degraded: %s%s" % (
            len(runs), len(report["runs"]), "; ".join("%s: %s" % (run["path"], ", ".join(run["reasons"]))
                                                      for run in runs),
            "; attribution: %s" % attribution["summary"] if attribution else ""), changed=False, **report)
    changed, result = False, dict(report)
    if params["save_baseline"]:
        path = params["save_baseline"]
        changed, current = baseline_file_state(path, text)
        if changed and not module.check_mode:
            try:
                write_atomically(path, text)
            except (IOError, OSError) as exc:
                module.fail_json(msg="cannot write save_baseline %s: %s" % (path, exc), changed=False, **report)
        result["baseline_file"] = {"path": path, "written": changed and not module.check_mode,
                                   "content": json.loads(text)}
        if module._diff:
            result["diff"] = {"before": current, "after": text, "before_header": path, "after_header": path}
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
