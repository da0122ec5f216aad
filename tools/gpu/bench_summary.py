"""Summary of ``measure.sh bench-compare OUTDIR``: per size and type, the
median over rounds of each contender's all_reduce busbw, and the ratios the
GPU validation judges (docs/PERFORMANCE.md):

- the collection's benchmark (the detected environment, as in a pod)
  against NVIDIA nccl-tests' in-place busbw (torch's all_reduce writes over
  its input: nccl-tests' in-place run); goal >= 0.99 from 64 MiB up;
- the detected environment and the seeds' fixed one against NCCL's
  defaults; goal: the detected one never more than 1% below;
- what NCCL set up in each environment (its NCCL_DEBUG=INFO log of the first
  round): the lines where it differs from the run with none set. Where
  only the variables' own echo differs, the collectives ran with the same
  channels, transports and rings, and any gap in busbw is run-to-run noise.

Reads nccl-tests' table with the benchmark's own parser
(collective_bench.parse_table) and the benchmark's JSON result.
"""

import glob
import json
import os
import re
import sys

from module_utils import collective_bench as cb
from module_utils.throughput import median

ENVIRONMENTS = ("none", "detected", "seed")
FROM_SIZE = 64 * 1024 * 1024
# Parts of an NCCL INFO line that change from one process to the next
# without changing what NCCL set up: the "host:pid:tid [dev]" prefix, object
# addresses, the CPU cores its proxy threads happened to start on, and the
# lines of how long its initialization took.
_NCCL_PREFIX = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL INFO ")
_NCCL_VOLATILE = (re.compile(r"0x[0-9a-f]+"), re.compile(r"CPU core \d+"))
_NCCL_TIMINGS = "Init timings"


def bench_rows(path):
    with open(path) as handle:
        result = json.loads(handle.read().strip().splitlines()[-1])
    if result.get("exit_code") != 0 or not result.get("document"):
        raise SystemExit("%s: the benchmark failed: %s" % (path, result.get("error")))
    return dict((row["size"], row["busbw_gbps"]) for row in result["document"]["ops"]["all_reduce"]["rows"])


def nccl_tests_rows(path):
    with open(path) as handle:
        blocks = cb.parse_table(handle.read())
    # nccl-tests before 2.14 print no "Collective test starting" line, so
    # their table names no op: all_reduce_perf's own table is all_reduce.
    rows = [row for block in blocks if block["op"] in ("all_reduce", None) for row in block["rows"]]
    if not rows:
        raise SystemExit("%s holds no all_reduce_perf table" % path)
    return dict((row["size"], row["in_place"]["busbw_gbps"]) for row in rows)


def nccl_setup(path):
    """The set of NCCL INFO lines of a bench log, without what varies from
    one process to the next."""
    lines = set()
    with open(path) as handle:
        for line in handle:
            if not _NCCL_PREFIX.match(line):
                continue
            line = _NCCL_PREFIX.sub("", line.rstrip("\n"))
            if line.startswith(_NCCL_TIMINGS):
                continue
            for volatile in _NCCL_VOLATILE:
                line = volatile.sub("#", line)
            lines.add(line)
    return lines


def setup_differences(out, dtype):
    """{environment: (lines only in it, lines only in none)} for the first
    round's NCCL logs, or None where a log is missing."""
    logs = dict((env, os.path.join(out, "work-%s-%s-1" % (env, dtype), "bench-node0.log")) for env in ENVIRONMENTS)
    if not all(os.path.exists(path) for path in logs.values()):
        return None
    none = nccl_setup(logs["none"])
    differences = {}
    for env in ENVIRONMENTS[1:]:
        lines = nccl_setup(logs[env])
        differences[env] = (sorted(lines - none), sorted(none - lines))
    return differences


def read_rounds(paths, read):
    series = []
    for path in paths:
        try:
            series.append(read(path))
        except SystemExit as exc:
            # A run cut short (the call's time limit) leaves a file without
            # its table: that round is left out, and said so.
            print("left out: %s" % exc)
    return series


def medians(series):
    """Per size, the median of the rounds that measured it."""
    sizes = sorted(set.intersection(*(set(rows) for rows in series))) if series else []
    return dict((size, median([rows[size] for rows in series])) for size in sizes)


def widest_spread(series_of_envs, below):
    """The largest (max - min) / median of one environment's rounds at one
    size, over the sizes below FROM_SIZE (``below``) or the others."""
    widest = 0.0
    for series in series_of_envs:
        for size, mid in medians(series).items():
            if (size < FROM_SIZE) == below and mid and len(series) > 1:
                values = [rows[size] for rows in series]
                widest = max(widest, (max(values) - min(values)) / mid)
    return widest


def main(out):
    names = glob.glob(os.path.join(out, "bench-*.json"))
    rounds = sorted(set(int(m.group(1)) for m in (re.search(r"-(\d+)\.json$", p) for p in names) if m))
    print("rounds: %d (medians over them)" % len(rounds))
    failed = False
    for dtype in ("bfloat16", "float32"):
        rounds_of = dict((env, read_rounds(sorted(glob.glob(os.path.join(out, "bench-%s-%s-*.json" % (env, dtype)))),
                                           bench_rows)) for env in ENVIRONMENTS)
        got = dict((env, medians(series)) for env, series in rounds_of.items())
        ref = medians(read_rounds(sorted(glob.glob(os.path.join(out, "nccltests-%s-*.txt" % dtype))),
                                  nccl_tests_rows))
        print("\n%s  busbw GB/s" % dtype)
        print("%10s %11s %11s %8s %11s %11s %9s %9s" % (
            "size", "nccl-tests", "bench", "ratio", "none", "seed", "det/none", "seed/none"))
        worst_ref, worst_none, worst_seed = None, None, None
        for size in sorted(got["detected"]):
            detected, none, seed = got["detected"][size], got["none"].get(size), got["seed"].get(size)
            ratio = detected / ref[size] if size in ref and ref[size] else None
            det_none = detected / none if none else None
            seed_none = seed / none if none and seed else None
            if ratio is not None and size >= FROM_SIZE:
                worst_ref = ratio if worst_ref is None else min(worst_ref, ratio)
            if det_none is not None:
                worst_none = det_none if worst_none is None else min(worst_none, det_none)
            if seed_none is not None:
                worst_seed = seed_none if worst_seed is None else min(worst_seed, seed_none)
            print("%10s %11s %11.2f %8s %11s %11s %9s %9s" % (
                cb.format_size(size), "%.2f" % ref[size] if size in ref else "-", detected,
                "%.4f" % ratio if ratio is not None else "-", "%.2f" % none if none else "-",
                "%.2f" % seed if seed else "-", "%.4f" % det_none if det_none else "-",
                "%.4f" % seed_none if seed_none else "-"))
        if worst_ref is not None:
            print("bench / nccl-tests, lowest from 64 MiB up: %.4f (goal >= 0.99)" % worst_ref)
            failed |= worst_ref < 0.99
        if worst_none is not None:
            print("detected / none, lowest at any size: %.4f (goal >= 0.99)" % worst_none)
            failed |= worst_none < 0.99
        if worst_seed is not None:
            print("seed / none, lowest at any size: %.4f" % worst_seed)
        print("rounds of one environment differ by up to %.1f%% below 64 MiB, %.1f%% from 64 MiB up" % (
            100 * widest_spread(rounds_of.values(), True), 100 * widest_spread(rounds_of.values(), False)))
        differences = setup_differences(out, dtype)
        for env, (added, missing) in sorted((differences or {}).items()):
            print("NCCL set-up, %s against none (round 1): %s" % (
                env, "; ".join(["+ " + line for line in added] + ["- " + line for line in missing]) or "the same"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
