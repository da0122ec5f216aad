"""bench_plot: the benchmark's result document drawn as a PNG chart, through
bench_plot's module_utils, the module in the test's process (call_module) and
through Ansible itself (run_module).

The documents are built with collective_bench as the benchmark builds them;
the PNG is read back by a decoder of the test's own (CRCs, filter 0)."""

import json
import os
import struct
import subprocess
import zlib

import pytest

from ansible_cli import BIN, REPO, ansible_env, run_module
from module_call import call_module
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import bench_plot as bp
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import collective_bench as cb
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_pairs
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import png_chart as pc
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import verdicts

SIZES = cb.size_range(cb.parse_size("1M"), cb.parse_size("8G"))  # 14 sizes


def decode_png(data):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB PNG whose scanlines use filter 0; checks every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, []
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        assert struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])[0] == \
            zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        offset += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert chunks[0][1][8:] == b"\x08\x02\x00\x00\x00"
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 3 * width
    assert len(raw) == stride * height and all(raw[y * stride] == 0 for y in range(height))
    return width, height, [[tuple(raw[y * stride + 1 + 3 * x:y * stride + 4 + 3 * x]) for x in range(width)]
                           for y in range(height)]


def busbw_curve(size):
    """A real-looking all_reduce curve: 350 GB/s for large sizes, half of it at 32M."""
    return 350.0 * size / (size + 2 ** 25)


def sweep(busbw=busbw_curve, thresholds=("1G=194",), ops=("all_reduce",), unmeasured=(), wrong=(), world=16):
    """A finished sweep document; ``busbw`` gives each size's figure, ``unmeasured`` and ``wrong`` name sizes."""
    limits = cb.parse_thresholds(list(thresholds))
    blocks = {}
    for op in ops:
        rows = []
        for size in SIZES:
            shape = cb.layout(op, size, world, "bfloat16")
            if size in unmeasured:
                rows.append(cb.unmeasured_row(shape, "out of memory", limits))
                continue
            seconds = shape["size"] / 1.0e9 / (busbw(size) / cb.bus_factor(op, world))
            rows.append(cb.measured_row(op, shape, world, seconds, 5 if size in wrong else 0, limits))
        blocks[op] = cb.op_block(op, rows)
    document = {
        "tool": cb.TOOL, "version": cb.VERSION, "schema": cb.SCHEMA_VERSION, "mode": "sweep", "backend": "nccl",
        "device": "cuda", "torch_version": "2.11.0", "nccl_version": "2.28.9", "world_size": world,
        "dtype": "bfloat16", "nodes": [{"name": "gpu-a", "ranks": list(range(8))},
                                       {"name": "gpu-b", "ranks": list(range(8, 16))}],
        "settings": {"min_bytes": SIZES[0], "max_bytes": SIZES[-1], "factor": 2, "warmup_iters": 5, "iters": 20},
        "thresholds": [{"size": size, "min_busbw_gbps": gbps} for size, gbps in limits], "ops": blocks,
        "pairs": None,
    }
    return cb.finish_document(document)


def write(tmp_path, document, name="bench.json"):
    path = tmp_path / name
    path.write_text(cb.render_document(document))
    return str(path)


def red_in_plot(result, rows):
    """Red pixels inside the plot area, outside the legend."""
    chart = result["chart"]
    left, top, right, bottom = chart.frame
    box = chart.legend[1] if chart.legend[0] == "inside" else (-1, -1, -1, -1)
    return [(x, y) for y in range(top, bottom + 1) for x in range(left, right + 1) if rows[y][x] == pc.RED
            and not (box[0] <= x <= box[2] and box[1] <= y <= box[3])]


# --- the chart of a document -----------------------------------------------------------

def test_a_passing_run_draws_its_line_and_no_red():
    document = sweep()
    assert document["verdict"] == "pass"
    result = bp.plot(document)
    assert result["ops"] == ["all_reduce"] and result["points"] == 14
    width, height, rows = decode_png(result["png"])
    assert (width, height) == (900, 540)
    chart = result["chart"]
    for size in (SIZES[0], 2 ** 30, SIZES[-1]):
        x, y = chart.pixel(size, busbw_curve(size))
        assert rows[y][x] == pc.PALETTE[0], size
    assert not any(pixel == pc.RED for row in rows for pixel in row)  # not even the verdict: PASS is green
    assert any(pixel == pc.GREEN for row in rows[:60] for pixel in row)
    # The gate: a dashed grey level at 194 GB/s from 1G.
    x, y = chart.pixel(2 ** 30, 194.0)
    assert any(rows[y][x + dx] == pc.GREY for dx in range(12))
    assert not any(rows[y][x - dx] == pc.GREY for dx in range(3, 40))


def test_a_size_below_its_gate_is_ringed_in_red_and_no_other():
    slow = 2 ** 31
    document = sweep(lambda size: 180.0 if size == slow else busbw_curve(size))
    assert document["reasons"] == ["all_reduce 2G: busbw 180.00 GB/s is below the gate of 194 GB/s"]
    result = bp.plot(document)
    rows = decode_png(result["png"])[2]
    x, y = result["chart"].pixel(slow, 180.0)
    assert rows[y][x] == pc.PALETTE[0] and rows[y][x + 7] == pc.RED and rows[y + 7][x] == pc.RED
    red = red_in_plot(result, rows)
    assert red and all(abs(px - x) <= 8 and abs(py - y) <= 8 for px, py in red)
    assert any(pixel == pc.RED for row in rows[:60] for pixel in row)  # verdict: FAIL


def test_wrong_elements_are_failures_too_and_unmeasured_rows_are_left_out():
    document = sweep(thresholds=(), unmeasured=(SIZES[-1],), wrong=(2 ** 24,))
    assert document["verdict"] == "fail"
    result = bp.plot(document)
    assert result["points"] == 13
    rows = decode_png(result["png"])[2]
    chart = result["chart"]
    assert chart.x_range == (19.5, 32.5)  # 1M to 4G and half a doubling: 8G, not measured, is not on the axis
    x, y = chart.pixel(2 ** 24, busbw_curve(2 ** 24))
    red = red_in_plot(result, rows)
    assert red and all(abs(px - x) <= 8 and abs(py - y) <= 8 for px, py in red)
    assert not any(series["kind"] == "step" for series in chart.series)  # no thresholds, no gate line


def test_every_op_gets_its_own_colour():
    ops = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
    document = sweep(busbw=lambda size: 100.0 * size / (size + 2 ** 24), ops=ops, thresholds=())
    result = bp.plot(document, title="cluster h200-a")
    assert result["ops"] == list(ops) and result["points"] == 56
    rows = decode_png(result["png"])[2]
    names = [series["name"] for series in result["chart"].series]
    assert names == ["all_reduce busbw (in-place)", "all_gather busbw (out-of-place)",
                     "reduce_scatter busbw (out-of-place)", "alltoall busbw (out-of-place)"]
    for index in range(4):
        assert any(pixel == pc.PALETTE[index] for row in rows for pixel in row)


def test_same_document_same_bytes_and_the_title_counts():
    document = sweep()
    assert bp.plot(document)["png"] == bp.plot(json.loads(cb.render_document(document)))["png"]
    assert bp.plot(document)["png"] != bp.plot(document, title="cluster h200-a")["png"]
    assert decode_png(bp.plot(document, width=400, height=240)["png"])[:2] == (400, 240)


def pairwise(busbws):
    """A finished pairwise document: a pair per figure (None: not measured)
    of nodes n0..n3, judged by analyze_pairs as the benchmark judges them."""
    nodes = ["node-%d" % index for index in range(4)]
    pairs = [{"round": number, "nodes": [nodes[number % 4], nodes[(number + 1) % 4]], "ranks": [0, 1],
              "size": 2 ** 28, "count": 2 ** 27, "time_us": 1.0, "algbw_gbps": busbw, "busbw_gbps": busbw,
              "wrong": 0, "status": "measured" if busbw is not None else "not-measured"}
             for number, busbw in enumerate(busbws)]
    analysis = bench_pairs.analyze_pairs(pairs)
    document = dict(sweep(), mode="pairwise", ops={}, pairs=pairs, pair_analysis=analysis,
                    nodes=[{"name": name, "ranks": [index]} for index, name in enumerate(nodes)])
    return cb.finish_document(document)


def test_a_pairwise_run_is_drawn_pair_by_pair_with_the_slow_ones_in_red():
    document = pairwise([300.0, 298.0, 120.0, None, 301.0])
    result = bp.plot(document)
    assert result["ops"] == ["pairs"] and result["points"] == 4
    width, height, rows = decode_png(result["png"])
    chart = result["chart"]
    assert chart.counting and chart.title == bp.PAIRS_TITLE
    # Pairs numbered as in the report's table: the unmeasured fourth has no point.
    for number, busbw in ((1, 300.0), (2, 298.0), (5, 301.0)):
        x, y = chart.pixel(number, busbw)
        assert rows[y][x] == pc.PALETTE[0], number
    x, y = chart.pixel(3, 120.0)
    assert rows[y][x] == pc.PALETTE[0] and rows[y][x + 7] == pc.RED  # the slow pair, ringed
    assert all(abs(px - x) <= 8 and abs(py - y) <= 8 for px, py in red_in_plot(result, rows))
    with pytest.raises(ValueError, match="the document has no measured pair to plot"):
        bp.plot(pairwise([None, None]))


def test_documents_without_a_measured_row_are_refused():
    with pytest.raises(ValueError, match="the document has no measured row to plot"):
        bp.plot(sweep(unmeasured=SIZES))


def soak_report(figures, degraded=(), threshold=0.1, baseline=100.0):
    """A soak report (verdicts.soak_report) of runs with these figures (None: not measured)."""
    runs = [{"run": number, "time": "t", "file": "/s/run-%02d.json" % number, "measured": figure is not None,
             "status": "pass", "error": None, "pods": [],
             "not_checked": [{"name": "busbw_gate", "message": "no gate"}]} for number, figure in enumerate(figures, 1)]
    judged = [{"path": "/s/run-%02d.json" % number, "throughput": figure, "unit": "GB/s", "degraded": number in degraded,
               "below_baseline": 0.0, "reasons": []} for number, figure in enumerate(figures, 1) if figure is not None]
    return verdicts.soak_report(runs, judged, {"cluster": "moc", "workload": "bench", "threshold": threshold,
                                               "baseline": {"value": baseline, "unit": "GB/s"}})


def test_a_soak_report_is_drawn_run_by_run_against_its_baseline(tmp_path):
    report = soak_report([101.0, 99.0, 70.0, None, 100.0], degraded=(3,))
    src = tmp_path / "soak.json"
    src.write_text(json.dumps(report))
    result = bp.plot_file(str(src), title="soak of moc")
    assert result["ops"] == ["soak"] and result["points"] == 4
    width, height, rows = decode_png(result["png"])
    chart = result["chart"]
    assert [text for text, _color in chart.subtitle] == [
        "soak: ", "1 degraded, 1 not measured", " - 5 runs of the benchmark on moc; 1 not checked: gate"]
    x, y = chart.pixel(3, 70.0)
    assert rows[y][x] == pc.PALETTE[0] and rows[y][x + 7] == pc.RED  # the degraded run, ringed
    # The baseline (grey) and the level a run is degraded below (red, 90 GB/s).
    x, y = chart.pixel(2, 100.0)
    assert any(rows[y][x + dx] == pc.GREY for dx in range(12))
    x, y = chart.pixel(2, 90.0)
    assert any(rows[y][x + dx] == pc.RED for dx in range(8))
    nothing = tmp_path / "nothing.json"
    nothing.write_text(json.dumps(soak_report([None, None])))
    with pytest.raises(ValueError, match="has no measured run to plot"):
        bp.plot_file(str(nothing))


@pytest.mark.parametrize("width, height", [(399, 540), (900, 239), (4001, 540), (900, 5000), (True, 540)])
def test_dimensions_are_checked(width, height):
    with pytest.raises(ValueError, match="is out of range: give a whole number of pixels"):
        bp.plot(sweep(), width=width, height=height)


# --- the module ------------------------------------------------------------------------

def module(args, check=False):
    return call_module("bench_plot", args, check=check)


def test_module_writes_once_then_is_idempotent_and_check_mode_writes_nothing(tmp_path):
    src = write(tmp_path, sweep(lambda size: 180.0 if size == 2 ** 31 else busbw_curve(size)))
    dest = str(tmp_path / "bench.png")
    args = {"src": src, "dest": dest, "title": "cluster h200-a"}
    checked = module(args, check=True)
    assert checked["changed"] is True and not checked.get("failed") and not os.path.exists(dest)
    # Once through the ansible CLI, as a playbook runs it.
    written = run_module("bench_plot", args)
    assert written["changed"] is True and written["dest"] == dest
    assert written["ops"] == ["all_reduce"] and written["points"] == 14
    with open(dest, "rb") as handle:
        data = handle.read()
    assert data == bp.plot_file(src, title="cluster h200-a")["png"]
    assert decode_png(data)[:2] == (900, 540)
    before = os.stat(dest)
    again = module(args)
    assert again["changed"] is False and again["points"] == 14
    assert module(args, check=True)["changed"] is False
    assert os.stat(dest).st_mtime_ns == before.st_mtime_ns and os.stat(dest).st_ino == before.st_ino
    # Another size: changed in check mode, file untouched; then rewritten.
    larger = dict(args, width=1200, height=700)
    assert module(larger, check=True)["changed"] is True
    with open(dest, "rb") as handle:
        assert handle.read() == data
    assert module(larger)["changed"] is True
    with open(dest, "rb") as handle:
        assert decode_png(handle.read())[:2] == (1200, 700)
    assert sorted(os.listdir(str(tmp_path))) == ["bench.json", "bench.png"]  # no temporary file left


def test_module_errors_name_the_file_and_write_nothing(tmp_path):
    dest = str(tmp_path / "out.png")
    missing = str(tmp_path / "missing.json")
    not_json = tmp_path / "not.json"
    not_json.write_text("hello\n")
    other = tmp_path / "other.json"
    other.write_text('{"tool": "something-else"}')
    newer = sweep()
    newer["schema"] = 99
    nothing = sweep(unmeasured=SIZES)
    cases = [
        ({"src": missing}, "cannot read src %s: No such file or directory" % missing),
        ({"src": str(not_json)}, "%s is not JSON" % not_json),
        ({"src": str(other)}, "%s is not a mlinfra-nccl-bench result" % other),
        ({"src": write(tmp_path, newer, "newer.json")}, "%s has schema 99" % (tmp_path / "newer.json")),
        ({"src": write(tmp_path, nothing, "nothing.json")}, "%s has no measured row to plot" % (
            tmp_path / "nothing.json")),
        ({"src": str(other), "width": 50}, "width 50 is out of range: give a whole number of pixels from 400 to 4000"),
    ]
    for args, message in cases:
        result = module(dict({"dest": dest}, **args))
        assert result.get("failed") is True and result["changed"] is False, args
        assert message in result["msg"], (args, result["msg"])
    result = module({"src": write(tmp_path, sweep()), "dest": str(tmp_path / "no" / "such" / "dir.png")})
    assert result.get("failed") and "its directory %s does not exist" % (tmp_path / "no" / "such") in result["msg"]
    assert not os.path.exists(dest)


def test_documentation_renders():
    proc = subprocess.run([os.path.join(BIN, "ansible-doc"), "--json", "mlinfra.multinode.bench_plot"],
                          cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["mlinfra.multinode.bench_plot"]
    assert sorted(doc["doc"]["options"]) == ["dest", "height", "src", "title", "width"]
    assert doc["doc"]["options"]["width"]["default"] == bp.DEFAULT_WIDTH
    assert doc["doc"]["options"]["height"]["default"] == bp.DEFAULT_HEIGHT
    assert sorted(doc["return"]) == ["dest", "ops", "points"]
