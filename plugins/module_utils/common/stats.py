# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Statistics of figures, defined once for every other module_utils file.

Standard library only; shipped into the pods with the rest of the runtime.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def median(values):
    """The median of the figures; None when there are none (a caller that
    wants another answer for nothing says so itself)."""
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2.0
