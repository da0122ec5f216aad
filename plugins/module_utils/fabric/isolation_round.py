# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""One round of the fault-isolation plan (isolation.py) on the pods of the
nodes it tests: what each pod's ``mlinfra pod-bench`` is given for the test
its node is in, and the figure each test came back with.

A round's tests run at once, each on its own nodes, so each is a torchrun
job of its own: its first node's pod is node 0 and hosts the rendezvous, on
a port of the test's own. A test that names some of a node's ports runs
that pod on those RDMA devices only (NCCL_IB_HCA, ``--ib-hca``). The figure
of a test is the bus bandwidth at the largest size its node 0 measured; a
group where a pod failed, timed out or gave no document has none, which
isolation.judge_round takes as slow, never as a pass.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .isolation import IsolationError

HIGHEST_PORT = 65535


def round_arguments(tests, pods, base_port):
    """{pod name: [pod-bench arguments]} for a round. ``pods``: {node:
    {"name", "ip"}} of the pods the round may use, one per node; test i
    rendezvouses on ``base_port + i``."""
    if base_port + len(tests) - 1 > HIGHEST_PORT:
        raise IsolationError("a round of %d tests needs ports %d to %d: lower the rendezvous port"
                             % (len(tests), base_port, base_port + len(tests) - 1))
    arguments, seen = {}, set()
    for index, test in enumerate(tests):
        missing = [node for node in test["nodes"] if node not in pods]
        if missing:
            raise IsolationError("test %d of the round names node(s) without a running pod: %s"
                                 % (index + 1, ", ".join(missing)))
        twice = seen.intersection(test["nodes"])
        if twice:
            raise IsolationError("node(s) %s are in two tests of one round" % ", ".join(sorted(twice)))
        seen.update(test["nodes"])
        master = pods[test["nodes"][0]]["ip"]
        for rank, node in enumerate(test["nodes"]):
            line = ["--nnodes", str(len(test["nodes"])), "--node-rank", str(rank), "--master-addr", master,
                    "--master-port", str(base_port + index)]
            ports = (test.get("ports") or {}).get(node)
            if ports:
                # "=": these device names exactly (mlx5_1 is not mlx5_10).
                line += ["--ib-hca", "=" + ",".join(ports)]
            arguments[pods[node]["name"]] = line
    return arguments


def round_figures(tests, pods, results, op):
    """Each test's figure (GB/s) in the order of ``tests``: ``op``'s bus
    bandwidth at the largest size node 0's document measured; None when a
    pod of the test has no result, failed or timed out, or the document
    holds no measured row of ``op``. ``results``: {pod name: pod-bench's
    result object}."""
    figures = []
    for test in tests:
        group = [results.get(pods[node]["name"]) for node in test["nodes"]]
        if any(result is None or result.get("exit_code") != 0 or result.get("timed_out") for result in group):
            figures.append(None)
            continue
        rows = (((group[0].get("document") or {}).get("ops") or {}).get(op) or {}).get("rows") or []
        measured = [row for row in rows if row.get("busbw_gbps") is not None]
        figures.append(max(measured, key=lambda row: row["requested_size"])["busbw_gbps"] if measured else None)
    return figures
