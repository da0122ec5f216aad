# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective benchmark's nccl-tests-compatible text table: written
row by row as the benchmark runs, and read back from its output or from
nccl-tests' own (all_reduce_perf and its siblings).

Standard library only; shipped into the pods with the benchmark.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .collective_bench import NCCL_TYPE_NAMES, OP_INFO, PLACEMENTS, TOOL, VERSION, average_busbw, format_size


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
