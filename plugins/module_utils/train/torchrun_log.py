# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What torchrun's elastic agent says about a node in its log.

Two things a user asks of a failed multi-node run: which node rank each pod
really got (torchrun's c10d rendezvous orders the nodes as they arrive, so
--node-rank is ignored and pod h-kim-0 can hold rank 1), and which rank
failed first and how (an exit status, or a signal such as SIGKILL from the
out-of-memory killer). The agent logs the first at INFO (LOGLEVEL=INFO, which
mlinfra train sets) in its "Rendezvous complete for workers" block, and the
second in the "Root Cause (first observed failure)" block it prints when a
worker fails.

Standard library only: mlinfra train runs it in the pods.
"""

from __future__ import absolute_import, division, print_function

import re
import signal

__metaclass__ = type

_RESULT_FIELD = re.compile(r"\]\s+(group_rank|group_world_size|global_ranks|local_ranks)=(\S.*)$")
_ROOT_CAUSE = "Root Cause (first observed failure):"
_FAILURE_FIELD = re.compile(r"^\s*(rank|exitcode|host|traceback)\s*:\s*(.*)$")
_RANK = re.compile(r"^(-?[0-9]+) \(local_rank: (-?[0-9]+)\)$")
_EXITCODE = re.compile(r"^(-?[0-9]+)")


def _numbers(text):
    return [int(number) for number in re.findall(r"-?[0-9]+", text)]


def rendezvous_result(lines):
    """{group_rank, group_world_size, global_ranks, local_ranks} of the
    latest rendezvous in the agent's log lines, or None when it logged none
    (an agent below INFO, or one still waiting for the other nodes)."""
    result, current = None, None
    for line in lines:
        if "Rendezvous complete for workers" in line:
            current = {}
            result = current
            continue
        match = _RESULT_FIELD.search(line) if current is not None else None
        if match:
            name, value = match.groups()
            current[name] = _numbers(value) if value.startswith("[") else int(value)
    if result is not None and "group_rank" not in result:
        return None
    return result


def first_failure(lines):
    """{rank, local_rank, exitcode, signal, host} of the root cause torchrun
    printed when a worker failed, or None. ``signal`` is the signal's name
    when the worker was killed by one (exitcode -N)."""
    found = None
    for index, line in enumerate(lines):
        if line.strip() == _ROOT_CAUSE:
            found = index
    if found is None:
        return None
    rank = local_rank = exitcode = host = None
    for line in lines[found + 1:found + 12]:
        match = _FAILURE_FIELD.match(line)
        if not match:
            continue
        name, value = match.group(1), match.group(2).strip()
        if name == "rank" and _RANK.match(value):
            rank, local_rank = (int(part) for part in _RANK.match(value).groups())
        elif name == "exitcode" and _EXITCODE.match(value):
            exitcode = int(_EXITCODE.match(value).group(1))
        elif name == "host":
            host = value
    killed_by = signal_name(0 - exitcode) if isinstance(exitcode, int) and exitcode < 0 else None
    return {"rank": rank, "local_rank": local_rank, "exitcode": exitcode, "signal": killed_by, "host": host}


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def describe_failure(failure):
    """'rank 1 (local rank 0) was killed by signal 9 (SIGKILL)' or 'rank 1
    (local rank 0) exited with 3'."""
    who = "rank %s (local rank %s)" % (failure["rank"], failure["local_rank"])
    if failure["signal"]:
        return "%s was killed by signal %d (%s)" % (who, -int(failure["exitcode"]), failure["signal"])
    return "%s exited with %s" % (who, failure["exitcode"])
