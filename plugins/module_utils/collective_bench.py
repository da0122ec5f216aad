# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective-communication benchmark's logic that needs no torch.

``files/bin/mlinfra-nccl-bench`` runs under torchrun in every training pod
and times torch.distributed collectives; everything here is what it does
around them: message sizes, nccl-tests' bandwidth formulas, the
nccl-tests-compatible text table (and reading one back), the JSON result
document, per-size pass thresholds, the values that make every result
exactly checkable, and the pairwise (node against node) analysis.

Standard library only and importable without torch, so that the unit tests,
the Ansible side and laptops can read and judge results.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import math
import re

from . import common

__metaclass__ = type

TOOL = "mlinfra-nccl-bench"
VERSION = "1.0.0"
# Version of the JSON document's layout; read_document refuses newer ones.
SCHEMA_VERSION = 1

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
DTYPES = ("float32", "bfloat16", "float16")
ELEMENT_SIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
# nccl-tests' names of the types, for the table's type column.
NCCL_TYPE_NAMES = {"float32": "float", "bfloat16": "bfloat16", "float16": "half"}
# Largest integer up to which every integer is exactly representable
# (2 ** (mantissa bits + 1)). The check values are kept at or below it.
EXACT_INTEGER_LIMIT = {"float32": 2 ** 24, "bfloat16": 2 ** 8, "float16": 2 ** 11}

# Which nccl-tests column group each op fills. torch.distributed.all_reduce
# writes the result over its input: that is nccl-tests' in-place run.
# all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single are
# given separate input and output tensors here: the out-of-place run. The
# other group of each op is not measured and is printed as N/A.
OP_INFO = {
    "all_reduce": {"placement": "in-place", "redop": "sum", "call": "torch.distributed.all_reduce"},
    "all_gather": {"placement": "out-of-place", "redop": "none", "call": "torch.distributed.all_gather_into_tensor"},
    "reduce_scatter": {"placement": "out-of-place", "redop": "sum", "call": "torch.distributed.reduce_scatter_tensor"},
    "alltoall": {"placement": "out-of-place", "redop": "none", "call": "torch.distributed.all_to_all_single"},
}
PLACEMENTS = ("out-of-place", "in-place")

# nccl-tests aligns each rank's chunk of all_gather, reduce_scatter and
# alltoall down to 16 bytes; the same sizes come out here.
CHUNK_ALIGN_BYTES = 16

DEFAULT_MIN_BYTES = "1M"
DEFAULT_MAX_BYTES = "1G"
DEFAULT_FACTOR = 2
# nccl-tests' defaults.
DEFAULT_WARMUP = 5
DEFAULT_ITERS = 20
# How the timed iterations are issued on GPUs (resolve_device, --launch).
LAUNCHES = ("auto", "eager", "graph")
# On GPUs every timed loop starts held: a spin kernel holds each GPU while
# its CPU queues the timed calls, and a one-element all_reduce after it
# lines the ranks' GPUs up, so that neither the ranks' skew in leaving the
# barrier nor the time to issue the first calls is timed (on two H200s a
# loop that is not held measured 0.63 of nccl-tests at 2 MiB eagerly and 0.91
# as a CUDA graph, and its slowest rank's first call waited for the other
# rank; docs/PERFORMANCE.md, "Where the benchmark's time went"). The hold
# lasts twice what the warm-up's calls took to issue, and at least this long.
MIN_HOLD_SECONDS = 0.001
# --launch auto: a size is timed again as a CUDA graph when the GPU passed
# the start before the CPU had queued every call (the hold was too short)
# and the CPU time to issue them reached this fraction of the GPU time they
# took: then the GPU has waited for the CPU and the eager figure is the
# launch's, not the collective's.
LAUNCH_BOUND_FRACTION = 0.9
# A pairwise all_reduce of 256 MiB is bandwidth-bound on NVLink and RDMA
# (the H200 reference reaches 95% of its 8 GiB bandwidth at 256 MiB); gloo
# on CPUs moves a few GB/s at best, where 1 MiB keeps a pair under a second.
DEFAULT_PAIRWISE_SIZE_GPU = "256M"
DEFAULT_PAIRWISE_SIZE_CPU = "1M"
DEFAULT_SLOW_FRACTION = 0.8

_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
# The labels of all_gather and alltoall chunks repeat with this period
# (a prime, so that chunks of nearby ranks never look alike); 199 is below
# bfloat16's exact-integer limit of 256.
LABEL_PERIOD = 199
# Values 1..4 in the reduction pattern: small enough that 4 * ranks stays
# exact in bfloat16 for up to 64 ranks.
REDUCE_PERIOD = 4


def _plural(number, word):
    return "%d %s%s" % (number, word, "" if number == 1 else "s")


def format_size(size):
    """A byte count in the shortest exact K/M/G/T form (binary units), as
    given to -b and -e: 1073741824 -> 1G, 1536 -> 1536."""
    for unit in ("T", "G", "M", "K"):
        if size and size % _UNITS[unit] == 0:
            return "%d%s" % (size // _UNITS[unit], unit)
    return "%d" % size


def parse_size(text, option="size"):
    """Bytes of a message size: 1048576, 512K, 1M, 8G, 1.5M (K, M, G, T are
    powers of 1024, as in nccl-tests; a trailing B or iB is allowed).
    Raises ValueError naming the option."""
    if isinstance(text, bool):
        text = str(text)
    if isinstance(text, int):
        text = str(text)
    found = _SIZE.match(text) if isinstance(text, str) else None
    if not found:
        raise ValueError("%s %r is not a size: give bytes or a number with K, M, G or T (powers of 1024), "
                         "for example 1048576, 512K, 1M or 8G" % (option, text))
    value = float(found.group(1)) * _UNITS[found.group(2).upper()]
    if value != math.floor(value):
        raise ValueError("%s %r is not a whole number of bytes (%s): give a whole number of bytes" % (
            option, text, value))
    if value < 1:
        raise ValueError("%s %r is 0 bytes: give a size of at least 1 byte" % (option, text))
    return int(value)


def size_range(min_bytes, max_bytes, factor=DEFAULT_FACTOR):
    """The sizes nccl-tests' -b, -e and -f sweep: min_bytes, then each
    multiplied by factor while it stays within max_bytes."""
    if min_bytes < 1 or max_bytes < 1:
        raise ValueError("-b and -e must be at least 1 byte")
    if min_bytes > max_bytes:
        raise ValueError("-b %s is larger than -e %s: give -b at most -e" % (format_size(min_bytes), format_size(max_bytes)))
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise ValueError("-f %r must be a whole number of 2 or more" % (factor,))
    if min_bytes == max_bytes:
        return [min_bytes]
    if factor < 2:
        raise ValueError("-f %d would never reach -e %s from -b %s: give -f 2 or more" % (
            factor, format_size(max_bytes), format_size(min_bytes)))
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def layout(op, requested_size, nranks, dtype):
    """How nccl-tests lays out one step of its sweep, or None when the size
    is too small to give every rank an element.

    Returns {requested_size, size, count, elements, chunk}: ``size`` is what
    nccl-tests prints, the bytes of the larger buffer (all_reduce: the
    buffer; all_gather: the gathered output; reduce_scatter: the input;
    alltoall: either buffer); ``count`` is what it prints as count, the
    element count passed to the NCCL call (all_reduce: the whole buffer;
    the others: one rank's chunk); ``elements`` is the larger buffer's
    element count and ``chunk`` the elements per rank (None for all_reduce).
    """
    if op not in OP_INFO:
        raise ValueError("unknown op %r: use one of %s" % (op, ", ".join(OPS)))
    if nranks < 1:
        raise ValueError("nranks must be at least 1, got %r" % (nranks,))
    element = ELEMENT_SIZE[dtype]
    count = requested_size // element
    if op == "all_reduce":
        if count < 1:
            return None
        return {"requested_size": requested_size, "size": count * element, "count": count, "elements": count,
                "chunk": None}
    align = max(1, CHUNK_ALIGN_BYTES // element)
    chunk = (count // nranks) // align * align
    if chunk < 1:
        return None
    return {"requested_size": requested_size, "size": chunk * nranks * element, "count": chunk,
            "elements": chunk * nranks, "chunk": chunk}


def smallest_size(op, nranks, dtype):
    """The smallest requested size layout() can lay out for op."""
    element = ELEMENT_SIZE[dtype]
    if op == "all_reduce":
        return element
    return max(1, CHUNK_ALIGN_BYTES // element) * element * nranks


def bus_factor(op, nranks):
    """nccl-tests' busbw / algbw: all_reduce 2(n-1)/n; all_gather,
    reduce_scatter and alltoall (n-1)/n, n being the number of ranks."""
    if op not in OP_INFO:
        raise ValueError("unknown op %r: use one of %s" % (op, ", ".join(OPS)))
    if nranks < 1:
        raise ValueError("nranks must be at least 1, got %r" % (nranks,))
    if op == "all_reduce":
        return 2.0 * (nranks - 1) / nranks
    return float(nranks - 1) / nranks


def bandwidth(op, size, seconds, nranks):
    """(algbw, busbw) in GB/s (10**9 bytes per second, as nccl-tests) of
    moving ``size`` bytes (layout()'s size) in ``seconds``: algbw = size /
    time, busbw = algbw * bus_factor."""
    if not seconds > 0:
        raise ValueError("time must be above 0 seconds, got %r" % (seconds,))
    algbw = size / 1.0e9 / seconds
    return algbw, algbw * bus_factor(op, nranks)


# --- check values -----------------------------------------------------------
#
# Every collective is checked for the exact result, as nccl-tests does with
# -c 1. Values are small integers, exact in all three types, and every
# partial sum of a reduction stays at or below the type's exact-integer limit,
# so the result is exact whatever order the reduction adds in. The buffers
# repeat a short period row, so the entry script fills and checks them with
# broadcast copies and no index tensors (an 8 GiB buffer has 4 Gi bf16
# elements, whose int64 indices alone would take 32 GiB).


def reduce_mode(nranks, dtype):
    """'dense' when every rank can contribute 1..4 to every element without
    the sum leaving the exact range (bfloat16: up to 64 ranks), else
    'sparse': each element gets one rank's non-zero value and zeros from the
    others, which is exact for any number of ranks."""
    return "dense" if REDUCE_PERIOD * nranks <= EXACT_INTEGER_LIMIT[dtype] else "sparse"


def reduce_input_row(rank, nranks, mode):
    """The period row of the input of rank ``rank`` in a sum reduction:
    element i of the buffer holds row[i % len(row)]."""
    if mode == "dense":
        return [float((rank + index) % REDUCE_PERIOD + 1) for index in range(REDUCE_PERIOD)]
    return [float(rank % REDUCE_PERIOD + 1) if index == rank else 0.0 for index in range(nranks)]


def reduce_expected_row(nranks, mode):
    """The period row of the exact sum of every rank's reduce_input_row."""
    if mode == "dense":
        return [float(sum((rank + index) % REDUCE_PERIOD + 1 for rank in range(nranks)))
                for index in range(REDUCE_PERIOD)]
    return [float(index % REDUCE_PERIOD + 1) for index in range(nranks)]


def label_row():
    """The period row of labelled chunks (all_gather, alltoall): the chunk
    with label L holds label_row()[(L + j) % LABEL_PERIOD] at element j, so
    chunks of different labels differ at every element, unless the labels
    are congruent modulo LABEL_PERIOD."""
    return [float(index + 1) for index in range(LABEL_PERIOD)]


def alltoall_label(source, destination, nranks):
    """Label of the chunk that rank ``source`` sends to ``destination``."""
    return source * nranks + destination


# --- thresholds -------------------------------------------------------------


def parse_thresholds(values, option="--min-busbw"):
    """SIZE=GBPS strings (``1G=194``: every measured size of 1 GiB or more
    must reach 194 GB/s bus bandwidth) as a sorted list of (bytes, GB/s).
    Raises ValueError naming the option and the fix."""
    thresholds = []
    for value in values or ():
        if not isinstance(value, str) or value.count("=") != 1:
            raise ValueError("%s %r: expected SIZE=GBPS, for example %s 1G=194 (every measured size of 1G or "
                             "more must reach 194 GB/s bus bandwidth)" % (option, value, option))
        size_text, gbps_text = [part.strip() for part in value.split("=")]
        try:
            size = parse_size(size_text, option="SIZE")
        except ValueError as exc:
            raise ValueError("%s %r: %s; write SIZE=GBPS, for example %s 1G=194" % (option, value, exc, option))
        try:
            gbps = float(gbps_text)
        except ValueError:
            raise ValueError("%s %r: GBPS %r is not a number; give the bus bandwidth in GB/s, for example "
                             "%s 1G=194" % (option, value, gbps_text, option))
        if not math.isfinite(gbps) or gbps <= 0:
            raise ValueError("%s %r: GBPS must be a bus bandwidth above 0 GB/s, got %s; for example %s 1G=194"
                             % (option, value, gbps_text, option))
        thresholds.append((size, gbps))
    return sorted(thresholds)


def threshold_for(size, thresholds):
    """The minimum busbw (GB/s) that a measurement of ``size`` bytes must
    reach: the strictest of the thresholds whose SIZE is at most size, or
    None when none applies."""
    applicable = [gbps for at_least, gbps in thresholds if size >= at_least]
    return max(applicable) if applicable else None


def check_thresholds_apply(thresholds, sizes, option="--min-busbw"):
    """Raises ValueError for a threshold that no size of the run reaches: a
    gate that can never be applied would pass silently."""
    largest = max(sizes) if sizes else 0
    for size, gbps in thresholds:
        if size > largest:
            raise ValueError("%s %s=%g applies to sizes of %s or more, but the largest size measured is %s: raise "
                             "-e (or --pairwise-size) to at least %s, or lower the SIZE" % (
                                 option, format_size(size), gbps, format_size(size), format_size(largest),
                                 format_size(size)))


def gate(size, busbw, thresholds):
    """The gate of one measurement of a requested size: None when no
    threshold applies, else {min_busbw_gbps, passed, status} with status
    pass, fail, or not-measured (busbw None), which never passes."""
    minimum = threshold_for(size, thresholds)
    if minimum is None:
        return None
    if busbw is None:
        return {"min_busbw_gbps": minimum, "passed": False, "status": "not-measured"}
    passed = busbw >= minimum
    return {"min_busbw_gbps": minimum, "passed": passed, "status": "pass" if passed else "fail"}


# --- rows and the document --------------------------------------------------


def launch_bound(issue_seconds, gpu_seconds):
    """Whether an eager loop that took ``issue_seconds`` of CPU time to issue
    calls that took ``gpu_seconds`` on the GPU measured the launches rather
    than the collective (--launch auto then times a CUDA graph instead)."""
    return issue_seconds >= LAUNCH_BOUND_FRACTION * gpu_seconds


def hold_seconds(issue_seconds_per_call, iters):
    """How long the GPU is held before a timed loop of ``iters`` calls: twice
    what issuing them is expected to take, at least MIN_HOLD_SECONDS."""
    return max(MIN_HOLD_SECONDS, 2.0 * issue_seconds_per_call * iters)


def measured_row(op, shape, nranks, seconds, wrong, thresholds=(), launch="eager"):
    """A row of a size that was measured: ``seconds`` per operation (the
    slowest rank's), ``wrong`` elements summed over the ranks, ``launch``
    how the timed iterations were issued (eager or graph)."""
    algbw, busbw = bandwidth(op, shape["size"], seconds, nranks)
    return {
        "size": shape["size"], "requested_size": shape["requested_size"], "count": shape["count"],
        "status": "measured", "note": None, "time_us": seconds * 1.0e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
        "wrong": int(wrong), "gate": gate(shape["requested_size"], busbw, thresholds), "launch": launch,
    }


def unmeasured_row(shape, note, thresholds=()):
    """A row of a size that could not be measured, and why: no figure."""
    return {
        "size": shape["size"], "requested_size": shape["requested_size"], "count": shape["count"],
        "status": "not-measured", "note": note, "time_us": None, "algbw_gbps": None, "busbw_gbps": None,
        "wrong": None, "gate": gate(shape["requested_size"], None, thresholds), "launch": None,
    }


def average_busbw(rows):
    """nccl-tests' "Avg bus bandwidth": the mean busbw of the measured rows,
    None when none was measured."""
    values = [row["busbw_gbps"] for row in rows if row.get("busbw_gbps") is not None]
    return sum(values) / len(values) if values else None


def op_block(op, rows):
    """One op's entry in the document."""
    return {"placement": OP_INFO[op]["placement"], "redop": OP_INFO[op]["redop"], "call": OP_INFO[op]["call"],
            "avg_busbw_gbps": average_busbw(rows), "rows": rows}


# The check each finding of judge() belongs to: a gate or pair below its
# figure is the fabric's bandwidth (busbw_gate); a size or pair not measured
# or with wrong elements is the benchmark's own result (bench_result).
FINDING_CHECKS = {
    "below_gate": "busbw_gate",
    "gate_not_measured": "busbw_gate",
    "slow_pair": "busbw_gate",
    "not_measured": "bench_result",
    "wrong_elements": "bench_result",
}


def _finding(kind, where, message, **figures):
    finding = {"check": FINDING_CHECKS[kind], "kind": kind, "where": where, "message": "%s: %s" % (where, message)}
    finding.update(figures)
    return finding


def _row_findings(op, row):
    where = "%s %s" % (op, format_size(row["requested_size"]))
    found = []
    if row["status"] != "measured":
        found.append(_finding("not_measured", where, "not measured (%s)" % (row.get("note") or "no reason given"),
                              op=op, size=row["requested_size"]))
    elif row["wrong"]:
        found.append(_finding("wrong_elements", where, _plural(row["wrong"], "wrong element"),
                              op=op, size=row["requested_size"], wrong=row["wrong"]))
    row_gate = row.get("gate")
    if row_gate and row_gate["status"] == "fail":
        found.append(_finding("below_gate", where, "busbw %.2f GB/s is below the gate of %g GB/s" % (
            row["busbw_gbps"], row_gate["min_busbw_gbps"]), op=op, size=row["requested_size"],
            busbw_gbps=row["busbw_gbps"], min_busbw_gbps=row_gate["min_busbw_gbps"]))
    elif row_gate and row_gate["status"] == "not-measured":
        found.append(_finding("gate_not_measured", where, "the gate of %g GB/s cannot pass, the size was not measured"
                              % row_gate["min_busbw_gbps"], op=op, size=row["requested_size"],
                              min_busbw_gbps=row_gate["min_busbw_gbps"]))
    return found


def _pair_findings(pair):
    where = "pair %s" % " - ".join(pair["nodes"])
    if pair["status"] != "measured":
        return [_finding("not_measured", where, "not measured (%s)" % (pair.get("note") or "no reason given"),
                         nodes=pair["nodes"])]
    found = []
    if pair["wrong"]:
        found.append(_finding("wrong_elements", where, _plural(pair["wrong"], "wrong element"),
                              nodes=pair["nodes"], wrong=pair["wrong"]))
    if pair.get("slow"):
        found.append(_finding("slow_pair", where, "slow (%s)" % "; ".join(pair["reasons"]),
                              nodes=pair["nodes"], busbw_gbps=pair.get("busbw_gbps")))
    return found


def judge(document):
    """Why the run fails (empty when it passes), one finding per reason:
    a size not measured, wrong elements, a gate not passed, a slow or
    unmeasured pair. Each names its check (FINDING_CHECKS), its kind, where
    it was found, its figures and a message."""
    found = []
    for op in document.get("ops") or {}:
        for row in document["ops"][op]["rows"]:
            found.extend(_row_findings(op, row))
    for pair in document.get("pairs") or ():
        found.extend(_pair_findings(pair))
    return found


def finish_document(document):
    """Adds the verdict (pass/fail), its findings and their messages as
    ``reasons``, the wrong-element total, and ``results`` in the shape
    throughput_report reads."""
    findings = judge(document)
    document["findings"] = findings
    document["reasons"] = [finding["message"] for finding in findings]
    document["verdict"] = "fail" if findings else "pass"
    document["passed"] = not findings
    wrong = 0
    for block in (document.get("ops") or {}).values():
        wrong += sum(row["wrong"] or 0 for row in block["rows"])
    wrong += sum(pair.get("wrong") or 0 for pair in document.get("pairs") or ())
    document["wrong"] = wrong
    document.update(throughput_results(document))
    return document


def throughput_results(document):
    """collective, nranks, type and results as in nccl-tests' JSON-shaped
    files that mlinfra-throughput-report reads (tests/fixtures/logs/benchmark):
    the measured rows of the first op, or in pairwise mode one entry per
    measured pair."""
    results = []
    collective = None
    if document.get("mode") == "pairwise":
        collective = "all_reduce"
        for pair in document.get("pairs") or ():
            if pair["status"] == "measured":
                results.append({"size": pair["size"], "count": pair["count"], "type": NCCL_TYPE_NAMES[document["dtype"]],
                                "redop": "sum", "root": -1, "in_place": True, "time": pair["time_us"],
                                "algbw": pair["algbw_gbps"], "busbw": pair["busbw_gbps"], "wrong": pair["wrong"],
                                "nodes": pair["nodes"]})
    elif document.get("ops"):
        collective = list(document["ops"])[0]
        block = document["ops"][collective]
        for row in block["rows"]:
            if row["status"] == "measured":
                results.append({"size": row["size"], "count": row["count"], "type": NCCL_TYPE_NAMES[document["dtype"]],
                                "redop": block["redop"], "root": -1, "in_place": block["placement"] == "in-place",
                                "time": row["time_us"], "algbw": row["algbw_gbps"], "busbw": row["busbw_gbps"],
                                "wrong": row["wrong"]})
    return {"collective": collective, "nranks": document.get("world_size"),
            "type": NCCL_TYPE_NAMES.get(document.get("dtype")), "results": results}


def render_document(document):
    """The document as JSON text. Keys keep their order: the ops appear in
    the order they ran, which is --ops's order."""
    return json.dumps(document, indent=2) + "\n"


_ROW_KEYS = ("size", "requested_size", "count", "status", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "gate")


def parse_document(text, source="the document"):
    """The result document from its JSON text, checked for the keys readers
    rely on. Raises ValueError saying what is wrong."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError("%s is not JSON (%s): %s writes one JSON object with --json" % (source, exc, TOOL))
    if not isinstance(document, dict) or document.get("tool") != TOOL:
        raise ValueError("%s is not a %s result: it has no \"tool\": \"%s\"" % (source, TOOL, TOOL))
    schema = document.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise ValueError("%s has schema %r; this reader knows schema %d and older: read it with a newer %s" % (
            source, schema, SCHEMA_VERSION, TOOL))
    for key in ("backend", "world_size", "nodes", "dtype", "ops", "verdict"):
        if key not in document:
            raise ValueError("%s has no %r" % (source, key))
    if not isinstance(document["ops"], dict):
        raise ValueError("%s: 'ops' must be an object of op name to its rows" % source)
    for op, block in document["ops"].items():
        rows = block.get("rows") if isinstance(block, dict) else None
        if not isinstance(rows, list):
            raise ValueError("%s: ops.%s has no list 'rows'" % (source, op))
        for index, row in enumerate(rows):
            missing = [key for key in _ROW_KEYS if not isinstance(row, dict) or key not in row]
            if missing:
                raise ValueError("%s: ops.%s.rows[%d] lacks %s" % (source, op, index, ", ".join(missing)))
    return document


def read_document(path):
    """The result document written to ``path`` by --json."""
    with open(path, encoding="utf-8") as handle:
        return parse_document(handle.read(), source=path)


# --- the nccl-tests table -----------------------------------------------------

# The column headings of nccl-tests 2.19 (all_reduce_perf), character for
# character, so that parsers of its output find them.
TABLE_HEADER = (
    "#                                                              out-of-place                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ",
)
NOT_AVAILABLE = "N/A"


def format_number(value, width):
    """A figure in ``width`` characters as nccl-tests prints it: two
    decimals, fewer when they do not fit, then an exponent."""
    for pattern in ("%*.2f", "%*.1f", "%*.0f"):
        text = pattern % (width, value)
        if len(text) <= width:
            return text
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def format_group(row):
    """One column group (time, algbw, busbw, #wrong) of a row, N/A when
    there is no measurement."""
    if row is None or row.get("status") != "measured":
        return "  %7s  %6s  %6s  %6s" % ((NOT_AVAILABLE,) * 4)
    return "  %7s  %6s  %6s  %6g" % (format_number(row["time_us"], 7), format_number(row["algbw_gbps"], 6),
                                     format_number(row["busbw_gbps"], 6), float(row["wrong"]))


def format_row(op, dtype, row):
    """One line of the table; the column group the op does not fill, and
    both groups of a size that was not measured, read N/A."""
    line = "%12d  %12d  %8s  %6s  %6d" % (row["size"], row["count"], NCCL_TYPE_NAMES[dtype], OP_INFO[op]["redop"], -1)
    placement = OP_INFO[op]["placement"]
    for column in PLACEMENTS:
        line += format_group(row if column == placement else None)
    return line


def table_preamble(op, settings, devices=()):
    """The comment lines nccl-tests prints before its headings: test name,
    settings, devices (dicts of rank, pid, host, device, bus_id, name)."""
    lines = [
        "# Collective test starting: %s_perf" % op,
        "# nThread 1 nGpus 1 minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d agg iters: 1 "
        "validation: 1 graph: %d" % (settings["min_bytes"], settings["max_bytes"], settings["factor"],
                                     settings["warmup_iters"], settings["iters"],
                                     1 if settings.get("launch") == "graph" else 0),
        "#",
    ]
    if devices:
        lines.append("# Using devices")
        for device in devices:
            lines.append("#  Rank %2d Group  0 Pid %6d on %10s device %2s [%s] %s" % (
                device["rank"], device["pid"], device["host"], device["device"], device["bus_id"], device["name"]))
        lines.append("#")
    return lines


def table_footer(op, rows):
    """nccl-tests' closing lines: wrong elements in total, average busbw."""
    measured = [row for row in rows if row["status"] == "measured"]
    wrong = sum(row["wrong"] for row in measured)
    average = average_busbw(rows)
    graphed = [format_size(row["size"]) for row in measured if row.get("launch") == "graph"]
    # nccl-tests' "graph:" setting is one for the whole run; with --launch
    # auto only some sizes are, and the table says which.
    lines = ["# Timed as a CUDA graph: %s" % " ".join(graphed)] if graphed else []
    return lines + [
        "# Out of bounds values : %d %s" % (wrong, "OK" if not wrong else "FAILED"),
        "# Avg bus bandwidth    : %s " % (NOT_AVAILABLE if average is None else "%g" % average),
        "#",
        "# Collective test concluded: %s_perf" % op,
        "#",
    ]


def title_line(document):
    """The first line, where nccl-tests names its version."""
    return "# %s version %s (nccl-tests-compatible table) torch %s backend %s%s" % (
        TOOL, VERSION, document.get("torch_version"), document["backend"],
        " nccl %s" % document["nccl_version"] if document.get("nccl_version") else "")


def format_table(document, devices=()):
    """Every op of the document as nccl-tests prints one test."""
    settings = document["settings"]
    lines = [title_line(document)]
    for op, block in document["ops"].items():
        lines.extend(table_preamble(op, settings, devices))
        lines.extend(TABLE_HEADER)
        lines.extend(format_row(op, document["dtype"], row) for row in block["rows"])
        lines.extend(table_footer(op, block["rows"]))
    return "\n".join(lines) + "\n"


def _table_number(text):
    if text == NOT_AVAILABLE:
        return None
    return float(text)


def _table_row(fields):
    """A result line's fields as a row, or None for any other line."""
    if len(fields) == 13:
        size, count, dtype, redop, root = fields[:5]
        groups = fields[5:]
    elif len(fields) == 11:
        size, count, dtype = fields[:3]
        redop, root = None, None
        groups = fields[3:]
    else:
        return None
    try:
        row = {"size": int(size), "count": int(count), "type": dtype, "redop": redop,
               "root": None if root is None else int(root)}
        for index, placement in enumerate(("out_of_place", "in_place")):
            values = [_table_number(value) for value in groups[4 * index:4 * index + 4]]
            row[placement] = None if all(value is None for value in values) else {
                "time_us": values[0], "algbw_gbps": values[1], "busbw_gbps": values[2],
                "wrong": None if values[3] is None else int(values[3])}
    except ValueError:
        # Not a result line (a warning that happens to have as many words).
        return None
    return row


def parse_table(text):
    """The tests of nccl-tests output (or this tool's table) as a list of
    {op, rows, avg_busbw, out_of_bounds}; each row {size, count, type,
    redop, root, out_of_place, in_place}, a placement being {time_us,
    algbw_gbps, busbw_gbps, wrong} (None where N/A) or None when all four
    read N/A. Reads the 13-column layout and the older 11-column one
    without redop and root."""
    tests = []

    def start(op=None):
        tests.append({"op": op, "rows": [], "avg_busbw": None, "out_of_bounds": None})

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if body.startswith("Collective test starting:"):
                name = body.split(":", 1)[1].strip()
                start(name[:-len("_perf")] if name.endswith("_perf") else name)
            elif body.startswith("Avg bus bandwidth") and tests:
                value = body.split(":", 1)[1].strip()
                tests[-1]["avg_busbw"] = None if value in ("", NOT_AVAILABLE) else float(value.split()[0])
            elif body.startswith("Out of bounds values") and tests:
                tests[-1]["out_of_bounds"] = int(body.split(":", 1)[1].split()[0])
            elif body.startswith("size") and tests and tests[-1]["rows"]:
                # Headings again without a "starting" line: a new test.
                start()
            continue
        row = _table_row(stripped.split())
        if row is None:
            continue
        if not tests:
            start()
        tests[-1]["rows"].append(row)
    return [test for test in tests if test["rows"] or test["op"]]


# --- nodes and pairs ----------------------------------------------------------


def group_nodes(keys):
    """Ranks grouped into nodes by each rank's node key (GROUP_RANK, or rank
    // ranks-per-node): a list of rank lists, in order of their first rank."""
    order = []
    members = {}
    for rank, key in enumerate(keys):
        if key not in members:
            members[key] = []
            order.append(key)
        members[key].append(rank)
    return [members[key] for key in order]


def name_nodes(nodes, infos):
    """A name for each node (a list of rank lists): MLINFRA_NODE_NAME of its
    first rank when set, else that rank's hostname. When the names are not
    unique (on the local test cluster several nodes share one host) every
    node is called node<index> instead, so that no two are confused.
    ``infos`` holds per rank {hostname, node_name}."""
    names = []
    for ranks in nodes:
        info = infos[ranks[0]]
        names.append(info.get("node_name") or info.get("hostname") or "")
    if "" in names or len(set(names)) != len(names):
        return ["node%d" % index for index in range(len(nodes))]
    return names


def round_robin(count):
    """Rounds of disjoint node pairs that together hold every pair of
    ``count`` nodes exactly once (the circle method): node 0 stays put, the
    others rotate; with an odd count one node sits out each round. Pairs are
    (lower, higher) index tuples."""
    slots = list(range(count)) + ([None] if count % 2 else [])
    rounds = []
    for _round in range(len(slots) - 1):
        pairs = []
        for index in range(len(slots) // 2):
            first, second = slots[index], slots[-1 - index]
            if first is not None and second is not None:
                pairs.append((min(first, second), max(first, second)))
        rounds.append(sorted(pairs))
        slots = [slots[0], slots[-1]] + slots[1:-1]
    return rounds


def analyze_pairs(pairs, fraction=DEFAULT_SLOW_FRACTION, min_busbw=None):
    """Marks each pair {nodes: [a, b], busbw_gbps, status} slow or not and
    names the suspects.

    A measured pair is slow when its busbw is below ``fraction`` of the
    median of all measured pairs, or below ``min_busbw``. A node is a
    suspect when more than half of its pairs are slow and it is in more than
    half of the slow pairs: one bad node makes all of its own pairs slow and
    only one pair of each other node. When every pair is slow no node stands
    out and none is named. Returns {median_busbw_gbps, slowest_pair,
    slow_pairs, suspect_nodes, note}."""
    if not 0 < fraction < 1:
        raise ValueError("the slow fraction must be between 0 and 1 (0.8 = slow below 80%% of the median), got %r"
                         % (fraction,))
    measured = [pair for pair in pairs if pair["status"] == "measured"]
    median = common.median([pair["busbw_gbps"] for pair in measured])
    for pair in pairs:
        reasons = []
        if pair["status"] != "measured":
            reasons.append("not measured")
        else:
            if median and pair["busbw_gbps"] < fraction * median:
                reasons.append("busbw %.2f GB/s is %.0f%% of the median %.2f GB/s (slow below %.0f%%)" % (
                    pair["busbw_gbps"], 100.0 * pair["busbw_gbps"] / median, median, 100.0 * fraction))
            if min_busbw is not None and pair["busbw_gbps"] < min_busbw:
                reasons.append("busbw %.2f GB/s is below the gate of %g GB/s" % (pair["busbw_gbps"], min_busbw))
        pair["slow"] = bool(reasons)
        pair["reasons"] = reasons
    slow = [pair for pair in pairs if pair["slow"]]
    slowest = min(measured, key=lambda pair: pair["busbw_gbps"]) if measured else None
    node_pairs = {}
    node_slow = {}
    for pair in pairs:
        for node in pair["nodes"]:
            node_pairs[node] = node_pairs.get(node, 0) + 1
            node_slow[node] = node_slow.get(node, 0) + (1 if pair["slow"] else 0)
    suspects = []
    note = None
    if slow and len(slow) == len(pairs):
        note = ("every pair is slow: no node stands out (the whole network, or a threshold set too high)"
                if len(pairs) > 1 else "the only pair is slow: with two nodes the slow one cannot be told apart")
    elif slow:
        suspects = [node for node in sorted(node_pairs)
                    if 2 * node_slow[node] > node_pairs[node] and 2 * node_slow[node] > len(slow)]
        if not suspects:
            note = "no node is common to the slow pairs: suspect the links or switches between them"
    return {
        "median_busbw_gbps": median,
        "slowest_pair": None if slowest is None else {"nodes": slowest["nodes"], "busbw_gbps": slowest["busbw_gbps"]},
        "slow_pairs": [{"nodes": pair["nodes"], "busbw_gbps": pair.get("busbw_gbps"), "reasons": pair["reasons"]}
                       for pair in slow],
        "suspect_nodes": suspects,
        "note": note,
    }


def format_pairs(document):
    """The pairwise table and its conclusion, as rank 0 prints it."""
    summary = document["pairwise"]
    lines = [
        "# %s version %s pairwise all_reduce: %d bytes %s per pair, %s, backend %s" % (
            TOOL, VERSION, summary["size"], document["dtype"], _plural(len(document["nodes"]), "node"),
            document["backend"]),
        "# %5s  %-20s  %-20s  %5s  %9s  %7s  %7s  %6s  %s" % (
            "round", "node", "node", "ranks", "time(us)", "algbw", "busbw", "#wrong", "verdict"),
    ]
    for pair in document["pairs"]:
        if pair["status"] == "measured":
            figures = "%9s  %7s  %7s  %6g" % (format_number(pair["time_us"], 9), format_number(pair["algbw_gbps"], 7),
                                              format_number(pair["busbw_gbps"], 7), float(pair["wrong"]))
        else:
            figures = "%9s  %7s  %7s  %6s" % ((NOT_AVAILABLE,) * 4)
        verdict = "SLOW: " + "; ".join(pair["reasons"]) if pair["slow"] else "ok"
        if pair["status"] == "measured" and pair["wrong"]:
            verdict = "WRONG RESULTS; " + verdict
        lines.append("  %5d  %-20s  %-20s  %5d  %s  %s" % (
            pair["round"], pair["nodes"][0], pair["nodes"][1], len(pair["ranks"]), figures, verdict))
    if summary["median_busbw_gbps"] is not None:
        lines.append("# median busbw of the pairs: %.2f GB/s; slow below %.0f%% of it%s" % (
            summary["median_busbw_gbps"], 100.0 * summary["fraction"],
            "" if summary["min_busbw_gbps"] is None else " or below %g GB/s" % summary["min_busbw_gbps"]))
    slowest = document["slowest_pair"]
    if slowest:
        lines.append("# slowest pair: %s - %s at %.2f GB/s" % (slowest["nodes"][0], slowest["nodes"][1],
                                                               slowest["busbw_gbps"]))
    lines.append("# slow pairs: %s" % (", ".join("%s - %s" % tuple(pair["nodes"]) for pair in document["slow_pairs"])
                                       or "none"))
    lines.append("# suspect nodes: %s" % (", ".join(document["suspect_nodes"]) or "none"))
    if summary.get("note"):
        lines.append("# note: %s" % summary["note"])
    return "\n".join(lines) + "\n"


# --- command line -------------------------------------------------------------


def build_parser():
    parser = argparse.ArgumentParser(
        prog=TOOL,
        description="Time torch.distributed collectives across every rank of a torchrun job and print an "
                    "nccl-tests-compatible table. Exit status 0 when every result is right and every gate passes, "
                    "1 when not, 2 on bad usage.")
    parser.add_argument("--ops", help="comma-separated ops among %s (default all_reduce)" % ", ".join(OPS))
    parser.add_argument("-b", "--minbytes", default=DEFAULT_MIN_BYTES,
                        help="smallest size, bytes or with K/M/G/T (default %(default)s)")
    parser.add_argument("-e", "--maxbytes", default=DEFAULT_MAX_BYTES, help="largest size (default %(default)s)")
    parser.add_argument("-f", "--stepfactor", default=str(DEFAULT_FACTOR),
                        help="multiply the size by this between steps (default %(default)s)")
    parser.add_argument("--dtype", choices=DTYPES, help="element type (default bfloat16 with nccl, float32 with gloo)")
    parser.add_argument("-w", "--warmup-iters", default=str(DEFAULT_WARMUP),
                        help="untimed iterations per size (default %(default)s)")
    parser.add_argument("-n", "--iters", default=str(DEFAULT_ITERS),
                        help="timed iterations per size (default %(default)s)")
    parser.add_argument("--launch", choices=LAUNCHES, default="auto",
                        help="how the timed iterations are issued on GPUs. eager: one torch call per iteration, as a "
                             "training loop makes them; graph: captured once as a CUDA graph and replayed, so that "
                             "Python's and torch's cost per call (tens of microseconds) cannot hide the collective's "
                             "time at small sizes; auto: eager, and a size is timed again as a graph where the eager "
                             "loop was bound by issuing its calls (default %(default)s; CPUs always run eager)")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                        help="auto: nccl when CUDA is available, else gloo on the CPU")
    parser.add_argument("--min-busbw", action="append", default=[], metavar="SIZE=GBPS",
                        help="every measured size of SIZE or more must reach GBPS bus bandwidth (repeatable; the "
                             "strictest applicable one wins)")
    parser.add_argument("--json", metavar="PATH", help="write the result document here (rank 0)")
    parser.add_argument("--pairwise", action="store_true",
                        help="measure all_reduce between every pair of nodes instead of the sweep")
    parser.add_argument("--pairwise-size", metavar="SIZE",
                        help="size of the pairwise all_reduce (default %s on GPUs, %s on CPUs)" % (
                            DEFAULT_PAIRWISE_SIZE_GPU, DEFAULT_PAIRWISE_SIZE_CPU))
    parser.add_argument("--slow-fraction", default=str(DEFAULT_SLOW_FRACTION),
                        help="a pair below this fraction of the median pair is slow (default %(default)s)")
    parser.add_argument("--ranks-per-node", metavar="N",
                        help="group ranks into nodes of N consecutive ranks (default: torchrun's GROUP_RANK)")
    return parser


def _whole(text, option, minimum):
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("%s %r is not a whole number: give a whole number of at least %d" % (option, text, minimum))
    if value < minimum:
        raise ValueError("%s %d is too small: give at least %d" % (option, value, minimum))
    return value


def resolve_options(args, env):
    """The validated settings of parsed arguments and torchrun's environment
    (WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE), as far as they need no
    torch. Raises ValueError, a usage error, naming the option and the fix."""
    options = {"pairwise": bool(args.pairwise), "json": args.json, "backend": args.backend, "dtype": args.dtype,
               "launch": getattr(args, "launch", "auto")}
    if args.pairwise and args.ops is not None and [op.strip() for op in args.ops.split(",")] != ["all_reduce"]:
        raise ValueError("--pairwise measures all_reduce only: drop --ops %s" % args.ops)
    ops = [op.strip() for op in (args.ops or "all_reduce").split(",") if op.strip()]
    unknown = [op for op in ops if op not in OPS]
    if unknown or not ops:
        raise ValueError("--ops %r: unknown op %s; give a comma-separated list of %s" % (
            args.ops, ", ".join(unknown) or "(none given)", ", ".join(OPS)))
    if len(set(ops)) != len(ops):
        raise ValueError("--ops %r names an op twice: give each once" % args.ops)
    options["ops"] = ops
    min_bytes = parse_size(args.minbytes, "-b")
    max_bytes = parse_size(args.maxbytes, "-e")
    factor = _whole(args.stepfactor, "-f", 1)
    options["sizes"] = [] if args.pairwise else size_range(min_bytes, max_bytes, factor)
    options.update({"min_bytes": min_bytes, "max_bytes": max_bytes, "factor": factor})
    options["warmup_iters"] = _whole(args.warmup_iters, "-w", 0)
    options["iters"] = _whole(args.iters, "-n", 1)
    options["thresholds"] = parse_thresholds(args.min_busbw)
    options["pairwise_size"] = None if args.pairwise_size is None else parse_size(args.pairwise_size, "--pairwise-size")
    try:
        fraction = float(args.slow_fraction)
    except ValueError:
        fraction = None
    if fraction is None or not 0 < fraction < 1:
        raise ValueError("--slow-fraction %r must be a number between 0 and 1 (0.8: a pair below 80%% of the median "
                         "pair is slow)" % (args.slow_fraction,))
    options["slow_fraction"] = fraction
    options["ranks_per_node"] = None
    if args.ranks_per_node is not None:
        options["ranks_per_node"] = _whole(args.ranks_per_node, "--ranks-per-node", 1)
    missing = [name for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK") if not env.get(name)]
    if missing:
        raise ValueError("%s not set: run this under torchrun, for example torchrun --nproc-per-node 8 %s" % (
            ", ".join(missing), TOOL))
    world = _whole(env["WORLD_SIZE"], "WORLD_SIZE", 1)
    options.update({"world_size": world, "rank": _whole(env["RANK"], "RANK", 0),
                    "local_rank": _whole(env["LOCAL_RANK"], "LOCAL_RANK", 0),
                    "local_world_size": _whole(env.get("LOCAL_WORLD_SIZE") or world, "LOCAL_WORLD_SIZE", 1)})
    if options["ranks_per_node"] and world % options["ranks_per_node"]:
        raise ValueError("--ranks-per-node %d does not divide the %d ranks into whole nodes: give a divisor of %d" % (
            options["ranks_per_node"], world, world))
    if args.pairwise:
        per_node = options["ranks_per_node"] or options["local_world_size"]
        if world // per_node < 2:
            raise ValueError("--pairwise needs at least 2 nodes, and the %d ranks make %s of %d ranks: run on more "
                             "nodes, or give --ranks-per-node" % (world, _plural(world // per_node, "node"), per_node))
    return options


def resolve_device(options, cuda_available):
    """Backend, device, dtype and the sizes that need them; raises
    ValueError for usage errors."""
    backend = options["backend"]
    if backend == "auto":
        backend = "nccl" if cuda_available else "gloo"
    if backend == "nccl" and not cuda_available:
        raise ValueError("--backend nccl needs CUDA, and torch sees no GPU here: use --backend gloo (CPU), or run "
                         "where GPUs are visible")
    dtype = options["dtype"] or ("bfloat16" if backend == "nccl" else "float32")
    if backend == "gloo" and dtype != "float32":
        raise ValueError("--dtype %s is not supported with gloo, whose CPU reductions are float32 here: use --dtype "
                         "float32 or --backend nccl" % dtype)
    options.update({"backend": backend, "dtype": dtype, "device": "cuda" if backend == "nccl" else "cpu"})
    if options["device"] == "cpu":
        options["launch"] = "eager"
    if options["pairwise"]:
        if options["pairwise_size"] is None:
            options["pairwise_size"] = parse_size(DEFAULT_PAIRWISE_SIZE_GPU if backend == "nccl"
                                                  else DEFAULT_PAIRWISE_SIZE_CPU)
        per_node = options["ranks_per_node"] or options["local_world_size"]
        if layout("all_reduce", options["pairwise_size"], 2 * per_node, dtype) is None:
            raise ValueError("--pairwise-size %d is smaller than one %s element: give a larger size" % (
                options["pairwise_size"], dtype))
        check_thresholds_apply(options["thresholds"], [options["pairwise_size"]])
    else:
        for op in options["ops"]:
            if not any(layout(op, size, options["world_size"], dtype) for size in options["sizes"]):
                raise ValueError("-e %s is too small for %s on %s in %s: give -e of at least %s" % (
                    format_size(options["max_bytes"]), op, _plural(options["world_size"], "rank"), dtype,
                    format_size(smallest_size(op, options["world_size"], dtype))))
        check_thresholds_apply(options["thresholds"], options["sizes"])
    return options


def settings_of(options):
    """What the document records of how it was run."""
    return {"min_bytes": options["min_bytes"], "max_bytes": options["max_bytes"], "factor": options["factor"],
            "warmup_iters": options["warmup_iters"], "iters": options["iters"],
            "time_across_ranks": "max", "check": "exact", "launch": options.get("launch", "eager")}
