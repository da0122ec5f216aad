# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Training throughput from logs, and which runs are degraded.

One parser per log format (TorchTitan, MosaicML Composer, DeepSpeed,
Megatron-LM, the benchmark's JSON); each run's steady-state throughput is the median of its
measurements after the warm-up steps. A run is degraded when its throughput
is more than ``threshold`` below the reference of its metric (the robust
centre of the runs, or a saved baseline), or when it drops by more than that
partway through and stays down.

Standard library only: shared by the ``throughput_report`` module and the
command ``mlinfra-throughput-report``, which runs in pods and on laptops
without Ansible.
"""

from __future__ import absolute_import, division, print_function

import argparse
import glob
import gzip
import json
import math
import os
import re
import sys
import time

from .common import median, write_atomically
from .degradation import CANNOT_TELL, NOISE_SIGMAS, FactsError, attribute, facts_path, is_facts_file, read_facts

__metaclass__ = type

FORMATS = ("auto", "torchtitan", "composer", "deepspeed", "megatron", "benchmark")
LOG_FORMATS = FORMATS[1:]

# The two normal runs of the real Composer logs (tests/fixtures/logs) differ
# by 0.04% in tokens/s and the two degraded ones are 34.1% and 34.3% below
# them: 15% is less than half that drop and leaves room for noise hundreds
# of times larger than the normal runs showed (and twice the 7% of the
# noisier real DeepSpeed runs there; the real TorchTitan ones lie within 3.4%).
DEFAULT_THRESHOLD = 0.15

# TorchTitan logs step 1 (compilation, allocator growth, NCCL communicator
# set-up) and then every 10 steps by default; DeepSpeed prints every 10 steps
# by default; Composer reports throughput only once its speed-monitor window
# is full (batch 11 in the real logs). Dropping what is logged at steps 1-10
# removes the warm-up and keeps Composer's first figure.
DEFAULT_WARMUP_STEPS = 10

# Fewest measurements on each side of a split before a fall in throughput
# partway through a run is believed.
MIN_SEGMENT = 3
# ... and the fall must last at least this share of the run's measurements
# after the warm-up. Real normal TorchTitan and DeepSpeed runs of a small
# model on one GPU had dips of 20-30% lasting up to a sixth of the run that
# then recovered; the degradation this looks for stays until the run ends.
MIN_DROP_SHARE = 0.25
MAX_DROP_POINTS = 200

# A normal run's scatter is taken as 1.4826 * MAD (the standard deviation of
# normally distributed noise); a threshold within 3 of those may flag noise.
MAD_TO_SIGMA = 1.4826

BASELINE_KIND = "mlinfra.multinode.throughput_baseline"
BASELINE_VERSION = 1

# The figure compared across runs, per format, in order of preference:
# per device where the log gives one, so that runs on different numbers of
# devices compare; else the whole job's, which becomes per device where the
# number of devices is known (the log's own, or the devices option).
METRICS = {
    "torchtitan": ("tokens_per_sec_per_device",),
    "composer": ("tokens_per_sec_per_device", "samples_per_sec_per_device", "batches_per_sec_per_device",
                 "tokens_per_sec", "samples_per_sec", "batches_per_sec"),
    "deepspeed": ("samples_per_sec",),
    # --log-throughput's TFLOP/s per GPU; else the job's samples per second.
    "megatron": ("tflops_per_device", "samples_per_sec"),
    "benchmark": ("busbw",),
}
UNITS = {
    "tokens_per_sec_per_device": "tokens/s per device",
    "samples_per_sec_per_device": "samples/s per device",
    "batches_per_sec_per_device": "batches/s per device",
    "tokens_per_sec": "tokens/s",
    "samples_per_sec": "samples/s",
    "batches_per_sec": "batches/s",
    "tflops_per_device": "TFLOP/s per device",
    "busbw": "GB/s",
}
PER_DEVICE = "_per_device"
# The whole job's figures, which a number of devices turns into per device.
WHOLE_JOB = ("tokens_per_sec", "samples_per_sec", "batches_per_sec")
# A whole-job figure over its per-device one is the number of devices when
# within this of a whole number (Composer prints both, rounded).
DEVICE_RATIO_TOLERANCE = 0.02

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUMBER = r"[-+]?(?:[0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|inf|nan)"


class ThroughputError(Exception):
    """An input that cannot be read as asked; the message says how to fix it."""


class NoThroughputLines(ThroughputError):
    """A log that holds no throughput line of the format asked for (or of
    any known format): its run may have succeeded without measuring."""


def _number(text):
    try:
        value = float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def quantile(values, fraction):
    """The value below which lies the given fraction of values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(math.ceil(fraction * len(ordered))) - 1))]


def noise(runs):
    """How far the degraded runs (``runs``: each with ``degraded`` and
    ``throughput``) fall below the normal ones against the normal runs'
    scatter: {shortfall, scatter (1.4826 MAD), within: the shortfall is
    within NOISE_SIGMAS of it}; None where fewer than two normal runs or
    no degraded run give a throughput."""
    normal = [run["throughput"] for run in runs if not run["degraded"] and run.get("throughput")]
    degraded = [run["throughput"] for run in runs if run["degraded"] and run.get("throughput")]
    spread = relative_mad(normal)
    if spread is None or not degraded:
        return None
    scatter, shortfall = MAD_TO_SIGMA * spread, 1.0 - median(degraded) / median(normal)
    return {"shortfall": round(shortfall, 4), "scatter": round(scatter, 4),
            "within": shortfall <= NOISE_SIGMAS * scatter}


def relative_mad(values):
    """Median absolute deviation over the median: the scatter of values,
    which one outlier does not inflate. None for fewer than two values."""
    centre = median(values)
    if len(values) < 2 or not centre:
        return None
    return median([abs(value - centre) for value in values]) / abs(centre)


def _is_annotation(line):
    # People mark up logs by hand ("# BAD BAD ..." around the throughput line
    # of the degraded Composer runs); none of the formats read here starts a
    # line with "#".
    return line.lstrip().startswith("#")


class TorchTitanParser:
    """TorchTitan's metrics line, logged every ``metrics.log_freq`` steps:

    ``step: 10  loss:  7.1234  grad_norm:  1.2345  memory: 12.34GiB(15.60%)  tps: 1,234  tflops: 56.78  mfu: 12.34%``

    with colour codes unless disabled, and ``[rankN]:`` in front when
    torchrun tees every rank. tps is tokens per second per device; older
    releases print ``wps`` and no tflops or grad_norm. Validation lines
    (``validate step: ...``) are not training throughput.
    """

    name = "torchtitan"
    _step = re.compile(r"(validate\s+)?\bstep:\s*([0-9]+)\b")
    _tps = re.compile(r"\b(?:tps|wps):\s*(" + _NUMBER + r")")
    _tflops = re.compile(r"\btflops:\s*(" + _NUMBER + r")")
    _mfu = re.compile(r"\bmfu:\s*(" + _NUMBER + r")%")
    _loss = re.compile(r"\bloss:\s*(" + _NUMBER + r")")
    _memory = re.compile(r"\bmemory:\s*(" + _NUMBER + r")GiB")
    _rank = re.compile(r"^\s*\[rank([0-9]+)\]:")

    def __init__(self):
        self.by_rank = {}

    def feed(self, line):
        tps = self._tps.search(line)
        step = self._step.search(line)
        if not tps or not step or step.group(1):
            return
        figures = {"tokens_per_sec_per_device": _number(tps.group(1))}
        for key, pattern, scale in (("tflops", self._tflops, 1.0), ("mfu", self._mfu, 0.01),
                                    ("loss", self._loss, 1.0), ("memory_gib", self._memory, 1.0)):
            found = pattern.search(line)
            value = _number(found.group(1)) if found else None
            if value is not None:
                figures[key] = value * scale
        rank = self._rank.search(line)
        self.by_rank.setdefault(int(rank.group(1)) if rank else None, []).append(
            {"step": int(step.group(2)), "figures": figures})

    def result(self):
        if not self.by_rank:
            return [], []
        ranks = sorted(self.by_rank, key=lambda rank: -1 if rank is None else rank)
        notes = []
        if len(ranks) > 1:
            # Every rank logs its own tps; one rank's series is the run's.
            notes.append("lines of ranks %s; rank %s read" % (", ".join(str(r) for r in ranks), ranks[0]))
        series = self.by_rank[ranks[0]]
        if ranks[0] is None:
            # Every rank's lines without a rank prefix: a step comes once
            # per rank; its first line stands for it.
            firsts = [entry for index, entry in enumerate(series) if not index or series[index - 1]["step"] != entry["step"]]
            if len(firsts) < len(series):
                notes.append("%d lines for %d steps without a rank prefix (every rank's); the first of each step read"
                             % (len(series), len(firsts)))
                series = firsts
        return series, notes


class ComposerParser:
    """MosaicML Composer's console logger: a ``[batch=N/M]:`` header (with
    ``[epoch=E]`` before it in newer releases) followed by one tab-indented
    ``Train <name>: <value>`` line per metric, among them
    ``Train throughput/tokens_per_sec: 55803.1245`` and
    ``Train throughput/device/mfu: 0.4826`` once the speed monitor's window
    of batches is full."""

    name = "composer"
    _batch = re.compile(r"^\s*(?:\[epoch=[0-9]+\])?\[batch=([0-9]+)(?:/[0-9]+)?\]")
    _value = re.compile(r"^\s*Train throughput/(\S+):\s*(" + _NUMBER + r")\s*$")

    def __init__(self):
        self.batch = None
        self.measurements = []

    def feed(self, line):
        header = self._batch.match(line)
        if header:
            self.batch = int(header.group(1))
            return
        found = self._value.match(line)
        value = _number(found.group(2)) if found else None
        if value is None:
            return
        key = found.group(1)
        if key == "device/mfu":
            key = "mfu"
        elif key.startswith("device/"):
            key = key[len("device/"):] + "_per_device"
        step = self.batch if self.batch is not None else 0
        if not self.measurements or self.measurements[-1]["step"] != step:
            self.measurements.append({"step": step, "figures": {}})
        self.measurements[-1]["figures"][key.replace("/", "_")] = value

    def result(self):
        return self.measurements, []

    @property
    def devices(self):
        """How many devices ran the job: the whole job's figure over the
        same figure per device, in the first measurement that has both."""
        for measurement in self.measurements:
            figures = measurement["figures"]
            for whole in WHOLE_JOB:
                each = figures.get(whole + PER_DEVICE)
                if figures.get(whole) and each:
                    ratio = figures[whole] / each
                    if round(ratio) >= 1 and abs(ratio - round(ratio)) <= DEVICE_RATIO_TOLERANCE * ratio:
                        return int(round(ratio))
        return None


class DeepSpeedParser:
    """DeepSpeed's ThroughputTimer, logged by rank 0 every ``steps_per_print``
    steps:

    ``epoch=0/micro_step=20/global_step=20, RunningAvgSamplesPerSec=88.1, CurrSamplesPerSec=90.2,``
    `` MemAllocated=1.2GB, MaxMemAllocated=3.4GB`` (one line)

    CurrSamplesPerSec is the speed of that one step, RunningAvgSamplesPerSec
    the average since the timer's start step; both count the global batch.
    Releases before 0.8 print ``<epoch>/<step>, SamplesPerSec=83.4, ...``
    (``RunningAvgSamplesPerSec=`` and ``CurrSamplesPerSec=`` from 0.5 on)
    after the timer's location, ``[timer.py:189:stop]``, or a bare
    ``[INFO <date>]``. Without timer lines, the
    ``samples/second:`` of the FLOPS profiler's summary (one step, with
    ``wall_clock_breakdown``) is read instead.
    """

    name = "deepspeed"
    _timer = re.compile(r"\bepoch=([0-9]+)/micro_step=([0-9]+)/global_step=([0-9]+),\s*(.*)$")
    # The old form: "<epoch>/<step>, " and the fields at once.
    _old_timer = re.compile(r"(?:^|[\]>\s])([0-9]+)/([0-9]+),\s*((?:RunningAvgSamplesPerSec|CurrSamplesPerSec|SamplesPerSec)=.*)$")
    _field = re.compile(r"\b(RunningAvgSamplesPerSec|CurrSamplesPerSec|SamplesPerSec|MemAllocated)=(" + _NUMBER + r")")
    _profile_step = re.compile(r"Profile Summary at step ([0-9]+)")
    _profile_speed = re.compile(r"^\s*samples/second:\s*(" + _NUMBER + r")")

    def __init__(self):
        self.timer = []
        self.profiled = []
        self.profile_step = None

    def feed(self, line):
        found = self._timer.search(line)
        step_group, fields_group = 3, 4
        if not found:
            found = self._old_timer.search(line)
            step_group, fields_group = 2, 3
        if found:
            fields = dict((name, _number(value)) for name, value in self._field.findall(found.group(fields_group)))
            speed = fields.get("CurrSamplesPerSec", fields.get("SamplesPerSec"))
            if speed is None or speed <= 0:
                return
            figures = {"samples_per_sec": speed}
            if fields.get("RunningAvgSamplesPerSec") is not None:
                figures["running_avg_samples_per_sec"] = fields["RunningAvgSamplesPerSec"]
            if fields.get("MemAllocated") is not None:
                figures["memory_allocated_gb"] = fields["MemAllocated"]
            self.timer.append({"step": int(found.group(step_group)), "figures": figures})
            return
        profile = self._profile_step.search(line)
        if profile:
            self.profile_step = int(profile.group(1))
            return
        speed = self._profile_speed.match(line)
        if speed and self.profile_step is not None and _number(speed.group(1)):
            self.profiled.append({"step": self.profile_step, "figures": {"samples_per_sec": _number(speed.group(1))}})

    def result(self):
        if self.timer:
            return self.timer, []
        if self.profiled:
            return self.profiled, ["no ThroughputTimer lines; the FLOPS profiler's samples/second read"]
        return [], []


class MegatronParser:
    """Megatron-LM's training line, printed every ``--log-interval``
    iterations:

    ``iteration 43/ 100 | consumed samples: 5504 | elapsed time per iteration (ms): 5444.9 |``
    `` throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: ... | global batch size: 128 | lm loss: 1.82 |`` (one line)

    ``throughput per GPU`` is there with ``--log-throughput``; Megatron-
    DeepSpeed prints ``samples/sec: 7.8 |`` before it and ``approx flops per
    GPU: 112.9TFLOPS`` instead. Samples per second are taken as printed, or
    else are the global batch over the iteration's time; both count the
    whole job, not one device.
    """

    name = "megatron"
    _iteration = re.compile(r"\biteration\s+([0-9]+)\s*/\s*[0-9]+\s*\|")
    _elapsed = re.compile(r"elapsed time per iteration \(ms\):\s*(" + _NUMBER + r")")
    _tflops = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*(" + _NUMBER + r")|approx flops per GPU:\s*("
                         + _NUMBER + r")\s*TFLOPS")
    _batch = re.compile(r"global batch size:\s*([0-9]+)")
    _samples = re.compile(r"samples/sec:\s*(" + _NUMBER + r")")
    _loss = re.compile(r"\blm[ _]loss:\s*(" + _NUMBER + r")")

    def __init__(self):
        self.measurements = []

    def feed(self, line):
        iteration = self._iteration.search(line)
        elapsed = self._elapsed.search(line)
        if not iteration or not elapsed:
            return
        milliseconds = _number(elapsed.group(1))
        figures = {"iteration_ms": milliseconds}
        tflops = self._tflops.search(line)
        if tflops:
            figures["tflops_per_device"] = _number(tflops.group(1) or tflops.group(2))
        samples, batch = self._samples.search(line), self._batch.search(line)
        if samples:
            figures["samples_per_sec"] = _number(samples.group(1))
        elif batch and milliseconds:
            figures["samples_per_sec"] = int(batch.group(1)) / (milliseconds / 1000.0)
        loss = self._loss.search(line)
        if loss:
            figures["loss"] = _number(loss.group(1))
        self.measurements.append({"step": int(iteration.group(1)),
                                  "figures": dict((key, value) for key, value in figures.items() if value is not None)})

    def result(self):
        return self.measurements, []


LINE_PARSERS = (TorchTitanParser, ComposerParser, DeepSpeedParser, MegatronParser)


def _read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for raw in handle:
            # Progress bars rewrite their line with bare carriage returns;
            # what follows the last one is what the terminal showed.
            for part in raw.decode("utf-8", "replace").split("\r"):
                yield part.rstrip("\n")


def _looks_like_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return handle.read(4096).lstrip()[:1] == b"{"


def parse_benchmark(path):
    """The benchmark's JSON: ``{"results": [{"size": bytes, "algbw": GB/s,
    "busbw": GB/s, ...}, ...]}``, one entry per message size (and per
    in-place/out-of-place run), as nccl-tests reports them. The largest
    size is the bandwidth-bound one that says how fast the network is; the
    small ones measure latency."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            document = json.loads(handle.read().decode("utf-8"))
    except ValueError as exc:
        raise ThroughputError("%s is not valid JSON (%s): the benchmark writes one JSON document" % (path, exc))
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list) or not results:
        raise ThroughputError("%s has no list 'results': the benchmark's JSON is "
                              "{\"results\": [{\"size\": ..., \"algbw\": ..., \"busbw\": ...}, ...]}" % path)
    entries = []
    for index, entry in enumerate(results):
        size = entry.get("size") if isinstance(entry, dict) else None
        busbw = entry.get("busbw") if isinstance(entry, dict) else None
        if isinstance(size, bool) or isinstance(busbw, bool) or not isinstance(size, (int, float)) \
                or not isinstance(busbw, (int, float)) or not math.isfinite(busbw) or busbw < 0:
            raise ThroughputError("%s: results[%d] needs a numeric 'size' (bytes) and 'busbw' (GB/s), got %s"
                                  % (path, index, json.dumps(entry, sort_keys=True)[:200]))
        figures = {"busbw": float(busbw), "size": size}
        if isinstance(entry.get("algbw"), (int, float)) and not isinstance(entry.get("algbw"), bool):
            figures["algbw"] = float(entry["algbw"])
        entries.append(figures)
    largest = max(entry["size"] for entry in entries)
    at_largest = [entry for entry in entries if entry["size"] == largest]
    figures = {
        "busbw": median([entry["busbw"] for entry in at_largest]),
        "size": largest,
        "avg_busbw": sum(entry["busbw"] for entry in entries) / len(entries),
        "peak_busbw": max(entry["busbw"] for entry in entries),
    }
    if all("algbw" in entry for entry in at_largest):
        figures["algbw"] = median([entry["algbw"] for entry in at_largest])
    info = dict((key, document[key]) for key in ("collective", "op", "type", "nranks", "ngpus")
                if isinstance(document.get(key), (str, int)) and not isinstance(document.get(key), bool))
    return {
        "format": "benchmark", "metric": "busbw", "figures": figures,
        "values": [entry["busbw"] for entry in at_largest], "results": len(entries), "info": info,
    }


def parse_log(path, fmt="auto"):
    """Measurements of one log: {format, measurements: [{step, figures}],
    notes, annotations}, or for the benchmark's JSON what parse_benchmark
    returns. Raises ThroughputError when the file holds none."""
    if fmt not in FORMATS:
        raise ThroughputError("unknown format %r: use one of %s" % (fmt, ", ".join(FORMATS)))
    not_benchmark = ""
    try:
        if fmt == "benchmark":
            return parse_benchmark(path)
        if fmt == "auto" and _looks_like_json(path):
            try:
                return parse_benchmark(path)
            except ThroughputError as exc:
                # JSON lines of some other logger: read as lines.
                not_benchmark = " (%s)" % exc
        return parse_lines(_read_lines(path), fmt, path, not_benchmark)
    except (IOError, OSError) as exc:
        raise ThroughputError("cannot read %s: %s" % (path, exc.strerror or exc))
    except UnicodeDecodeError as exc:
        raise ThroughputError("cannot read %s as text: %s" % (path, exc))


def parse_lines(source_lines, fmt="auto", path="the log", not_benchmark=""):
    """parse_log for lines already read (a log fetched from the API server,
    for one); path only names them in errors."""
    if fmt not in FORMATS or fmt == "benchmark":
        raise ThroughputError("cannot read lines as %r: use one of %s" % (
            fmt, ", ".join(name for name in FORMATS if name != "benchmark")))
    parsers = [cls() for cls in LINE_PARSERS if fmt in ("auto", cls.name)]
    lines = annotations = 0
    for line in source_lines:
        lines += 1
        if _is_annotation(line):
            annotations += 1
            continue
        line = _ANSI.sub("", line)
        for parser in parsers:
            parser.feed(line)
    found = []
    for parser in parsers:
        measurements, notes = parser.result()
        if measurements:
            found.append((parser.name, measurements, notes, getattr(parser, "devices", None)))
    if not found:
        if fmt == "auto":
            raise NoThroughputLines(
                "%s is in no known format: none of its %d lines is a throughput line of TorchTitan (step: N ... "
                "tps: N), Composer (Train throughput/...: N), DeepSpeed (epoch=.../global_step=N, "
                "...SamplesPerSec=N), or Megatron-LM (iteration N/ M | ... elapsed time per iteration), and it is "
                "not the benchmark's JSON; check that it is the training log "
                "with throughput logging on, or name its format%s" % (path, lines, not_benchmark))
        raise NoThroughputLines("%s has no %s throughput lines (%d lines read): check the format option, or that "
                                "throughput logging was on" % (path, fmt, lines))
    # A log that mixes formats (one launcher's output wrapped in another's) is
    # read as the one with the most measurements.
    found.sort(key=lambda item: -len(item[1]))
    name, measurements, notes, devices = found[0]
    if len(found) > 1:
        notes = notes + ["also has %s lines; read as %s" % (", ".join(other[0] for other in found[1:]), name)]
    return {"format": name, "measurements": measurements, "notes": notes, "annotations": annotations,
            "devices": devices}


def _metric_of(fmt, measurements):
    for metric in METRICS[fmt]:
        if any(metric in m["figures"] for m in measurements):
            return metric
    return None


def find_drop(steps, values, threshold, min_segment=MIN_SEGMENT, min_share=MIN_DROP_SHARE):
    """Where throughput falls by more than threshold and stays down: of the
    splits whose later part's median is that far below the earlier part's
    (each part at least min_segment measurements, the later one at least
    min_share of them all, most of each on its side), the one that fits the
    measurements best (least absolute deviation from the two medians). One
    slow step, a checkpoint say, moves no median. None when no split falls
    that far."""
    if len(values) > MAX_DROP_POINTS:
        # Long runs: medians of consecutive blocks keep the search quadratic
        # in a few hundred points at most.
        size = int(math.ceil(len(values) / float(MAX_DROP_POINTS)))
        steps = [steps[index] for index in range(0, len(values), size)]
        values = [median(values[index:index + size]) for index in range(0, len(values), size)]
    best = None
    last_split = len(values) - max(min_segment, int(math.ceil(min_share * len(values))))
    for split in range(min_segment, last_split + 1):
        head, tail = values[:split], values[split:]
        before, after = median(head), median(tail)
        if before <= 0 or after >= (1.0 - threshold) * before:
            continue
        # Most measurements on each side must agree: three quarters of
        # those after the split well below the level before it, and three
        # quarters of those before well above the level after. Steps that
        # alternate between fast and slow have medians apart but are no fall.
        margin = 1.0 - threshold / 2.0
        if quantile(tail, 0.75) >= margin * before or quantile(head, 0.25) * margin <= after:
            continue
        cost = sum(abs(value - before) for value in head) + sum(abs(value - after) for value in tail)
        if best is None or cost < best[0]:
            best = (cost, split, before, after)
    if best is None:
        return None
    split, before, after = best[1:]
    return {"step": steps[split], "before": before, "after": after, "fraction": 1.0 - after / before}


def run_devices(parsed, given):
    """The number of devices of a run and where it comes from: the log's
    own, else ``given`` (the devices option), else unknown (None)."""
    found = parsed.get("devices")
    if found:
        warnings = [] if not given or given == found else [
            "its log says %d devices ran it; that is used, not devices=%d" % (found, given)]
        return found, "log", warnings
    if given:
        return given, "given", []
    return None, None, []


def summarize_run(path, parsed, warmup_steps=DEFAULT_WARMUP_STEPS, threshold=DEFAULT_THRESHOLD, devices=None):
    """One run's steady-state figures from its parsed log; a whole job's
    figure is divided by the run's number of devices where it is known."""
    stat = os.stat(path)
    count, source, warnings = run_devices(parsed, devices)
    run = {
        "path": path, "format": parsed["format"], "mtime": stat.st_mtime,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stat.st_mtime)),
        "warnings": warnings, "drop": None, "degraded": False, "reasons": [],
        "devices": count, "devices_from": source,
    }
    if parsed["format"] == "benchmark":
        values = parsed["values"]
        run.update({
            "metric": "busbw", "unit": UNITS["busbw"], "throughput": parsed["figures"]["busbw"],
            "figures": parsed["figures"], "mfu": None, "measurements": parsed["results"], "samples": len(values),
            "first_step": None, "last_step": None, "steady_from_step": None, "spread": relative_mad(values),
            "notes": ["busbw at the largest size, %d bytes" % parsed["figures"]["size"]] + [
                "%s: %s" % item for item in sorted(parsed["info"].items())],
        })
        return run
    measurements = parsed["measurements"]
    metric = _metric_of(parsed["format"], measurements)
    if metric is None:
        raise ThroughputError("%s has %s lines but none with %s" % (
            path, parsed["format"], " or ".join(METRICS[parsed["format"]])))
    with_metric = [m for m in measurements if m["figures"].get(metric) is not None and m["figures"][metric] > 0]
    if not with_metric:
        raise ThroughputError("%s: every %s figure in its %s lines is 0 or less" % (path, metric, parsed["format"]))
    steady = [m for m in with_metric if m["step"] > warmup_steps]
    if not steady:
        steady = with_metric[-1:]
        run["warnings"].append("all %d measurements are within the first %d (warm-up) steps; the last one, at "
                               "step %d, is used" % (len(with_metric), warmup_steps, steady[0]["step"]))
    values = [m["figures"][metric] for m in steady]
    if metric in WHOLE_JOB and count:
        values = [value / count for value in values]
        metric += PER_DEVICE
    names = sorted(set(key for m in steady for key in m["figures"]))
    figures = dict((key, median([m["figures"][key] for m in steady if key in m["figures"]])) for key in names)
    figures[metric] = median(values)
    run.update({
        "metric": metric, "unit": UNITS[metric], "throughput": median(values), "figures": figures,
        "mfu": figures.get("mfu"), "measurements": len(measurements), "samples": len(values),
        "first_step": measurements[0]["step"], "last_step": measurements[-1]["step"],
        "steady_from_step": steady[0]["step"], "spread": relative_mad(values), "notes": list(parsed["notes"]),
    })
    if parsed["annotations"]:
        run["notes"].append("%d line(s) starting with '#' ignored as annotations" % parsed["annotations"])
    drop = find_drop([m["step"] for m in steady], values, threshold)
    if drop:
        run["drop"] = drop
    return run


def robust_reference(values, threshold):
    """The reference throughput of runs of one metric: their median, taken
    again over the runs not more than threshold below it until none more is
    set aside. A plain median moves once half the runs are degraded (30-40%
    were, where the real Composer logs come from, and those are two normal
    and two degraded runs); this one holds until more than half are. Returns (reference, the
    indices of the runs it rests on)."""
    centre = median(values)
    while True:
        kept = [index for index, value in enumerate(values) if value >= (1.0 - threshold) * centre]
        new_centre = median([values[index] for index in kept])
        if new_centre == centre:
            return centre, kept
        centre = new_centre


def _whole_job_warnings(runs):
    """What comparing whole-job figures of an unknown number of devices
    cannot tell: runs on more devices are faster without being better."""
    whole = [run for run in runs if run["metric"] in WHOLE_JOB]
    if not whole or len(runs) < 2:
        return []
    paths = ", ".join(run["path"] for run in whole)
    if len(whole) < len(runs):
        return ["%s: the whole job's %s and no number of devices in the log, so not compared with the runs "
                "measured per device; give devices (the job's number of GPUs) to compare them"
                % (paths, " and ".join(sorted(set(UNITS[run["metric"]] for run in whole))))]
    return ["%s: whole-job figures, and the logs do not say how many devices ran them: compared as they are, "
            "which holds only for runs on the same number of devices; give devices to compare per device" % paths]


def judge_runs(runs, threshold=DEFAULT_THRESHOLD, given=None):
    """Set each run's degraded flag and reasons; return the baseline used
    per metric. given: {metric: {"value": ..., "source": ...}} from a saved
    baseline or a number."""
    given = given or {}
    baselines, warnings = {}, []
    metrics = []
    for run in runs:
        if run["metric"] not in metrics:
            metrics.append(run["metric"])
    if len(metrics) > 1:
        warnings.append("runs of %d different metrics (%s) are each compared only with runs of their own metric"
                        % (len(metrics), ", ".join(metrics)))
    warnings.extend(_whole_job_warnings(runs))
    for metric in metrics:
        group = [run for run in runs if run["metric"] == metric]
        values = [run["throughput"] for run in group]
        if metric in given:
            baseline = dict(given[metric], of_runs=len(group))
        else:
            reference, kept = robust_reference(values, threshold)
            spread = relative_mad([values[index] for index in kept])
            baseline = {"value": reference, "unit": UNITS.get(metric), "source": "runs",
                        "runs": len(kept), "of_runs": len(group), "spread": spread}
            if len(group) == 1:
                warnings.append("%s is the only %s run and no baseline was given: it is compared with itself "
                                "only; give a baseline to judge it" % (group[0]["path"], metric))
            elif spread is not None and NOISE_SIGMAS * MAD_TO_SIGMA * spread > threshold:
                warnings.append("the normal %s runs scatter by %.1f%% (1.4826 MAD), so a threshold of %.0f%% may "
                                "flag noise: raise threshold" % (metric, 100 * MAD_TO_SIGMA * spread, 100 * threshold))
            faster = [run["path"] for run in group if reference < (1.0 - threshold) * run["throughput"]]
            if faster:
                # The reference would itself be degraded next to these: either
                # they are unusually fast, or most runs are degraded, which
                # the runs alone cannot tell apart.
                warnings.append("%s: more than %.0f%% faster than the reference of the %s runs; if those are the "
                                "normal ones, most runs are degraded: compare with a saved baseline"
                                % (", ".join(faster), 100 * threshold, metric))
        baselines[metric] = baseline
        for run in group:
            below = 1.0 - run["throughput"] / baseline["value"]
            run["baseline"] = baseline["value"]
            run["below_baseline"] = below
            if below > threshold:
                run["reasons"].append("%.1f%% below the baseline %.6g %s (threshold %.0f%%)" % (
                    100 * below, baseline["value"], run["unit"], 100 * threshold))
            if run["drop"]:
                run["reasons"].append("fell %.1f%% from step %d on (%.6g to %.6g %s)" % (
                    100 * run["drop"]["fraction"], run["drop"]["step"], run["drop"]["before"], run["drop"]["after"],
                    run["unit"]))
            run["degraded"] = bool(run["reasons"])
    return baselines, warnings


def load_baseline(value, metrics):
    """A baseline given as a number (for runs of one metric) or as the path
    of a file written by save_baseline: {metric: {"value", "source", ...}}."""
    if value is None or value == "":
        return {}
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None and isinstance(value, str):
        number = _number(value) if re.match(r"^\s*" + _NUMBER + r"\s*$", value) else None
    if number is not None:
        if number <= 0:
            raise ThroughputError("baseline must be a throughput above 0, got %s" % value)
        if len(metrics) != 1:
            raise ThroughputError("a numeric baseline is for runs of one metric; these runs have %s: give a "
                                  "baseline file written by save_baseline instead" % ", ".join(metrics))
        return {metrics[0]: {"value": float(number), "unit": UNITS.get(metrics[0]), "source": "given",
                             "runs": None, "spread": None}}
    if not isinstance(value, str):
        raise ThroughputError("baseline must be a number or the path of a baseline file, got %r" % (value,))
    path = os.path.expanduser(value)
    try:
        with open(path) as handle:
            document = json.load(handle)
    except (IOError, OSError) as exc:
        raise ThroughputError("cannot read the baseline file %s: %s (write one with save_baseline, or give a "
                              "number)" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise ThroughputError("baseline file %s is not JSON (%s): write it with save_baseline" % (path, exc))
    saved = document.get("baselines") if isinstance(document, dict) else None
    if not isinstance(saved, dict) or document.get("kind") != BASELINE_KIND:
        raise ThroughputError("%s is not a baseline file written by save_baseline (no kind %s with baselines)"
                              % (path, BASELINE_KIND))
    given = {}
    for metric in metrics:
        entry = saved.get(metric)
        value = entry.get("value") if isinstance(entry, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ThroughputError("baseline file %s has no baseline for %s (it has: %s): save one from runs of "
                                  "that metric" % (path, metric, ", ".join(sorted(saved)) or "none"))
        spread = entry.get("spread")
        given[metric] = {"value": float(value), "unit": UNITS.get(metric), "source": os.path.abspath(path),
                         "runs": len(entry["runs"]) if isinstance(entry.get("runs"), list) else None,
                         "spread": spread if isinstance(spread, (int, float)) and not isinstance(spread, bool)
                         else None}
    return given


def baseline_document(runs, baselines):
    """What save_baseline writes: per metric, the median throughput of this
    call's runs that are not degraded, and those runs."""
    saved = {}
    for metric in baselines:
        normal = [run for run in runs if run["metric"] == metric and not run["degraded"]]
        if not normal:
            raise ThroughputError("every %s run is degraded: nothing normal to save as a baseline; save one from "
                                  "runs known to be normal" % metric)
        values = [run["throughput"] for run in normal]
        saved[metric] = {
            "value": median(values), "unit": UNITS.get(metric), "spread": relative_mad(values),
            "runs": [{"path": run["path"], "format": run["format"], "throughput": run["throughput"],
                      "time": run["time"]} for run in normal],
        }
    return {"kind": BASELINE_KIND, "version": BASELINE_VERSION, "baselines": saved}


def render_baseline(document):
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _relative_to(path):
    if os.path.isabs(path):
        return ""
    return " (relative to %s, where this runs; an absolute path avoids that)" % os.getcwd()


def expand_logs(patterns):
    """Every file the paths and globs name, in the order given, each once."""
    if not patterns:
        raise ThroughputError("logs is empty: give at least one log path or glob, for example runs/*.log")
    paths = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ThroughputError("logs must be paths or globs, got %r" % (pattern,))
        expanded = os.path.expanduser(pattern)
        if glob.has_magic(expanded):
            matches = sorted(glob.glob(expanded))
            # A run's facts beside its log (degradation) are not a log.
            files = [match for match in matches if os.path.isfile(match) and not is_facts_file(match)]
            if not files:
                raise ThroughputError("%s matches no %s%s: check the pattern" % (
                    pattern, "file, only directories" if matches else "file", _relative_to(expanded)))
        elif os.path.isdir(expanded):
            raise ThroughputError("%s is a directory: give the log files, for example %s" % (
                pattern, os.path.join(pattern, "*.log")))
        elif not os.path.isfile(expanded):
            raise ThroughputError("%s does not exist%s: check the path" % (pattern, _relative_to(expanded)))
        else:
            files = [expanded]
        for path in files:
            path = os.path.abspath(path)
            if path not in paths:
                paths.append(path)
    return paths


def throughput_report(logs, fmt="auto", warmup_steps=DEFAULT_WARMUP_STEPS, threshold=DEFAULT_THRESHOLD,
                      baseline=None, save_baseline=None, devices=None):
    """Everything the module and the command return, except whether the
    baseline file was written: the caller writes ``baseline_text`` (when
    asked for) after deciding to. ``devices``: how many devices ran each
    run whose log does not say. Raises ThroughputError before anything is
    written."""
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise ThroughputError("devices is the number of GPUs each run used, 1 or more, got %r" % (devices,))
    if not 0 < threshold < 1:
        raise ThroughputError("threshold is a fraction between 0 and 1 (0.15 = 15%% below), got %s" % threshold)
    if warmup_steps < 0:
        raise ThroughputError("warmup_steps must be 0 or more, got %d" % warmup_steps)
    if save_baseline and os.path.isdir(save_baseline):
        raise ThroughputError("save_baseline %s is a directory: give a file path, for example %s" % (
            save_baseline, os.path.join(save_baseline, "baseline.json")))
    if save_baseline:
        directory = os.path.dirname(os.path.abspath(save_baseline))
        if not os.path.isdir(directory):
            raise ThroughputError("the directory of save_baseline %s does not exist: create it first" % save_baseline)
        if not os.access(directory, os.W_OK):
            raise ThroughputError("cannot write save_baseline %s: %s is not writable" % (save_baseline, directory))
    runs = [summarize_run(path, parse_log(path, fmt), warmup_steps, threshold, devices) for path in expand_logs(logs)]
    metrics = []
    for run in runs:
        if run["metric"] not in metrics:
            metrics.append(run["metric"])
    given = load_baseline(baseline, metrics)
    baselines, warnings = judge_runs(runs, threshold, given)
    report = {
        "runs": runs,
        "baseline": baselines,
        "degraded": [run["path"] for run in runs if run["degraded"]],
        "threshold": threshold,
        "warmup_steps": warmup_steps,
        "warnings": warnings + ["%s: %s" % (run["path"], warning) for run in runs for warning in run["warnings"]],
        "baseline_text": None,
        "attribution": attribute_runs(runs),
    }
    if save_baseline:
        report["baseline_text"] = render_baseline(baseline_document(runs, baselines))
    return report


def attribute_runs(runs):
    """What separates the degraded runs from the normal ones (degradation),
    from the facts beside their logs; None when no run has any. A run is
    numbered as its facts say, else by its place among the logs."""
    numbered = []
    for index, run in enumerate(runs):
        try:
            facts = read_facts(facts_path(run["path"]))
        except FactsError as exc:
            raise ThroughputError(str(exc))
        numbered.append({"run": (facts or {}).get("run") or index + 1, "degraded": run["degraded"], "facts": facts,
                         "path": run["path"], "throughput": run.get("throughput")})
    if not any(run["facts"] for run in numbered):
        return None
    return attribute(numbered, noise([run for run in numbered if run["facts"] and run["degraded"] is not None]))


def baseline_file_state(path, text):
    """(whether writing text to path would change it, its current text)."""
    try:
        with open(path) as handle:
            current = handle.read()
    except (IOError, OSError):
        return True, ""
    return current != text, current


def _percent(fraction):
    if fraction is None:
        return ""
    # Above the baseline is +, below it -; what rounds to 0.0 has no sign.
    change = -100 * fraction
    return "%+.1f%%" % (change if abs(change) >= 0.05 else 0.0)


def format_report(report):
    """A short table: one line per run, then the baselines and warnings."""
    rows = [("run", "format", "throughput", "unit", "vs base", "mfu", "steps", "verdict")]
    for run in report["runs"]:
        steps = "-" if run["last_step"] is None else "%s-%s" % (run["steady_from_step"], run["last_step"])
        rows.append((os.path.basename(run["path"]), run["format"], "%.6g" % run["throughput"], run["unit"],
                     _percent(run.get("below_baseline")), "" if run["mfu"] is None else "%.3f" % run["mfu"], steps,
                     "DEGRADED: " + "; ".join(run["reasons"]) if run["degraded"] else "ok"))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]
    for metric, baseline in sorted(report["baseline"].items()):
        if baseline["source"] == "runs":
            origin = "robust median of %d of %d runs" % (baseline["runs"], baseline["of_runs"])
        else:
            origin = "given" if baseline["source"] == "given" else "from %s" % baseline["source"]
        lines.append("baseline %s: %.6g %s (%s); degraded when more than %.0f%% below" % (
            metric, baseline["value"], baseline["unit"], origin, 100 * report["threshold"]))
    lines.append("%d run(s), %d degraded" % (len(report["runs"]), len(report["degraded"])))
    lines.extend("warning: %s" % warning for warning in report["warnings"])
    attribution = report.get("attribution")
    if attribution:
        lines.append("attribution: %s" % attribution["summary"])
        if attribution["factors"] and attribution["verdict"] == CANNOT_TELL:
            lines.append("  candidates, not named (within the runs' scatter):")
        for factor in attribution["factors"]:
            lines.append("  %s: in %s and %s%s" % (factor["factor"], factor["in_degraded"], factor["in_normal"],
                                                   "".join("\n    %s" % line for line in factor["evidence"])))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="mlinfra-throughput-report",
        description="Throughput of training runs from their logs (TorchTitan, Composer, DeepSpeed, Megatron-LM, "
                    "the benchmark's JSON), and which runs are degraded. Exit status 1 when one is, 2 on bad input.")
    parser.add_argument("logs", nargs="*", help="log files or globs (quote globs)")
    parser.add_argument("--format", choices=FORMATS, default="auto", dest="fmt")
    parser.add_argument("--warmup-steps", type=int, default=DEFAULT_WARMUP_STEPS,
                        help="measurements logged at these first steps are warm-up (default %(default)s)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="fraction below the baseline that is degraded (default %(default)s)")
    parser.add_argument("--baseline", help="a throughput, or a baseline file written by --save-baseline")
    parser.add_argument("--save-baseline", metavar="PATH", help="write the normal runs' throughput here")
    parser.add_argument("--devices", type=int, help="how many GPUs ran each run whose log does not say, to compare "
                                                    "whole-job figures per device")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        report = throughput_report(args.logs, fmt=args.fmt, warmup_steps=args.warmup_steps,
                                   threshold=args.threshold, baseline=args.baseline,
                                   save_baseline=args.save_baseline, devices=args.devices)
    except ThroughputError as exc:
        sys.stderr.write("mlinfra-throughput-report: %s\n" % exc)
        return 2
    text = report.pop("baseline_text")
    report["changed"] = False
    if args.save_baseline:
        report["changed"] = baseline_file_state(args.save_baseline, text)[0]
        if report["changed"]:
            write_atomically(args.save_baseline, text)
    if args.output == "json":
        json.dump(report, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(report) + "\n")
        if args.save_baseline:
            sys.stdout.write("baseline %s %s\n" % ("written to" if report["changed"] else "unchanged in",
                                                   args.save_baseline))
    return 1 if report["degraded"] else 0
