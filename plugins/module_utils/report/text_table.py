# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Rows as the lines of a plain text table whose columns line up, for the
reports an operator reads in a play's output (status.yml).

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _cell(value):
    return "-" if value is None else u"%s" % (value,)


def format_table(rows, header):
    """The header line, then a line per row; null cells show as ``-``.
    Raises ValueError for a row of another width than the header."""
    for row in rows:
        if not isinstance(row, (list, tuple)) or len(row) != len(header):
            raise ValueError("every row needs %d cells (%s), got %r" % (len(header), ", ".join(header), row))
    lines = [[_cell(cell) for cell in header]] + [[_cell(cell) for cell in row] for row in rows]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
