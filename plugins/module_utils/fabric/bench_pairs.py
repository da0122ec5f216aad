# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective benchmark's nodes and pairs: which ranks share a node,
the rounds in which every pair of nodes is measured once, and which pairs
and nodes are slow against the median pair.

Standard library only; shipped into the pods with the benchmark.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.stats import median
from .bench_table import NOT_AVAILABLE, format_number
from .collective_bench import DEFAULT_SLOW_FRACTION, TOOL, VERSION, plural


def group_nodes(keys):
    """Ranks grouped into nodes by each rank's node key (GROUP_RANK, or rank
    // ranks-per-node): a list of rank lists, in order of their first rank."""
    order = []
    members = {}
    for rank, key in enumerate(keys):
        if key not in members:
            members[key] = []
            order.append(key)
        members[key].append(rank)
    return [members[key] for key in order]


def name_nodes(nodes, infos):
    """A name for each node (a list of rank lists): MLINFRA_NODE_NAME of its
    first rank when set, else that rank's hostname. When the names are not
    unique (on the local test cluster several nodes share one host) every
    node is called node<index> instead, so that no two are confused.
    ``infos`` holds per rank {hostname, node_name}."""
    names = []
    for ranks in nodes:
        info = infos[ranks[0]]
        names.append(info.get("node_name") or info.get("hostname") or "")
    if "" in names or len(set(names)) != len(names):
        return ["node%d" % index for index in range(len(nodes))]
    return names


def round_robin(count):
    """Rounds of disjoint node pairs that together hold every pair of
    ``count`` nodes exactly once (the circle method): node 0 stays put, the
    others rotate; with an odd count one node sits out each round. Pairs are
    (lower, higher) index tuples."""
    slots = list(range(count)) + ([None] if count % 2 else [])
    rounds = []
    for _round in range(len(slots) - 1):
        pairs = []
        for index in range(len(slots) // 2):
            first, second = slots[index], slots[-1 - index]
            if first is not None and second is not None:
                pairs.append((min(first, second), max(first, second)))
        rounds.append(sorted(pairs))
        slots = [slots[0], slots[-1]] + slots[1:-1]
    return rounds


def analyze_pairs(pairs, fraction=DEFAULT_SLOW_FRACTION, min_busbw=None):
    """Marks each pair {nodes: [a, b], busbw_gbps, status} slow or not and
    names the suspects.

    A measured pair is slow when its busbw is below ``fraction`` of the
    median of all measured pairs, or below ``min_busbw``. A node is a
    suspect when more than half of its pairs are slow and it is in more than
    half of the slow pairs: one bad node makes all of its own pairs slow and
    only one pair of each other node. When every pair is slow no node stands
    out and none is named. Returns {median_busbw_gbps, slowest_pair,
    slow_pairs, suspect_nodes, note}."""
    if not 0 < fraction < 1:
        raise ValueError("the slow fraction must be between 0 and 1 (0.8 = slow below 80%% of the median), got %r"
                         % (fraction,))
    measured = [pair for pair in pairs if pair["status"] == "measured"]
    median_busbw = median([pair["busbw_gbps"] for pair in measured])
    for pair in pairs:
        reasons = []
        if pair["status"] != "measured":
            reasons.append("not measured")
        else:
            if median_busbw and pair["busbw_gbps"] < fraction * median_busbw:
                reasons.append("busbw %.2f GB/s is %.0f%% of the median %.2f GB/s (slow below %.0f%%)" % (
                    pair["busbw_gbps"], 100.0 * pair["busbw_gbps"] / median_busbw, median_busbw, 100.0 * fraction))
            if min_busbw is not None and pair["busbw_gbps"] < min_busbw:
                reasons.append("busbw %.2f GB/s is below the gate of %g GB/s" % (pair["busbw_gbps"], min_busbw))
        pair["slow"] = bool(reasons)
        pair["reasons"] = reasons
    slow = [pair for pair in pairs if pair["slow"]]
    slowest = min(measured, key=lambda pair: pair["busbw_gbps"]) if measured else None
    node_pairs = {}
    node_slow = {}
    for pair in pairs:
        for node in pair["nodes"]:
            node_pairs[node] = node_pairs.get(node, 0) + 1
            node_slow[node] = node_slow.get(node, 0) + (1 if pair["slow"] else 0)
    suspects = []
    note = None
    if slow and len(slow) == len(pairs):
        note = ("every pair is slow: no node stands out (the whole network, or a threshold set too high)"
                if len(pairs) > 1 else "the only pair is slow: with two nodes the slow one cannot be told apart")
    elif slow:
        suspects = [node for node in sorted(node_pairs)
                    if 2 * node_slow[node] > node_pairs[node] and 2 * node_slow[node] > len(slow)]
        if not suspects:
            note = "no node is common to the slow pairs: suspect the links or switches between them"
    return {
        "median_busbw_gbps": median_busbw,
        "slowest_pair": None if slowest is None else {"nodes": slowest["nodes"], "busbw_gbps": slowest["busbw_gbps"]},
        "slow_pairs": [{"nodes": pair["nodes"], "busbw_gbps": pair.get("busbw_gbps"), "reasons": pair["reasons"]}
                       for pair in slow],
        "suspect_nodes": suspects,
        "note": note,
    }


def format_pairs(document):
    """The pairwise table and its conclusion, as rank 0 prints it."""
    summary = document["pairwise"]
    lines = [
        "# %s version %s pairwise all_reduce: %d bytes %s per pair, %s, backend %s" % (
            TOOL, VERSION, summary["size"], document["dtype"], plural(len(document["nodes"]), "node"),
            document["backend"]),
        "# %5s  %-20s  %-20s  %5s  %9s  %7s  %7s  %6s  %s" % (
            "round", "node", "node", "ranks", "time(us)", "algbw", "busbw", "#wrong", "verdict"),
    ]
    for pair in document["pairs"]:
        if pair["status"] == "measured":
            figures = "%9s  %7s  %7s  %6g" % (format_number(pair["time_us"], 9), format_number(pair["algbw_gbps"], 7),
                                              format_number(pair["busbw_gbps"], 7), float(pair["wrong"]))
        else:
            figures = "%9s  %7s  %7s  %6s" % ((NOT_AVAILABLE,) * 4)
        verdict = "SLOW: " + "; ".join(pair["reasons"]) if pair["slow"] else "ok"
        if pair["status"] == "measured" and pair["wrong"]:
            verdict = "WRONG RESULTS; " + verdict
        lines.append("  %5d  %-20s  %-20s  %5d  %s  %s" % (
            pair["round"], pair["nodes"][0], pair["nodes"][1], len(pair["ranks"]), figures, verdict))
    if summary["median_busbw_gbps"] is not None:
        lines.append("# median busbw of the pairs: %.2f GB/s; slow below %.0f%% of it%s" % (
            summary["median_busbw_gbps"], 100.0 * summary["fraction"],
            "" if summary["min_busbw_gbps"] is None else " or below %g GB/s" % summary["min_busbw_gbps"]))
    slowest = document["slowest_pair"]
    if slowest:
        lines.append("# slowest pair: %s - %s at %.2f GB/s" % (slowest["nodes"][0], slowest["nodes"][1],
                                                               slowest["busbw_gbps"]))
    lines.append("# slow pairs: %s" % (", ".join("%s - %s" % tuple(pair["nodes"]) for pair in document["slow_pairs"])
                                       or "none"))
    lines.append("# suspect nodes: %s" % (", ".join(document["suspect_nodes"]) or "none"))
    if summary.get("note"):
        lines.append("# note: %s" % summary["note"])
    return "\n".join(lines) + "\n"


# --- command line -------------------------------------------------------------
