# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective-communication benchmark's logic that needs no torch.

``mlinfra nccl-bench`` runs under torchrun in every training pod and times
torch.distributed collectives (bench_collectives.py); everything here is
what it does around them: message sizes, nccl-tests' bandwidth formulas, the
JSON result document, per-size pass thresholds and the values that make
every result exactly checkable. Beside it: the nccl-tests-compatible text
table (bench_table.py), the pairwise, node against node, analysis
(bench_pairs.py) and the command line (bench_options.py).

Standard library only and importable without torch, so that the unit tests,
the Ansible side and laptops can read and judge results.
"""

from __future__ import absolute_import, division, print_function

import json
import math
import re


__metaclass__ = type

# The name result documents and tables carry (recorded results keep it).
TOOL = "mlinfra-nccl-bench"
# The command that runs the benchmark: the pods' program's subcommand.
COMMAND = "mlinfra nccl-bench"
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


def plural(number, word):
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
        found.append(_finding("wrong_elements", where, plural(row["wrong"], "wrong element"),
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
        found.append(_finding("wrong_elements", where, plural(pair["wrong"], "wrong element"),
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
    files that mlinfra throughput-report reads (tests/fixtures/logs/benchmark):
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
