# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Every RDMA port's counters, read before and after a run, and what moved.

The kernel keeps two sets per port: the InfiniBand PortCounters
(``/sys/class/infiniband/<dev>/ports/<n>/counters``, the data counters in
units of 4 bytes) and the driver's hardware counters (``hw_counters``: for
mlx5 the RoCE retransmission, congestion-notification and sequence-error
counters). On RoCE the per-priority flow-control counters are in neither:
mlx5 gives them to ``ethtool -S <netdev>`` (``rx_prio3_pause``, its
``_duration``, ``rx_prio3_buf_discard``, ...), read through host_tools.
A run's deltas say how much each port moved and whether it did so
cleanly: an error counter that moves during a benchmark or a training run is
a finding on that NIC, and the congestion counters, per GB moved, tell a
congested fabric from a quiet one. Around verify-rdma.yml's benchmark the
probes read their node's whole ports too (mlinfra node-check
--read-counters): a pod sees the ports it was given (a VF may count only
its own traffic), a probe every port of its node, whoever uses it; both go
into the report's tables and its port_counters finding (verdicts).

Standard library only: read inside the pods by mlinfra pod-bench and the
probes.
"""

from __future__ import absolute_import, division, print_function

import re

from ..node.host_tools import tool_output
from ..node.facts import natural_key

__metaclass__ = type

# Counters that move only when something went wrong on the link or in the
# transport, with what it means (Documentation/ABI/stable/sysfs-class-infiniband,
# the mlx5 hw_counters' documentation).
ERROR_COUNTERS = {
    "symbol_error": "symbol errors on the physical link (cable, transceiver or port)",
    "link_error_recovery": "the link retrained",
    "link_downed": "the link went down",
    "port_rcv_errors": "received packets with errors",
    "port_rcv_remote_physical_errors": "received packets marked bad by the sender's side",
    "local_link_integrity_errors": "local physical errors beyond the threshold",
    "excessive_buffer_overrun_errors": "receive buffer overruns",
    "port_xmit_discards": "outbound packets discarded (congestion or a port down)",
    "out_of_sequence": "RoCE packets out of sequence (drops on a lossy fabric)",
    "packet_seq_err": "NAK sequence errors received (the peer saw drops)",
    "local_ack_timeout_err": "ACK timeouts: packets retransmitted after silence",
    "rnr_nak_retry_err": "receiver-not-ready retries exhausted",
    "implied_nak_seq_err": "implied NAK sequence errors",
    "out_of_buffer": "packets dropped for lack of receive WQEs",
    "req_cqe_error": "requests completed in error",
    "resp_cqe_error": "responses completed in error",
}
# Congestion: normal in small numbers on RoCE with ECN, telling in large ones.
CONGESTION_COUNTERS = ("port_xmit_wait", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
# ethtool -S's per-priority flow control (mlx5's priority port counters):
# pauses sent and received are congestion; a buffer discard on a priority is
# a packet dropped in a class that was meant to be lossless.
_PRIORITY_COUNTER = re.compile(r"^(rx|tx)_prio([0-7])_(pause|pause_duration|pause_transition|buf_discard)$")
ETHTOOL_ERRORS = {
    "tx_pause_storm_warning_events": "the NIC stopped sending pauses for a while (a pause storm)",
    "tx_pause_storm_error_events": "the NIC stopped sending pauses for good (a pause storm)",
}
# port_xmit_data and port_rcv_data count 4-byte words.
DATA_WORD_BYTES = 4
GB = 1e9


def _read_counter_dir(reader, *parts):
    values = {}
    for name in reader.listdir(*parts):
        text = reader.read(*(parts + (name,)), quiet=True)
        try:
            values[name] = int(text)
        except (TypeError, ValueError):
            continue
    return values


def parse_ethtool_stats(text):
    """The per-priority flow control counters and pause-storm events of an
    ``ethtool -S`` output (``     rx_prio3_pause: 148213``)."""
    found = {}
    for line in (text or "").splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and (_PRIORITY_COUNTER.match(name) or name in ETHTOOL_ERRORS) and value.strip().isdigit():
            found[name] = int(value)
    return found


def read_port_counters(reader, outputs=None):
    """{"<device>/<port>": {"netdevs", "counters", "hw_counters", "ethtool"}}
    of every RDMA port the reader's root shows (a NodeReader); ``ethtool``
    from its first netdev, on Ethernet ports. ``outputs``, when given, gets
    what ethtool printed for each such netdev, as host_tools.tool_output
    gives it (node_record keeps it in a snapshot without running it again)."""
    ports = {}
    for dev in reader.listdir("sys/class/infiniband", natural=True):
        netdevs = reader.listdir("sys/class/infiniband", dev, "device", "net", natural=True)
        for port in reader.listdir("sys/class/infiniband", dev, "ports"):
            base = ("sys/class/infiniband", dev, "ports", port)
            ethernet = reader.read(*(base + ("link_layer",)), quiet=True) == "Ethernet"
            printed = (None, None)
            if ethernet and netdevs:
                printed = tool_output(reader, "ethtool", ["-S", netdevs[0]], netdevs[0], recorded_as="ethtool-S")
                if outputs is not None:
                    outputs[netdevs[0]] = printed
            ports["%s/%s" % (dev, port)] = {
                "netdevs": netdevs,
                "counters": _read_counter_dir(reader, *(base + ("counters",))),
                "hw_counters": _read_counter_dir(reader, *(base + ("hw_counters",))),
                "ethtool": parse_ethtool_stats(printed[0]),
            }
    return ports


def meaning(name):
    """What an error counter that moved means; None for other counters."""
    match = _PRIORITY_COUNTER.match(name)
    if match and match.group(3) == "buf_discard":
        return "packets dropped on priority %s, which was meant to be lossless" % match.group(2)
    return ERROR_COUNTERS.get(name) or ETHTOOL_ERRORS.get(name)


def _is_error(name):
    return meaning(name) is not None


def _is_congestion(name):
    return name in CONGESTION_COUNTERS or bool(_PRIORITY_COUNTER.match(name)) and not _is_error(name)


def _moved(before, after):
    """after - before for each counter both hold; a counter that went back
    (reset, or wrapped) counts from zero."""
    moved = {}
    for name, value in after.items():
        if name in before:
            moved[name] = value - before[name] if value >= before[name] else value
    return moved


def port_deltas(before, after):
    """What moved on each port between two readings, with the bytes it moved
    and the error and congestion counters per GB moved."""
    deltas = {}
    for port in sorted(set(before) & set(after), key=natural_key):
        moved = {}
        for kind in ("counters", "hw_counters", "ethtool"):
            moved.update(_moved(before[port].get(kind) or {}, after[port].get(kind) or {}))
        data_bytes = DATA_WORD_BYTES * (moved.get("port_xmit_data", 0) + moved.get("port_rcv_data", 0))
        per_gb = dict((name, round(moved[name] * GB / data_bytes, 3)) for name in sorted(moved)
                      if (_is_error(name) or _is_congestion(name)) and moved[name] and data_bytes)
        deltas[port] = {
            "netdevs": after[port]["netdevs"],
            "bytes": data_bytes,
            "errors": dict((name, moved[name]) for name in sorted(moved) if _is_error(name) and moved[name]),
            # Those the port has, moved or not (a quiet fabric's zeros say so).
            "congestion": dict((name, moved[name]) for name in sorted(moved, key=_congestion_order)
                               if _is_congestion(name)),
            "per_gb": per_gb,
        }
    return deltas


def _congestion_order(name):
    return (CONGESTION_COUNTERS.index(name) if name in CONGESTION_COUNTERS else len(CONGESTION_COUNTERS), name)


def counter_findings(deltas_by_host):
    """Each error counter that moved, as (host, port, counter, delta, per
    GB, meaning), the largest first. ``deltas_by_host``: {host: port_deltas}."""
    findings = []
    for host, deltas in sorted(deltas_by_host.items()):
        for port, delta in (deltas or {}).items():
            for name, value in delta["errors"].items():
                findings.append({"host": host, "port": port, "netdevs": delta["netdevs"], "counter": name,
                                 "delta": value, "per_gb": delta["per_gb"].get(name),
                                 "meaning": meaning(name)})
    return sorted(findings, key=lambda finding: (-finding["delta"], finding["host"], finding["port"]))


# -- around a benchmark: the pods' and the probes' readings, for the report --


def _counter_row(port, delta):
    return {"port": port, "netdevs": delta["netdevs"], "gb": round(delta["bytes"] / 1e9, 3),
            "errors": ", ".join("%s +%d" % item for item in sorted(delta["errors"].items())),
            "congestion_per_gb": ", ".join("%s %s" % (name, delta["per_gb"][name])
                                           for name in delta["congestion"] if name in delta["per_gb"])}


def _by_name(mapping):
    """A mapping's items by port or node name, mlx5_2 before mlx5_10."""
    return sorted((mapping or {}).items(), key=lambda item: natural_key(item[0]))


def counter_rows(pods):
    """The report's table: what each pod's ports moved during the run."""
    rows = []
    for pod in pods:
        for port, delta in _by_name(pod.get("port_counters")):
            rows.append(dict(_counter_row(port, delta), pod=pod["pod"], node=pod["node"]))
    return rows


def node_counter_rows(node_deltas):
    """The report's table of the nodes' ports, as their probes read them; a
    node whose readings are missing has one row with the error."""
    rows = []
    for node, moved in _by_name(node_deltas):
        if moved["error"]:
            rows.append({"node": node, "port": None, "error": moved["error"]})
        for port, delta in _by_name(moved["ports"]):
            rows.append(dict(_counter_row(port, delta), node=node, error=None))
    return rows


def _probe_reading(found):
    document = (found or {}).get("json")
    reading = document.get("port_counters") if isinstance(document, dict) else None
    return reading if isinstance(reading, dict) else None


def node_port_deltas(before, after, nodes=None):
    """What every RDMA port of each probed node (of ``nodes`` only, when
    given) moved during a run, whoever sent it, from its probe's readings
    just before and just after it (pods_exec's ``pods`` running
    mlinfra node-check --read-counters): {node: {"ports": port_deltas,
    "error": None}}, or {"ports": None, "error": why} for a node one of
    whose readings is missing."""
    readings = {}
    for when, execs in (("before", before), ("after", after)):
        for item in execs or []:
            if item.get("node") and (nodes is None or item["node"] in nodes):
                readings.setdefault(item["node"], {})[when] = item
    deltas = {}
    for node, pair in _by_name(readings):
        first, last = _probe_reading(pair.get("before")), _probe_reading(pair.get("after"))
        if first is not None and last is not None:
            deltas[node] = {"ports": port_deltas(first, last), "error": None}
            continue
        when = "before" if first is None else "after"
        why = (pair.get(when) or {}).get("error") or (pair.get(when) or {}).get("stderr") or "no reading"
        deltas[node] = {"ports": None, "error": "its probe could not read the ports' counters %s the run: %s"
                                                % (when, why.strip())}
    return deltas


def _counter_moved(item):
    """One error counter that moved, as the finding says it."""
    port = item["port"] + (" (%s)" % ",".join(item["netdevs"]) if item["netdevs"] else "")
    rate = ", %s per GB moved" % item["per_gb"] if item["per_gb"] is not None else ""
    return "%s: %s %s +%d%s (%s)" % (item["host"], port, item["counter"], item["delta"], rate, item["meaning"])


def moved_errors(pods, node_deltas):
    """What the finding says: every error counter that moved, in a pod's
    ports (``pods``' port_counters) or, as the probes read them, in its
    node's whole ports (``node_deltas``: node_port_deltas); then each node
    whose ports could not be read."""
    moved = dict(("pod %s on %s" % (pod["pod"], pod["node"]), pod.get("port_counters")) for pod in pods)
    moved.update(("node %s (whole ports)" % node, found["ports"]) for node, found in node_deltas.items())
    messages = [_counter_moved(item) for item in counter_findings(moved)]
    messages.extend("node %s: %s" % (node, found["error"]) for node, found in _by_name(node_deltas) if found["error"])
    return messages
