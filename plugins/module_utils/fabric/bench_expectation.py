# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What the benchmark's bus bandwidth should reach, from the fabric the pods
found rather than a number typed into the inventory.

Each benchmark pod reports its rails (node_rails.rail_bandwidth: each NIC
that is one of its GPUs' nearest, at its active ports' rate). A ring
collective crosses every node boundary through those rails, and nccl-tests'
bus bandwidth is defined so that a ring's equals what the slowest link
carries: so the ring's bound is the smallest node's rails, in GB/s. With
``fraction`` of it from ``from_size`` on as the gate, a run below it fails
``busbw_expected``, naming the size, the figure and the rails.

Two nodes are too few to characterise the network: NCCL's tree all_reduce
then sends each byte across the network once each way, where the ring sends
nearly twice, so a two-node all_reduce can come out at up to twice what the
NICs carry. A figure above the rails' bound, or a pass on two nodes, is said
to rest on too few nodes. When the inventory gives its own gates
(verify_bench_min_busbw, verify_bench_nic_line_rate_gbps) they decide and
the expectation is only reported; when NCCL was not seen using the network
(TCP mode, gloo on the CPU) the NICs' rate says nothing and it is skipped.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .collective_bench import format_size, parse_size

BUSBW_EXPECTED = "busbw_expected"
EXPECTED_FIX = ("The pods' rails carry more than the collectives reached: see the node and pod findings (rdma_link "
                "rates, gpu_nic_rails and pod_rails, nccl_transport, port_counters) and run verify-rdma.yml -e "
                "verify_bench_pairwise=true to name a slow pair of pods.")
# NCCL's tree sends each byte once each way on two nodes (see above).
TWO_NODE_TREE_FACTOR = 2
FEW_NODES = 2


def ring_bound(pods):
    """The smallest pod's rails, GB/s, with that pod; (None, why) when a
    pod's rails or their rate are unknown."""
    bounds = []
    for pod in pods:
        carried = (pod.get("rail_bandwidth") or {}).get("gbytes_per_s")
        if carried is None:
            return None, "pod %s: its rails or their rate are not known" % pod.get("pod")
        bounds.append((carried, pod))
    if not bounds:
        return None, "no pod reported its rails"
    return min(bounds, key=lambda item: item[0]), None


def _network_used(pods):
    """Why NCCL cannot be said to have used the NICs, or None when every
    pod's transport check passed."""
    unused = ["%s (%s)" % (pod.get("pod"), (pod.get("transport") or {}).get("status") or "no check")
              for pod in pods if (pod.get("transport") or {}).get("status") != "pass"]
    if unused:
        return "NCCL was not seen sending over the RDMA NICs in %s: their rate says nothing of this run" % (
            ", ".join(unused))
    return None


def expectation(document, pods, fraction, from_size, overridden=False):
    """The expectation and its status: ``pass``, ``fail`` (a size from
    ``from_size`` on below ``fraction`` of the bound), or ``skip`` with why;
    ``notes`` say when the figures rest on too few nodes. ``overridden``:
    the inventory's own gates apply instead."""
    bound, why = ring_bound(pods)
    result = {"name": BUSBW_EXPECTED, "status": "skip", "bound_gbps": None, "gate_gbps": None,
              "from_size": from_size, "fraction": fraction, "rails": [], "nodes": len(pods), "below": [],
              "notes": [], "message": why}
    if bound is None:
        return result
    carried, pod = bound
    result.update(bound_gbps=round(carried, 3), gate_gbps=round(carried * fraction, 3),
                  rails=pod["rail_bandwidth"]["rails"],
                  message="the pods' rails carry %.1f GB/s (pod %s: %s)" % (
                      carried, pod.get("pod"), ", ".join(pod["rail_bandwidth"]["rails"])))
    unused = _network_used(pods)
    if unused or not document:
        result["message"] += "; %s" % (unused or "no benchmark document")
        return result
    start = parse_size(from_size)
    rows = [(op, row) for op, block in sorted((document.get("ops") or {}).items()) for row in block.get("rows") or []
            if row.get("status") == "measured" and row["size"] >= start]
    above = ["%s %s %.1f GB/s" % (op, format_size(row["size"]), row["busbw_gbps"]) for op, row in rows
             if row["busbw_gbps"] > carried]
    if above:
        result["notes"].append("above what the rails carry (%s): %s; a collective that beats the NICs is not "
                               "measuring them alone (NCCL's tree, or traffic that stayed in the node)"
                               % ("%.1f GB/s" % carried, ", ".join(above)))
    if len(pods) <= FEW_NODES:
        result["notes"].append("%d node(s) are too few to characterise the network: on two nodes NCCL's tree "
                               "all_reduce can reach up to %d times what the NICs carry; measure on 3 or more"
                               % (len(pods), TWO_NODE_TREE_FACTOR))
    result["below"] = ["%s %s: busbw %.1f GB/s" % (op, format_size(row["size"]), row["busbw_gbps"]) for op, row in rows
                       if row["busbw_gbps"] < carried * fraction]
    if overridden:
        result["message"] += "; the inventory's gates apply instead (verify_bench_min_busbw, " \
                             "verify_bench_nic_line_rate_gbps)"
    elif not rows:
        result["message"] += "; no size of %s or more was measured" % from_size
    elif result["below"]:
        result.update(status="fail", message="%s below %.0f%% of the %.1f GB/s the pods' rails carry (%s)" % (
            "; ".join(result["below"]), 100 * fraction, carried, ", ".join(result["rails"])))
    else:
        result.update(status="pass", message="from %s on, every size reached %.0f%% of the %.1f GB/s the pods' "
                                             "rails carry" % (from_size, 100 * fraction, carried))
    return result
