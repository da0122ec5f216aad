# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes resource quantities (``32``, ``31500m``, ``256Gi``,
``1055315188Ki``, ``1e3``) as numbers of the resource's unit: cores for CPU,
bytes for memory. Standard library only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SUFFIXES = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0,
    "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40, "Pi": 2.0 ** 50, "Ei": 2.0 ** 60,
}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity(value):
    """The quantity's value in its resource's unit, or None when value is
    not a quantity."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    found = _QUANTITY.match(str(value).strip())
    if not found:
        return None
    number, exponent, suffix = found.groups()
    if exponent is not None and suffix:
        return None
    return float(number) * (10.0 ** int(exponent) if exponent is not None else 1.0) * _SUFFIXES[suffix or ""]
