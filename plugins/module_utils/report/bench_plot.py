# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective benchmark's result document as a PNG chart.

One line per op of a sweep: the bus bandwidth (GB/s) of every measured size
against the size (the requested size, the sweep's step, to which the gates
apply) on a log2 axis. The gates (--min-busbw) are a dashed grey step line,
and sizes that fail (below their gate, or with wrong elements) are ringed in
red. Rows that were not measured have no figure and are left out. A
pairwise run is drawn pair by pair (its pairs in the document's order on a
counting axis), the slow pairs ringed in red. A soak report (soak.json) is
drawn by soak_plot. Standard library only (png_chart), like
collective_bench.
"""

from __future__ import absolute_import, division, print_function

import json

from ..fabric.collective_bench import parse_document
from .png_chart import GREEN, GREY, PALETTE, RED, TEXT, LineChart
from .soak_plot import is_soak_report, soak_chart

__metaclass__ = type

DEFAULT_WIDTH = 900
DEFAULT_HEIGHT = 540
WIDTH_RANGE = (400, 4000)
HEIGHT_RANGE = (240, 4000)
DEFAULT_TITLE = "mlinfra nccl-bench: bus bandwidth by message size"
GATE_LABEL = "gate (min busbw)"
FAIL_LABEL = "fails (below gate / wrong)"
PAIRS_TITLE = "mlinfra nccl-bench: bus bandwidth of each node pair"
SLOW_LABEL = "slow (below the pairs' median / gate)"


def check_dimensions(width, height):
    """Raises ValueError unless width and height are within WIDTH_RANGE and HEIGHT_RANGE."""
    for name, value, (low, high) in (("width", width, WIDTH_RANGE), ("height", height, HEIGHT_RANGE)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError("%s %r is out of range: give a whole number of pixels from %d to %d" % (
                name, value, low, high))


def is_failing(row):
    """Whether a measured row fails: below its gate, or with wrong elements."""
    row_gate = row.get("gate")
    return bool(row.get("wrong")) or bool(row_gate and row_gate.get("status") == "fail")


def measured_rows(document):
    """[(op, block, rows)] in the document's order, each with its measured rows only."""
    found = []
    for op, block in (document.get("ops") or {}).items():
        rows = [row for row in block["rows"] if row.get("status") == "measured" and row.get("busbw_gbps") is not None]
        if rows:
            found.append((op, block, rows))
    return found


def subtitle_runs(document):
    """(text, colour) runs: the verdict in green or red, then ranks, nodes, type and backend."""
    names = []
    for node in document.get("nodes") or ():
        names.append(str(node.get("name") if isinstance(node, dict) else node))
    nodes = "%d node%s" % (len(names), "" if len(names) == 1 else "s")
    if names:
        nodes += " (%s)" % ", ".join(names[:4] + (["..."] if len(names) > 4 else []))
    backend = str(document.get("backend"))
    if document.get("nccl_version"):
        backend += " %s" % document["nccl_version"]
    verdict = str(document.get("verdict")).upper()
    # The verdict first, so that a subtitle too long for the image loses the node names instead.
    return [("verdict: ", TEXT), (verdict, GREEN if verdict == "PASS" else RED),
            (" - %s ranks on %s, %s, %s" % (document.get("world_size"), nodes, document.get("dtype"), backend), TEXT)]


def measured_pairs(document):
    """[(number, pair)] of a pairwise run's measured pairs, numbered from 1
    in the document's order (the report's pair table)."""
    return [(number, pair) for number, pair in enumerate(document.get("pairs") or (), 1)
            if pair.get("status") == "measured" and pair.get("busbw_gbps") is not None]


def pairs_chart(document, width, height, title, source):
    """The chart of a pairwise run: each pair's busbw by its number."""
    pairs = measured_pairs(document)
    if not pairs:
        raise ValueError("%s has no measured pair to plot: plot a pairwise run that measured at least one pair" % source)
    chart = LineChart(width, height, title=title or PAIRS_TITLE, subtitle=subtitle_runs(document), counting=True,
                      x_label="node pair (as numbered in the report)", y_label="busbw (GB/s)")
    slow = [(number, pair["busbw_gbps"]) for number, pair in pairs if pair.get("slow") or pair.get("wrong")]
    if slow:
        chart.markers(SLOW_LABEL, slow, RED)
    chart.line("pair busbw", [(number, pair["busbw_gbps"]) for number, pair in pairs], PALETTE[0])
    return chart


def build_chart(document, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT, title=None, source="the document"):
    """The LineChart of a parsed document (collective_bench.parse_document).
    Raises ValueError when no row (no pair of a pairwise run) was measured."""
    check_dimensions(width, height)
    if document.get("mode") == "pairwise":
        return pairs_chart(document, width, height, title, source)
    blocks = measured_rows(document)
    if not blocks:
        raise ValueError("%s has no measured row to plot (every size was not measured, or there are no ops): plot "
                         "the document of a sweep that measured at least one size" % source)
    chart = LineChart(width, height, title=title or DEFAULT_TITLE, subtitle=subtitle_runs(document),
                      x_label="message size (bytes)", y_label="busbw (GB/s)")
    gates, failing = {}, []
    for op, block, rows in blocks:
        for row in rows:
            if row.get("gate"):
                gates[row["requested_size"]] = row["gate"]["min_busbw_gbps"]
            if is_failing(row):
                failing.append((row["requested_size"], row["busbw_gbps"]))
    if gates:
        chart.step(GATE_LABEL, sorted(gates.items()), GREY)
    if failing:
        chart.markers(FAIL_LABEL, failing, RED)
    for index, (op, block, rows) in enumerate(blocks):
        name = "%s busbw (%s)" % (op, block.get("placement")) if block.get("placement") else "%s busbw" % op
        chart.line(name, [(row["requested_size"], row["busbw_gbps"]) for row in rows], PALETTE[index % len(PALETTE)])
    return chart


def plot(document, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT, title=None, source="the document"):
    """{png, ops, points, chart}: the PNG bytes, the ops plotted (``pairs``
    for a pairwise run), the number of points."""
    chart = build_chart(document, width, height, title, source)
    if document.get("mode") == "pairwise":
        return {"png": chart.png(), "ops": ["pairs"], "points": len(measured_pairs(document)), "chart": chart}
    blocks = measured_rows(document)
    return {"png": chart.png(), "ops": [op for op, _block, _rows in blocks],
            "points": sum(len(rows) for _op, _block, rows in blocks), "chart": chart}


def plot_file(src, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT, title=None):
    """plot() of the benchmark document at ``src``, or the soak chart of a
    soak report. Raises ValueError naming the file and what is wrong with it."""
    try:
        with open(src, encoding="utf-8") as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        raise ValueError("cannot read src %s: %s" % (src, exc.strerror or exc))
    except ValueError as exc:
        raise ValueError("%s cannot be read as UTF-8 JSON: %s" % (src, exc))
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if is_soak_report(found):
        check_dimensions(width, height)
        chart = soak_chart(found, width, height, title, source=src)
        return {"png": chart.png(), "ops": ["soak"], "points": len(chart.series[-1]["points"]), "chart": chart}
    try:
        document = parse_document(text, source=src)
    except ValueError as exc:
        # parse_document's messages start with the path; a decoding error does not name it.
        message = str(exc)
        raise ValueError(message if message.startswith(src) else "%s cannot be read as UTF-8 JSON: %s" % (src, message))
    return plot(document, width, height, title, source=src)
