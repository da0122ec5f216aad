"""Summary of ``measure.sh bench-compare OUTDIR``: per size and type, the
median over rounds of each contender's all_reduce busbw, and the ratios the
GPU validation judges (docs/PERFORMANCE.md):

- the collection's benchmark (the detected environment, as in a pod)
  against NVIDIA nccl-tests' in-place busbw (torch's all_reduce writes over
  its input: nccl-tests' in-place run); goal >= 0.99 from 64 MiB up;
- the detected environment and the seeds' fixed one against NCCL's
  defaults; goal: the detected one never more than 1% below.

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


def bench_rows(path):
    with open(path) as handle:
        result = json.loads(handle.read().strip().splitlines()[-1])
    if result.get("exit_code") != 0 or not result.get("document"):
        raise SystemExit("%s: the benchmark failed: %s" % (path, result.get("error")))
    return dict((row["size"], row["busbw_gbps"]) for row in result["document"]["ops"]["all_reduce"]["rows"])


def nccl_tests_rows(path):
    with open(path) as handle:
        blocks = cb.parse_table(handle.read())
    rows = [row for block in blocks if block["op"] == "all_reduce" for row in block["rows"]]
    if not rows:
        raise SystemExit("%s holds no all_reduce_perf table" % path)
    return dict((row["size"], row["in_place"]["busbw_gbps"]) for row in rows)


def medians(paths, read):
    series = []
    for path in paths:
        try:
            series.append(read(path))
        except SystemExit as exc:
            # A run cut short (the call's time limit) leaves a file without
            # its table: that round is left out, and said so.
            print("left out: %s" % exc)
    sizes = sorted(set.intersection(*(set(rows) for rows in series))) if series else []
    return dict((size, median([rows[size] for rows in series])) for size in sizes)


def main(out):
    names = glob.glob(os.path.join(out, "bench-*.json"))
    rounds = sorted(set(int(m.group(1)) for m in (re.search(r"-(\d+)\.json$", p) for p in names) if m))
    print("rounds: %d (medians over them)" % len(rounds))
    failed = False
    for dtype in ("bfloat16", "float32"):
        got = dict((env, medians(sorted(glob.glob(os.path.join(out, "bench-%s-%s-*.json" % (env, dtype)))),
                                 bench_rows)) for env in ENVIRONMENTS)
        ref = medians(sorted(glob.glob(os.path.join(out, "nccltests-%s-*.txt" % dtype))), nccl_tests_rows)
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
