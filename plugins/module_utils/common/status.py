# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The words every check and verdict of the collection uses, defined once:
a check's status, and the result a check gives (the node checks, the NCCL
transport check), which report/verdicts.py judges.

Standard library only; shipped into the pods with the rest of the runtime.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
# A verdict, never a check's own status: what it needed could not be read,
# which is never a pass.
NOT_CHECKED = "not-checked"


def check_result(name, status, message, remediation=None, data=None, not_applicable=False):
    """One check's result. ``not_applicable``: a skip because the check has
    nothing to look at by design (tcp mode, InfiniBand ports for a RoCE
    check), told apart from a skip because what it needed could not be
    read, which stays unchecked."""
    return {"name": name, "status": status, "message": message, "remediation": remediation or "",
            "data": data if data is not None else {}, "not_applicable": not_applicable}
