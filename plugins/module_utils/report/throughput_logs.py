# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The logs throughput is read from: one parser per format - TorchTitan,
MosaicML Composer, DeepSpeed, Megatron-LM - and the benchmark's JSON, each
giving a run's measurements step by step (throughput judges them).

Standard library only; shipped into the pods with the rest of the runtime.
"""

from __future__ import absolute_import, division, print_function

import gzip
import json
import math
import re

from ..common.stats import median
from ..common.errors import MlinfraError

__metaclass__ = type

FORMATS = ("auto", "torchtitan", "composer", "deepspeed", "megatron", "benchmark")
LOG_FORMATS = FORMATS[1:]

PER_DEVICE = "_per_device"
# The whole job's figures, which a number of devices turns into per device.
WHOLE_JOB = ("tokens_per_sec", "samples_per_sec", "batches_per_sec")
# A whole-job figure over its per-device one is the number of devices when
# within this of a whole number (Composer prints both, rounded).
DEVICE_RATIO_TOLERANCE = 0.02

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NUMBER_PATTERN = r"[-+]?(?:[0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|inf|nan)"


class ThroughputError(MlinfraError):
    """An input that cannot be read as asked; the message says how to fix it."""


class NoThroughputLines(ThroughputError):
    """A log that holds no throughput line of the format asked for (or of
    any known format): its run may have succeeded without measuring."""


def parse_number(text):
    try:
        value = float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None
    return value if math.isfinite(value) else None


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
    _tps = re.compile(r"\b(?:tps|wps):\s*(" + NUMBER_PATTERN + r")")
    _tflops = re.compile(r"\btflops:\s*(" + NUMBER_PATTERN + r")")
    _mfu = re.compile(r"\bmfu:\s*(" + NUMBER_PATTERN + r")%")
    _loss = re.compile(r"\bloss:\s*(" + NUMBER_PATTERN + r")")
    _memory = re.compile(r"\bmemory:\s*(" + NUMBER_PATTERN + r")GiB")
    _rank = re.compile(r"^\s*\[rank([0-9]+)\]:")

    def __init__(self):
        self.by_rank = {}

    def feed(self, line):
        tps = self._tps.search(line)
        step = self._step.search(line)
        if not tps or not step or step.group(1):
            return
        figures = {"tokens_per_sec_per_device": parse_number(tps.group(1))}
        for key, pattern, scale in (("tflops", self._tflops, 1.0), ("mfu", self._mfu, 0.01),
                                    ("loss", self._loss, 1.0), ("memory_gib", self._memory, 1.0)):
            found = pattern.search(line)
            value = parse_number(found.group(1)) if found else None
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
    _value = re.compile(r"^\s*Train throughput/(\S+):\s*(" + NUMBER_PATTERN + r")\s*$")

    def __init__(self):
        self.batch = None
        self.measurements = []

    def feed(self, line):
        header = self._batch.match(line)
        if header:
            self.batch = int(header.group(1))
            return
        found = self._value.match(line)
        value = parse_number(found.group(2)) if found else None
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
    _field = re.compile(r"\b(RunningAvgSamplesPerSec|CurrSamplesPerSec|SamplesPerSec|MemAllocated)=(" + NUMBER_PATTERN + r")")
    _profile_step = re.compile(r"Profile Summary at step ([0-9]+)")
    _profile_speed = re.compile(r"^\s*samples/second:\s*(" + NUMBER_PATTERN + r")")

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
            fields = dict((name, parse_number(value)) for name, value in self._field.findall(found.group(fields_group)))
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
        if speed and self.profile_step is not None and parse_number(speed.group(1)):
            self.profiled.append({"step": self.profile_step, "figures": {"samples_per_sec": parse_number(speed.group(1))}})

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
    _elapsed = re.compile(r"elapsed time per iteration \(ms\):\s*(" + NUMBER_PATTERN + r")")
    _tflops = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*(" + NUMBER_PATTERN + r")|approx flops per GPU:\s*("
                         + NUMBER_PATTERN + r")\s*TFLOPS")
    _batch = re.compile(r"global batch size:\s*([0-9]+)")
    _samples = re.compile(r"samples/sec:\s*(" + NUMBER_PATTERN + r")")
    _loss = re.compile(r"\blm[ _]loss:\s*(" + NUMBER_PATTERN + r")")

    def __init__(self):
        self.measurements = []

    def feed(self, line):
        iteration = self._iteration.search(line)
        elapsed = self._elapsed.search(line)
        if not iteration or not elapsed:
            return
        milliseconds = parse_number(elapsed.group(1))
        figures = {"iteration_ms": milliseconds}
        tflops = self._tflops.search(line)
        if tflops:
            figures["tflops_per_device"] = parse_number(tflops.group(1) or tflops.group(2))
        samples, batch = self._samples.search(line), self._batch.search(line)
        if samples:
            figures["samples_per_sec"] = parse_number(samples.group(1))
        elif batch and milliseconds:
            figures["samples_per_sec"] = int(batch.group(1)) / (milliseconds / 1000.0)
        loss = self._loss.search(line)
        if loss:
            figures["loss"] = parse_number(loss.group(1))
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
