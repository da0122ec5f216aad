"""The collective benchmark's logic that needs no torch: sizes, nccl-tests'
formulas and table, thresholds, the result document, pairwise analysis.

Real input: /work/shared/reference/h200x2-nccltests-allreduce-bf16.txt (read
where present; its rows are also copied below) is the output of NVIDIA
nccl-tests 2.19.6 all_reduce_perf on two H200 GPUs. Every other figure is
computed by hand in the comments next to it.
"""

import itertools
import json
import os
import random

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import collective_bench as cb
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_options
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_pairs
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_table

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
REFERENCE = os.path.join(REPO, "..", "shared", "reference", "h200x2-nccltests-allreduce-bf16.txt")

# Rows of the real nccl-tests run (2 ranks, bf16): size, count, out-of-place
# time (us), algbw, busbw, in-place time, algbw, busbw.
REAL_ROWS = [
    (1048576, 524288, 15.59, 67.27, 67.27, 15.67, 66.92, 66.92),
    (16777216, 8388608, 77.96, 215.20, 215.20, 75.87, 221.14, 221.14),
    (1073741824, 536870912, 3249.00, 330.48, 330.48, 3236.37, 331.77, 331.77),
    (8589934592, 4294967296, 24352.2, 352.74, 352.74, 24257.0, 354.12, 354.12),
]
REAL_LINES = [
    "     1048576        524288  bfloat16     sum      -1    15.59   67.27   67.27       0    15.67   66.92   66.92       0",
    "  8589934592    4294967296  bfloat16     sum      -1  24352.2  352.74  352.74       0  24257.0  354.12  354.12       0",
]


# --- sizes --------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("1048576", 1048576), ("512K", 524288), ("1M", 1048576), ("8G", 8589934592), ("1T", 1024 ** 4),
    ("1m", 1048576), ("256MB", 268435456), ("1GiB", 1073741824), (" 4k ", 4096), ("1.5M", 1572864), (64, 64),
])
def test_parse_size(text, expected):
    assert cb.parse_size(text) == expected


@pytest.mark.parametrize("text, words", [
    ("", "is not a size"), ("abc", "is not a size"), ("-1M", "is not a size"), ("1X", "is not a size"),
    ("1.3", "not a whole number of bytes"), ("0", "0 bytes"), ("0K", "0 bytes"), (None, "is not a size"),
])
def test_parse_size_errors_name_the_option(text, words):
    with pytest.raises(ValueError) as error:
        cb.parse_size(text, "-b")
    assert str(error.value).startswith("-b ")
    assert words in str(error.value)


def test_format_size_is_the_inverse_of_parse_size():
    for size in (1, 1536, 1024, 1048576, 3 * 1024 ** 3, 8589934592):
        assert cb.parse_size(cb.format_size(size)) == size
    assert cb.format_size(1073741824) == "1G"
    assert cb.format_size(1536) == "1536"


def test_size_range_as_nccl_tests():
    assert cb.size_range(1048576, 8589934592, 2)[0] == 1048576
    assert cb.size_range(1048576, 8589934592, 2)[-1] == 8589934592
    assert len(cb.size_range(1048576, 8589934592, 2)) == 14  # the 14 rows of the real run
    assert cb.size_range(1024, 65536, 4) == [1024, 4096, 16384, 65536]
    assert cb.size_range(1000, 5000, 2) == [1000, 2000, 4000]  # stops below -e, like nccl-tests
    assert cb.size_range(4096, 4096, 1) == [4096]


@pytest.mark.parametrize("begin, end, factor, words", [
    (2048, 1024, 2, "larger than -e"), (1024, 4096, 1, "give -f 2 or more"), (1024, 4096, 2.0, "whole number"),
])
def test_size_range_errors(begin, end, factor, words):
    with pytest.raises(ValueError, match=words):
        cb.size_range(begin, end, factor)


# --- nccl-tests sizes and formulas ----------------------------------------------

def test_layout_matches_the_real_all_reduce_rows():
    for size, count, *_rest in REAL_ROWS:
        shape = cb.layout("all_reduce", size, 2, "bfloat16")
        assert (shape["size"], shape["count"]) == (size, count)


def test_layout_of_the_other_ops_as_nccl_tests_prints_them():
    # 1 MiB of float32 on 8 ranks: 262144 elements, 32768 per rank. nccl-tests
    # prints the larger buffer's bytes and the per-rank count it passes to NCCL.
    for op in ("all_gather", "reduce_scatter", "alltoall"):
        shape = cb.layout(op, 1048576, 8, "float32")
        assert (shape["size"], shape["count"], shape["elements"], shape["chunk"]) == (1048576, 32768, 262144, 32768)
    # 1000 bytes of bf16 on 3 ranks: 500 elements, 166 per rank, aligned down
    # to 16 bytes (8 elements): 160 per rank, 480 in all, 960 bytes.
    shape = cb.layout("all_gather", 1000, 3, "bfloat16")
    assert (shape["size"], shape["count"], shape["elements"]) == (960, 160, 480)
    assert shape["requested_size"] == 1000
    # all_reduce: whole elements only (1001 bytes of float32 = 250 elements).
    assert cb.layout("all_reduce", 1001, 3, "float32")["size"] == 1000
    assert cb.layout("all_reduce", 1, 2, "float32") is None
    assert cb.layout("alltoall", 64, 8, "float32") is None  # 2 elements per rank < 4 (16 bytes)
    assert cb.smallest_size("alltoall", 8, "float32") == 128
    assert cb.layout("alltoall", 128, 8, "float32")["size"] == 128


def test_bus_factors():
    assert cb.bus_factor("all_reduce", 2) == 1.0
    assert cb.bus_factor("all_reduce", 8) == 1.75   # 2 * 7 / 8
    assert cb.bus_factor("all_reduce", 16) == 1.875  # 2 * 15 / 16
    for op in ("all_gather", "reduce_scatter", "alltoall"):
        assert cb.bus_factor(op, 8) == 0.875  # 7 / 8
        assert cb.bus_factor(op, 2) == 0.5
    assert cb.bus_factor("all_reduce", 1) == 0.0
    with pytest.raises(ValueError):
        cb.bus_factor("broadcast", 2)


@pytest.mark.parametrize("row", REAL_ROWS)
def test_bandwidth_reproduces_the_real_nccl_tests_figures(row):
    size = row[0]
    for time_us, algbw_printed, busbw_printed in (row[2:5], row[5:8]):
        algbw, busbw = cb.bandwidth("all_reduce", size, time_us / 1.0e6, 2)
        # nccl-tests computed from the unrounded time; the printed time is
        # rounded to its last digit, which moves the bandwidth by at most
        # algbw * half a digit / time (67.27 GB/s at 15.59 us: 0.0022), plus
        # the 0.005 of the printed bandwidth itself.
        digit = 0.1 if time_us >= 10000 else 0.01
        slack = algbw_printed * (digit / 2) / time_us + 0.005
        assert abs(algbw - algbw_printed) <= slack
        assert abs(busbw - busbw_printed) <= slack


def test_bandwidth_by_hand():
    # 1 GiB in 10 ms: 107.374 GB/s (decimal GB, as nccl-tests).
    algbw, busbw = cb.bandwidth("all_reduce", 1073741824, 0.010, 8)
    assert algbw == pytest.approx(107.3741824)
    assert busbw == pytest.approx(107.3741824 * 1.75)
    # all_gather of 8 x 128 MiB (the gathered 1 GiB) in 5 ms on 8 ranks.
    algbw, busbw = cb.bandwidth("all_gather", 1073741824, 0.005, 8)
    assert algbw == pytest.approx(214.7483648)
    assert busbw == pytest.approx(214.7483648 * 7 / 8)
    with pytest.raises(ValueError):
        cb.bandwidth("all_reduce", 1024, 0.0, 2)


# --- check values ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", cb.DTYPES)
@pytest.mark.parametrize("nranks", [1, 2, 3, 8, 63, 64, 65, 300, 1024])
def test_reduction_values_sum_exactly(dtype, nranks):
    mode = cb.reduce_mode(nranks, dtype)
    limit = cb.EXACT_INTEGER_LIMIT[dtype]
    rows = [cb.reduce_input_row(rank, nranks, mode) for rank in range(nranks)]
    expected = cb.reduce_expected_row(nranks, mode)
    assert [sum(column) for column in zip(*rows)] == expected
    # Every partial sum is at most the total, so it is exact if the total is.
    assert max(expected) <= limit
    assert all(value == int(value) for row in rows for value in row)
    # Every rank contributes: a lost rank changes the result somewhere.
    for rank in range(nranks):
        assert any(rows[rank])


def test_reduction_mode_by_type():
    assert cb.reduce_mode(64, "bfloat16") == "dense"   # 4 * 64 = 256
    assert cb.reduce_mode(65, "bfloat16") == "sparse"
    assert cb.reduce_mode(512, "float16") == "dense"   # 4 * 512 = 2048
    assert cb.reduce_mode(1024, "float32") == "dense"


def test_labels_tell_chunks_apart():
    row = cb.label_row()
    assert len(row) == cb.LABEL_PERIOD and max(row) <= cb.EXACT_INTEGER_LIMIT["bfloat16"]

    def chunk(label):
        return [row[(label + index) % len(row)] for index in range(16)]
    labels = [cb.alltoall_label(source, destination, 8) for source in range(8) for destination in range(8)]
    assert len(set(labels)) == 64
    for first, second in itertools.combinations(range(64), 2):
        assert all(a != b for a, b in zip(chunk(first), chunk(second)))


# --- thresholds -------------------------------------------------------------------

def test_parse_thresholds():
    assert cb.parse_thresholds(["1G=194"]) == [(1073741824, 194.0)]
    assert cb.parse_thresholds(["8G=200", "1M=10.5", " 1G = 194 "]) == [
        (1048576, 10.5), (1073741824, 194.0), (8589934592, 200.0)]
    assert cb.parse_thresholds([]) == []
    assert cb.parse_thresholds(None) == []


@pytest.mark.parametrize("value, words", [
    ("x=y", "SIZE"), ("1G", "expected SIZE=GBPS"), ("1G=2=3", "expected SIZE=GBPS"), ("1G=abc", "is not a number"),
    ("1G=-5", "above 0"), ("1G=0", "above 0"), ("1G=nan", "above 0"), ("1G=inf", "above 0"), ("=194", "SIZE"),
    ("-1G=194", "SIZE"),
])
def test_bad_thresholds_name_the_option_and_the_fix(value, words):
    with pytest.raises(ValueError) as error:
        cb.parse_thresholds([value])
    message = str(error.value)
    assert "--min-busbw" in message and words in message
    assert "1G=194" in message  # an example of the right form


def test_the_strictest_applicable_threshold_wins():
    thresholds = cb.parse_thresholds(["1M=10", "1G=194", "256M=150"])
    assert cb.threshold_for(1048575, thresholds) is None
    assert cb.threshold_for(1048576, thresholds) == 10
    assert cb.threshold_for(268435456, thresholds) == 150
    assert cb.threshold_for(8589934592, thresholds) == 194
    # A stricter threshold at a smaller size still applies to larger sizes.
    assert cb.threshold_for(8589934592, cb.parse_thresholds(["1M=300", "1G=194"])) == 300


def test_gates_per_size():
    thresholds = cb.parse_thresholds(["1G=194"])
    assert cb.gate(1048576, 50.0, thresholds) is None
    assert cb.gate(1073741824, 200.0, thresholds) == {"min_busbw_gbps": 194.0, "passed": True, "status": "pass"}
    assert cb.gate(1073741824, 194.0, thresholds)["passed"] is True
    assert cb.gate(8589934592, 150.0, thresholds) == {"min_busbw_gbps": 194.0, "passed": False, "status": "fail"}
    # Not measured is never a pass.
    assert cb.gate(8589934592, None, thresholds) == {"min_busbw_gbps": 194.0, "passed": False,
                                                     "status": "not-measured"}


def test_a_threshold_beyond_the_sweep_is_refused():
    thresholds = cb.parse_thresholds(["8G=194"])
    with pytest.raises(ValueError, match="raise -e"):
        cb.check_thresholds_apply(thresholds, cb.size_range(1048576, 1073741824, 2))
    cb.check_thresholds_apply(thresholds, [8589934592])


# --- the document -------------------------------------------------------------------

def _document(rows_by_op, dtype="bfloat16", world_size=2):
    document = {
        "tool": cb.TOOL, "version": cb.VERSION, "schema": cb.SCHEMA_VERSION, "mode": "sweep", "backend": "nccl",
        "device": "cuda", "torch_version": "2.11.0", "nccl_version": "2.28.9", "world_size": world_size,
        "dtype": dtype, "nodes": [{"name": "a", "ranks": [0]}, {"name": "b", "ranks": [1]}],
        "settings": {"min_bytes": 1048576, "max_bytes": 8589934592, "factor": 2, "warmup_iters": 5, "iters": 20},
        "thresholds": [], "ops": dict((op, cb.op_block(op, rows)) for op, rows in rows_by_op.items()),
        "pairs": None,
    }
    return cb.finish_document(document)


def _real_rows(thresholds=()):
    rows = []
    for size, _count, _oop_time, _oop_algbw, _oop_busbw, time_us, _algbw, _busbw in REAL_ROWS:
        rows.append(cb.measured_row("all_reduce", cb.layout("all_reduce", size, 2, "bfloat16"), 2, time_us / 1.0e6, 0,
                                    thresholds))
    return rows


def test_document_passes_and_round_trips(tmp_path):
    document = _document({"all_reduce": _real_rows(cb.parse_thresholds(["1G=194"]))})
    assert document["verdict"] == "pass" and document["passed"] and document["reasons"] == []
    rows = document["ops"]["all_reduce"]["rows"]
    assert [row["gate"] is not None for row in rows] == [False, False, True, True]
    assert document["ops"]["all_reduce"]["placement"] == "in-place"
    path = tmp_path / "bench.json"
    path.write_text(cb.render_document(document))
    again = cb.read_document(str(path))
    assert again == json.loads(json.dumps(document))
    # The shape mlinfra throughput-report reads.
    assert again["collective"] == "all_reduce" and again["nranks"] == 2 and again["type"] == "bfloat16"
    assert [entry["size"] for entry in again["results"]] == [row[0] for row in REAL_ROWS]
    assert all(entry["in_place"] for entry in again["results"])


def test_document_fails_on_wrong_elements_gates_and_unmeasured_sizes():
    thresholds = cb.parse_thresholds(["1G=340"])
    rows = _real_rows(thresholds)
    rows[0] = dict(rows[0], wrong=3)
    unmeasured = cb.unmeasured_row(cb.layout("all_reduce", 2 * 8589934592, 2, "bfloat16"), "out of memory", thresholds)
    document = _document({"all_reduce": rows + [unmeasured]})
    assert document["verdict"] == "fail" and not document["passed"]
    assert document["wrong"] == 3
    reasons = "\n".join(document["reasons"])
    assert "all_reduce 1M: 3 wrong elements" in reasons
    assert "all_reduce 1G: busbw 331.77 GB/s is below the gate of 340 GB/s" in reasons
    assert "all_reduce 16G: not measured (out of memory)" in reasons
    assert "all_reduce 16G: the gate of 340 GB/s cannot pass" in reasons
    assert "8G" not in reasons  # 354.12 GB/s passes
    assert unmeasured["time_us"] is None and unmeasured["busbw_gbps"] is None
    assert unmeasured["gate"]["status"] == "not-measured" and unmeasured["gate"]["passed"] is False


@pytest.mark.parametrize("text, words", [
    ("not json", "is not JSON"), ("[]", "is not a mlinfra-nccl-bench result"), ('{"tool": "x"}', "is not a"),
    ('{"tool": "mlinfra-nccl-bench", "schema": 99}', "schema 99"),
    ('{"tool": "mlinfra-nccl-bench", "schema": 1}', "has no 'backend'"),
])
def test_bad_documents(text, words):
    with pytest.raises(ValueError, match=words):
        cb.parse_document(text)


def test_a_row_without_its_keys_is_refused():
    document = _document({"all_reduce": _real_rows()})
    del document["ops"]["all_reduce"]["rows"][1]["busbw_gbps"]
    with pytest.raises(ValueError, match=r"ops.all_reduce.rows\[1\] lacks busbw_gbps"):
        cb.parse_document(json.dumps(document))


# --- the table ------------------------------------------------------------------------

def test_rows_are_laid_out_like_nccl_tests():
    # The real lines, rebuilt from their own figures.
    for line in REAL_LINES:
        fields = line.split()
        text = "%12d  %12d  %8s  %6s  %6d" % (int(fields[0]), int(fields[1]), "bfloat16", "sum", -1)
        for first in (5, 9):
            text += bench_table.format_group({"status": "measured", "time_us": float(fields[first]),
                                              "algbw_gbps": float(fields[first + 1]),
                                              "busbw_gbps": float(fields[first + 2]),
                                              "wrong": int(fields[first + 3])})
        assert text == line
    # torch's all_reduce is in-place: the out-of-place group reads N/A.
    row = cb.measured_row("all_reduce", cb.layout("all_reduce", 1048576, 2, "bfloat16"), 2, 15.67e-6, 0)
    assert bench_table.format_row("all_reduce", "bfloat16", row) == (
        "     1048576        524288  bfloat16     sum      -1      N/A     N/A     N/A     N/A    15.67   66.92   66.92"
        "       0")
    assert len(bench_table.format_row("all_reduce", "bfloat16", row)) == len(REAL_LINES[0])


def test_format_number_as_nccl_tests():
    assert bench_table.format_number(15.59, 7) == "  15.59"
    assert bench_table.format_number(12292.3, 7) == "12292.3"
    assert bench_table.format_number(123456.7, 7) == " 123457"
    assert bench_table.format_number(12345678.0, 7) == "1.2e+07"
    assert bench_table.format_number(352.74, 6) == "352.74"
    assert bench_table.format_number(1352.74, 6) == "1352.7"


def test_table_round_trip():
    thresholds = cb.parse_thresholds(["1G=194"])
    rows = _real_rows(thresholds)
    rows.append(cb.unmeasured_row(cb.layout("all_reduce", 16 * 1024 ** 3, 2, "bfloat16"), "out of memory"))
    gather = [cb.measured_row("all_gather", cb.layout("all_gather", size, 2, "bfloat16"), 2, seconds, wrong)
              for size, seconds, wrong in ((1048576, 2.5e-5, 0), (8589934592, 0.031, 7))]
    document = _document({"all_reduce": rows, "all_gather": gather})
    devices = [{"rank": 0, "pid": 10, "host": "gpu-a", "device": 0, "bus_id": "0000:06:00", "name": "NVIDIA H200"}]
    text = bench_table.format_table(document, devices)
    assert text.count(bench_table.TABLE_HEADER[1]) == 2
    assert "#  Rank  0 Group  0 Pid     10 on      gpu-a device  0 [0000:06:00] NVIDIA H200" in text
    tests = bench_table.parse_table(text)
    assert [test["op"] for test in tests] == ["all_reduce", "all_gather"]
    for test, op in zip(tests, ("all_reduce", "all_gather")):
        block = document["ops"][op]
        assert len(test["rows"]) == len(block["rows"])
        for parsed, row in zip(test["rows"], block["rows"]):
            assert (parsed["size"], parsed["count"], parsed["root"]) == (row["size"], row["count"], -1)
            assert parsed["type"] == "bfloat16" and parsed["redop"] == block["redop"]
            measured = parsed["in_place"] if op == "all_reduce" else parsed["out_of_place"]
            other = parsed["out_of_place"] if op == "all_reduce" else parsed["in_place"]
            assert other is None  # never a figure that was not measured
            if row["status"] != "measured":
                assert measured is None
                continue
            assert measured["time_us"] == pytest.approx(row["time_us"], rel=1e-4, abs=0.005)
            assert measured["algbw_gbps"] == pytest.approx(row["algbw_gbps"], abs=0.005)
            assert measured["busbw_gbps"] == pytest.approx(row["busbw_gbps"], abs=0.005)
            assert measured["wrong"] == row["wrong"]
        assert test["avg_busbw"] == pytest.approx(block["avg_busbw_gbps"], rel=1e-5)
    assert tests[0]["out_of_bounds"] == 0 and tests[1]["out_of_bounds"] == 7
    # The JSON keeps the ops in the order they ran.
    assert list(cb.parse_document(cb.render_document(document))["ops"]) == ["all_reduce", "all_gather"]


def test_parse_table_reads_real_nccl_tests_output():
    if os.path.isfile(REFERENCE):
        with open(REFERENCE, encoding="utf-8") as handle:
            text = handle.read()
    else:
        text = "\n".join(["# Collective test starting: all_reduce_perf"] + list(bench_table.TABLE_HEADER) + REAL_LINES +
                         ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 246.954 "])
    tests = bench_table.parse_table(text)
    assert len(tests) == 1 and tests[0]["op"] == "all_reduce" and tests[0]["out_of_bounds"] == 0
    last = tests[0]["rows"][-1]
    assert (last["size"], last["count"], last["type"], last["redop"], last["root"]) == (
        8589934592, 4294967296, "bfloat16", "sum", -1)
    assert last["out_of_place"] == {"time_us": 24352.2, "algbw_gbps": 352.74, "busbw_gbps": 352.74, "wrong": 0}
    assert last["in_place"] == {"time_us": 24257.0, "algbw_gbps": 354.12, "busbw_gbps": 354.12, "wrong": 0}
    if os.path.isfile(REFERENCE):
        assert len(tests[0]["rows"]) == 14 and tests[0]["avg_busbw"] == 246.954


def test_parse_table_reads_the_older_layout_and_unchecked_runs():
    text = "\n".join([
        "#       size         count      type     time   algbw   busbw  error     time   algbw   busbw  error",
        "     1048576        262144     float    15.18   69.06   69.06  0e+00    14.44   72.61   72.61  0e+00",
        "     2097152        524288     float     sum      -1    29.13   71.99   71.99    N/A    29.07   72.13   72.13"
        "    N/A",
    ])
    rows = bench_table.parse_table(text)[0]["rows"]
    assert rows[0]["redop"] is None and rows[0]["in_place"]["busbw_gbps"] == 72.61
    assert rows[1]["out_of_place"]["wrong"] is None and rows[1]["out_of_place"]["time_us"] == 29.13


# --- nodes and pairs --------------------------------------------------------------

def test_group_and_name_nodes():
    nodes = bench_pairs.group_nodes([0, 0, 1, 1, 2, 2])
    assert nodes == [[0, 1], [2, 3], [4, 5]]
    infos = [{"hostname": "gpu-%d" % (rank // 2), "node_name": None} for rank in range(6)]
    assert bench_pairs.name_nodes(nodes, infos) == ["gpu-0", "gpu-1", "gpu-2"]
    # The local test cluster: every "node" on one host.
    same = [{"hostname": "vm", "node_name": None} for _rank in range(6)]
    assert bench_pairs.name_nodes(nodes, same) == ["node0", "node1", "node2"]
    named = [{"hostname": "vm", "node_name": "worker-%d" % (rank // 2)} for rank in range(6)]
    assert bench_pairs.name_nodes(nodes, named) == ["worker-0", "worker-1", "worker-2"]


@pytest.mark.parametrize("count", range(1, 12))
def test_round_robin_covers_every_pair_once_with_disjoint_rounds(count):
    rounds = bench_pairs.round_robin(count)
    seen = [pair for pairs in rounds for pair in pairs]
    assert sorted(seen) == list(itertools.combinations(range(count), 2))
    for pairs in rounds:
        nodes = [node for pair in pairs for node in pair]
        assert len(nodes) == len(set(nodes))
    if count > 1:
        # Even: n-1 rounds of n/2 pairs; odd: n rounds, one node sitting out.
        assert len(rounds) == (count - 1 if count % 2 == 0 else count)
        assert all(len(pairs) == count // 2 for pairs in rounds)


def _pairs(busbw_of, names):
    return [{"nodes": [first, second], "busbw_gbps": busbw_of(first, second), "status": "measured"}
            for first, second in itertools.combinations(names, 2)]


@pytest.mark.parametrize("count", [4, 5, 8])
def test_a_slow_node_shared_by_all_its_pairs_is_named(count):
    names = ["gpu-%d" % index for index in range(count)]
    noise = random.Random(count)

    def busbw(first, second):
        speed = 45.0 * (1 + noise.uniform(-0.04, 0.04))
        return speed * (0.55 if "gpu-2" in (first, second) else 1.0)
    pairs = _pairs(busbw, names)
    analysis = bench_pairs.analyze_pairs(pairs)
    assert analysis["suspect_nodes"] == ["gpu-2"]
    assert sorted(tuple(pair["nodes"]) for pair in analysis["slow_pairs"]) == sorted(
        tuple(pair["nodes"]) for pair in pairs if "gpu-2" in pair["nodes"])
    assert "gpu-2" in analysis["slowest_pair"]["nodes"]


def test_normal_noise_names_nobody():
    noise = random.Random(7)
    names = ["gpu-%d" % index for index in range(8)]
    analysis = bench_pairs.analyze_pairs(_pairs(lambda first, second: 45.0 * (1 + noise.uniform(-0.1, 0.1)), names))
    assert analysis["slow_pairs"] == [] and analysis["suspect_nodes"] == [] and analysis["note"] is None
    assert analysis["slowest_pair"] is not None  # still named, for the record


def test_a_slow_link_between_two_good_nodes_names_no_node():
    names = ["a", "b", "c", "d"]
    analysis = bench_pairs.analyze_pairs(_pairs(lambda first, second: 20.0 if (first, second) == ("a", "b") else 45.0, names))
    assert [pair["nodes"] for pair in analysis["slow_pairs"]] == [["a", "b"]]
    assert analysis["suspect_nodes"] == [] and "links" in analysis["note"]


def test_two_slow_nodes_are_both_named():
    # 8 nodes, b and e slow: 13 of the 28 pairs are slow, the median is fast.
    names = ["a", "b", "c", "d", "e", "f", "g", "h"]
    analysis = bench_pairs.analyze_pairs(_pairs(lambda first, second: 20.0 if {first, second} & {"b", "e"} else 45.0, names))
    assert analysis["suspect_nodes"] == ["b", "e"]


def test_when_most_pairs_are_slow_only_the_threshold_finds_them():
    # 3 nodes, c slow: 2 of the 3 pairs are slow, so the median of all pairs
    # is itself slow and nothing is below 80% of it; a threshold finds c.
    names = ["a", "b", "c"]
    analysis = bench_pairs.analyze_pairs(_pairs(lambda first, second: 20.0 if "c" in (first, second) else 45.0, names))
    assert analysis["slow_pairs"] == [] and analysis["median_busbw_gbps"] == 20.0
    analysis = bench_pairs.analyze_pairs(_pairs(lambda first, second: 20.0 if "c" in (first, second) else 45.0, names),
                                         min_busbw=40.0)
    assert analysis["suspect_nodes"] == ["c"]


def test_the_threshold_makes_pairs_slow_and_everything_slow_names_nobody():
    names = ["a", "b", "c", "d"]
    analysis = bench_pairs.analyze_pairs(_pairs(lambda first, second: 45.0, names), min_busbw=50.0)
    assert len(analysis["slow_pairs"]) == 6 and analysis["suspect_nodes"] == []
    assert "every pair is slow" in analysis["note"]
    pairs = _pairs(lambda first, second: 45.0, ["a", "b"])
    analysis = bench_pairs.analyze_pairs(pairs, min_busbw=50.0)
    assert analysis["suspect_nodes"] == [] and "two nodes" in analysis["note"]
    assert pairs[0]["slow"] and "below the gate of 50 GB/s" in pairs[0]["reasons"][0]


def test_unmeasured_pairs_are_slow_and_fail_the_document():
    pairs = _pairs(lambda first, second: 45.0, ["a", "b", "c"])
    pairs[1].update({"status": "not-measured", "busbw_gbps": None, "note": "out of memory"})
    analysis = bench_pairs.analyze_pairs(pairs)
    assert [pair["nodes"] for pair in analysis["slow_pairs"]] == [["a", "c"]]
    with pytest.raises(ValueError, match="between 0 and 1"):
        bench_pairs.analyze_pairs(pairs, fraction=1.5)


# --- options ------------------------------------------------------------------------------

ENV = {"WORLD_SIZE": "4", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}


def _options(argv, env=None, cuda=False):
    options = bench_options.resolve_options(bench_options.build_parser().parse_args(argv), ENV if env is None else env)
    return bench_options.resolve_device(options, cuda)


def test_options_defaults():
    options = _options([])
    assert options["ops"] == ["all_reduce"] and options["backend"] == "gloo" and options["dtype"] == "float32"
    assert options["sizes"][0] == 1048576 and options["sizes"][-1] == 1073741824
    assert (options["warmup_iters"], options["iters"]) == (5, 20)
    gpu = _options([], cuda=True)
    assert gpu["backend"] == "nccl" and gpu["dtype"] == "bfloat16" and gpu["device"] == "cuda"
    pairwise = _options(["--pairwise"], cuda=True)
    assert pairwise["pairwise_size"] == 256 * 1024 ** 2 and pairwise["sizes"] == []


def test_launch_is_chosen_per_size_on_gpus_only_and_is_recorded():
    gpu = _options([], cuda=True)
    assert gpu["launch"] == "auto"
    settings = dict(bench_options.settings_of(dict(gpu, min_bytes=1, max_bytes=2, factor=2)))
    assert settings["launch"] == "auto"
    # nccl-tests' "graph:" is one setting for the whole run: 1 only when
    # every size is a graph.
    assert "graph: 0" in bench_table.table_preamble("all_reduce", settings)[1]
    assert _options(["--launch", "eager"], cuda=True)["launch"] == "eager"
    graph = _options(["--launch", "graph"], cuda=True)
    assert "graph: 1" in bench_table.table_preamble("all_reduce", bench_options.settings_of(graph))[1]
    # gloo has no CUDA graphs: the CPU sweep is eager whatever was asked.
    cpu = _options(["--launch", "graph"])
    assert cpu["launch"] == "eager"
    assert "graph: 0" in bench_table.table_preamble("all_reduce", bench_options.settings_of(cpu))[1]


@pytest.mark.parametrize("issue_us, gpu_us, bound", [
    # Launch-bound loops: the GPU waited for each call (1 MiB over NVLink).
    (30.0, 31.0, True), (28.0, 30.0, True),
    # The GPU ran ahead of the CPU: the eager figure is the collective's.
    (26.0, 30.0, False), (25.0, 34.0, False), (25.0, 2500.0, False),
])
def test_launch_bound_is_the_cpu_issue_time_reaching_the_gpu_time(issue_us, gpu_us, bound):
    assert cb.launch_bound(issue_us / 1.0e6, gpu_us / 1.0e6) is bound


def test_the_hold_covers_twice_the_expected_issue_time_and_at_least_a_millisecond():
    # 20 calls at 20 us each: 400 us to queue, held for 800 us -> the floor.
    assert cb.hold_seconds(20.0e-6, 20) == cb.MIN_HOLD_SECONDS == 0.001
    # 100 calls at 25 us each: 2.5 ms to queue, held for 5 ms.
    assert cb.hold_seconds(25.0e-6, 100) == pytest.approx(0.005)


def test_rows_record_their_launch_and_the_table_names_the_graph_sizes():
    rows = [cb.measured_row("all_reduce", cb.layout("all_reduce", size, 2, "bfloat16"), 2, seconds, 0, (), launch)
            for size, seconds, launch in ((2 ** 20, 2.0e-5, "graph"), (2 ** 21, 3.0e-5, "graph"),
                                          (2 ** 22, 3.4e-5, "eager"))]
    assert [row["launch"] for row in rows] == ["graph", "graph", "eager"]
    footer = bench_table.table_footer("all_reduce", rows)
    assert footer[0] == "# Timed as a CUDA graph: 1M 2M"
    # A table read back is not disturbed by the comment.
    table_lines = list(bench_table.TABLE_HEADER) + [bench_table.format_row("all_reduce", "bfloat16", row) for row in rows] + footer
    parsed = bench_table.parse_table("\n".join(table_lines))
    assert len(parsed) == 1 and len(parsed[0]["rows"]) == 3 and parsed[0]["out_of_bounds"] == 0
    eager_only = bench_table.table_footer("all_reduce", rows[2:])
    assert not any("CUDA graph" in line for line in eager_only)
    assert cb.unmeasured_row(cb.layout("all_reduce", 2 ** 20, 2, "bfloat16"), "no memory")["launch"] is None


@pytest.mark.parametrize("argv, env, cuda, words", [
    (["--min-busbw", "x=y"], ENV, False, "--min-busbw"),
    (["--ops", "all_reduce,broadcast"], ENV, False, "unknown op broadcast"),
    (["--ops", "all_reduce,all_reduce"], ENV, False, "twice"),
    (["-b", "1G", "-e", "1M"], ENV, False, "larger than -e"),
    (["-n", "0"], ENV, False, "-n 0 is too small"),
    (["-w", "x"], ENV, False, "-w 'x' is not a whole number"),
    (["--dtype", "bfloat16"], ENV, False, "not supported with gloo"),
    (["--backend", "nccl"], ENV, False, "needs CUDA"),
    (["--min-busbw", "8G=194", "-e", "1G"], ENV, False, "raise -e"),
    (["--pairwise"], dict(ENV, LOCAL_WORLD_SIZE="4"), False, "at least 2 nodes"),
    (["--pairwise", "--ops", "all_gather"], ENV, False, "all_reduce only"),
    (["--ranks-per-node", "3"], ENV, False, "does not divide"),
    (["--slow-fraction", "2"], ENV, False, "between 0 and 1"),
    (["--ops", "alltoall", "-b", "8", "-e", "8"], ENV, False, "too small for alltoall"),
    ([], {}, False, "run this under torchrun"),
])
def test_usage_errors(argv, env, cuda, words):
    with pytest.raises(ValueError, match=words):
        _options(argv, env, cuda)
