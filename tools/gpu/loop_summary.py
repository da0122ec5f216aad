"""Summary of ``measure.sh torch-loop OUTDIR ALL_REDUCE_PERF [ROUNDS]``: per
size, the median over rounds of each way of timing an all_reduce (bf16,
busbw in GB/s) and its ratio to nccl-tests as is:

- nccl-tests, eager and with its CUDA-graph mode (-G 20);
- the collection's benchmark as verify-rdma runs it (``--launch auto``)
  and with every size timed eagerly;
- the plain torch loop of tools/gpu/torch_loop.py, each of its ways, as
  rank 0 saw it and as the slowest rank did; and the same loop under the
  benchmark's conditions (process group bound to its GPU, NCCL's INFO log).

    python3 tools/gpu/loop_summary.py OUTDIR ROUNDS
"""

import json
import sys

from bench_summary import bench_rows, nccl_tests_rows
from module_utils.fabric import collective_bench as cb
from module_utils.common.stats import median

LOOP_WAYS = ("fresh", "view", "aligned", "graph1", "graph20", "held", "heldgraph")


def read_loop(path, prefix, series):
    with open(path) as handle:
        for line in handle:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            for seen in ("rank0", "slowest"):
                name = "%s %s %s" % (prefix, row["buffer"], seen)
                series.setdefault(name, {}).setdefault(row["size"], []).append(row["%s_busbw_gbps" % seen])


def collect(out, rounds):
    series = {}

    def add(kind, rows):
        for size, value in rows.items():
            series.setdefault(kind, {}).setdefault(size, []).append(value)
    for r in rounds:
        add("nccl-tests", nccl_tests_rows("%s/nccltests-%d.txt" % (out, r)))
        add("nccl-tests -G 20", nccl_tests_rows("%s/nccltests_graph-%d.txt" % (out, r)))
        add("bench auto", bench_rows("%s/bench-%d.json" % (out, r)))
        add("bench eager", bench_rows("%s/bench_eager-%d.json" % (out, r)))
        read_loop("%s/loop-%d.jsonl" % (out, r), "loop", series)
        read_loop("%s/loop_asbench-%d.jsonl" % (out, r), "loop as bench", series)
    return series


def main(out, rounds):
    series = collect(out, range(1, rounds + 1))
    reference = series["nccl-tests"]
    kinds = ["nccl-tests", "nccl-tests -G 20", "bench auto", "bench eager"] + [
        "%s %s %s" % (prefix, way, seen) for prefix in ("loop", "loop as bench") for way in LOOP_WAYS
        for seen in ("rank0", "slowest")]
    sizes = sorted(reference)
    print("median busbw GB/s of %d rounds, all_reduce bf16; (ratio to nccl-tests)" % rounds)
    print("%-28s" % "size" + "".join("%16s" % cb.format_size(size) for size in sizes))
    for kind in kinds:
        cells = []
        for size in sizes:
            values = series.get(kind, {}).get(size)
            if not values:
                cells.append("%16s" % "-")
                continue
            value = median(values)
            cells.append("%16s" % ("%.1f (%.3f)" % (value, value / median(reference[size]))))
        print("%-28s" % kind + "".join(cells))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
