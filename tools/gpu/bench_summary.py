"""Summary of ``measure.sh bench-compare OUTDIR``: per size and type, the
median over rounds of each contender's all_reduce busbw, and the ratios the
GPU validation judges (docs/PERFORMANCE.md):

- the collection's benchmark (the detected environment, as in a pod)
  against NVIDIA nccl-tests' in-place busbw (torch's all_reduce writes over
  its input: nccl-tests' in-place run), as is and with its CUDA-graph mode
  (-G 20, the fairer reference where nccl-tests' own loop is launch-bound);
  goals >= 0.99 from 16 MiB up and >= 0.97 from 1 MiB up;
- the detected environment and a fixed one of other tools
  (NCCL_ALGO=Ring NCCL_P2P_LEVEL=NVL NCCL_NET_GDR_LEVEL=5, where run)
  against NCCL's defaults; goal: the detected one >= 0.99 from 16 MiB up;
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

from module_utils.fabric import collective_bench as cb
from module_utils.fabric import bench_table
from module_utils.common.stats import median

ENVIRONMENTS = ("none", "detected", "seed")
FROM_SIZE = 16 * 1024 * 1024
# Goals: the benchmark against nccl-tests from FROM_SIZE up, and at every size.
GOAL_LARGE, GOAL_ANY = 0.99, 0.97
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
        blocks = bench_table.parse_table(handle.read())
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
    logs = dict((env, path) for env, path in logs.items() if os.path.exists(path))
    if "none" not in logs:
        return None
    none = nccl_setup(logs["none"])
    differences = {}
    for env in [env for env in ENVIRONMENTS[1:] if env in logs]:
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


def _cell(value, form):
    return form % value if value is not None else "-"


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
        graph = medians(read_rounds(sorted(glob.glob(os.path.join(out, "nccltests_graph-%s-*.txt" % dtype))),
                                    nccl_tests_rows))
        print("\n%s  busbw GB/s" % dtype)
        print("%8s %10s %10s %9s %8s %8s %9s %9s %9s %9s" % (
            "size", "nccl-tests", "-G 20", "bench", "ratio", "ratio -G", "none", "seed", "det/none", "seed/none"))
        ratios, ratios_large, ratios_graph, none_large, seed_any = [], [], [], [], []
        for size in sorted(got["detected"]):
            detected, none, seed = got["detected"][size], got["none"].get(size), got["seed"].get(size)
            ratio = detected / ref[size] if ref.get(size) else None
            ratio_graph = detected / graph[size] if graph.get(size) else None
            det_none = detected / none if none else None
            seed_none = seed / none if none and seed else None
            if ratio is not None:
                ratios.append(ratio)
                if size >= FROM_SIZE:
                    ratios_large.append(ratio)
            if ratio_graph is not None:
                ratios_graph.append(ratio_graph)
            if det_none is not None and size >= FROM_SIZE:
                none_large.append(det_none)
            if seed_none is not None:
                seed_any.append(seed_none)
            print("%8s %10s %10s %9.2f %8s %8s %9s %9s %9s %9s" % (
                cb.format_size(size), _cell(ref.get(size), "%.2f"), _cell(graph.get(size), "%.2f"), detected,
                _cell(ratio, "%.4f"), _cell(ratio_graph, "%.4f"), _cell(none, "%.2f"), _cell(seed, "%.2f"),
                _cell(det_none, "%.4f"), _cell(seed_none, "%.4f")))
        if ratios_large:
            print("bench / nccl-tests, lowest from %s up: %.4f (goal >= %.2f)" % (
                cb.format_size(FROM_SIZE), min(ratios_large), GOAL_LARGE))
        if ratios:
            print("bench / nccl-tests, lowest at any size: %.4f (goal >= %.2f)" % (min(ratios), GOAL_ANY))
            failed |= min(ratios) < GOAL_ANY or bool(ratios_large) and min(ratios_large) < GOAL_LARGE
        if ratios_graph:
            print("bench / nccl-tests -G 20, lowest at any size: %.4f" % min(ratios_graph))
        if none_large:
            print("detected / none, lowest from %s up: %.4f (goal >= %.2f)" % (
                cb.format_size(FROM_SIZE), min(none_large), GOAL_LARGE))
            failed |= min(none_large) < GOAL_LARGE
        if seed_any:
            print("fixed / none, lowest at any size: %.4f" % min(seed_any))
        print("rounds of one environment differ by up to %.1f%% below %s, %.1f%% from %s up" % (
            100 * widest_spread(rounds_of.values(), True), cb.format_size(FROM_SIZE),
            100 * widest_spread(rounds_of.values(), False), cb.format_size(FROM_SIZE)))
        differences = setup_differences(out, dtype)
        for env, (added, missing) in sorted((differences or {}).items()):
            print("NCCL set-up, %s against none (round 1): %s" % (
                env, "; ".join(["+ " + line for line in added] + ["- " + line for line in missing]) or "the same"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
