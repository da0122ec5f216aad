# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Whether a RoCE port is lossless on the priority NCCL's traffic uses.

RoCE needs a fabric that does not drop: priority flow control (PFC) on the
priority its packets travel on, and ECN so that congestion slows the senders
before the pauses spread. NCCL marks its packets with ``NCCL_IB_TC``, the
traffic class byte (DSCP in its upper six bits, default 0); with the port
trusting DSCP, the port's DSCP-to-priority map gives the priority (by
default DSCP / 8). What the port does on that priority is read from:

- mlx5's ECN switches in sysfs, ``/sys/class/net/<netdev>/ecn/roce_np/enable/<prio>``
  (the port as notification point: it sends CNPs) and ``roce_rp/enable/<prio>``
  (as reaction point: it slows down on CNPs);
- the output of ``mlnx_qos -i <netdev>`` (trust state, DSCP map, PFC per
  priority), run where the node's root is this machine's, or read from a
  snapshot's recording (host_tools).

Standard library only: shared by the modules and the in-pod commands.
"""

from __future__ import absolute_import, division, print_function

import re

from ..node.host_tools import tool_output

__metaclass__ = type

PRIORITIES = range(8)
ECN_KINDS = ("roce_np", "roce_rp")


def parse_mlnx_qos(text):
    """{trust, dscp2prio, pfc} from ``mlnx_qos -i`` (None where the output
    does not say); None when the text is not mlnx_qos's."""
    trust = re.search(r"Priority trust state:\s*(\w+)", text or "")
    pfc = re.search(r"^\s*enabled\s+([01](?:\s+[01]){7})\s*$", text or "", re.MULTILINE)
    if not trust and not pfc:
        return None
    dscp2prio = {}
    for match in re.finditer(r"prio:\s*([0-7])\s+dscp:\s*([0-9,\s]+)", text):
        for dscp in match.group(2).replace(",", " ").split():
            dscp2prio[int(dscp)] = int(match.group(1))
    return {"trust": trust.group(1) if trust else None, "dscp2prio": dscp2prio,
            "pfc": [flag == "1" for flag in pfc.group(1).split()] if pfc else None}


def _ecn(reader, netdev):
    """{roce_np: {prio: bool}, roce_rp: {...}}, a kind absent when sysfs has none."""
    found = {}
    for kind in ECN_KINDS:
        values = {}
        for prio in PRIORITIES:
            text = reader.read("sys/class/net", netdev, "ecn", kind, "enable", str(prio), quiet=True)
            if text in ("0", "1"):
                values[prio] = text == "1"
        if values:
            found[kind] = values
    return found


def gather_roce_qos(reader, rdma_devices):
    """Each RoCE netdev's ECN switches and mlnx_qos view; the raw output is
    kept so that a recording can replay it."""
    netdevs = []
    for dev in rdma_devices:
        if any(port.get("link_layer") == "Ethernet" for port in dev["ports"]):
            netdevs.extend(name for name in dev["netdevs"] if name not in netdevs)
    qos = {}
    for netdev in netdevs:
        raw, source = tool_output(reader, "mlnx_qos", ["-i", netdev], netdev)
        qos[netdev] = {"ecn": _ecn(reader, netdev), "mlnx_qos": parse_mlnx_qos(raw) if raw else None,
                       "mlnx_qos_raw": raw, "mlnx_qos_source": source}
    return qos


def nccl_priority(traffic_class, mlnx_qos):
    """(priority, how it was worked out) of NCCL's RoCE packets; priority
    None when the port trusts the VLAN's PCP (NCCL sets only DSCP)."""
    dscp = (traffic_class or 0) >> 2
    where = "NCCL_IB_TC=%s, DSCP %d" % (traffic_class if traffic_class is not None else "0 (unset)", dscp)
    if mlnx_qos and mlnx_qos.get("trust") == "pcp":
        return None, where + "; the port trusts PCP, so the priority is the VLAN's"
    if mlnx_qos and dscp in mlnx_qos.get("dscp2prio", {}):
        return mlnx_qos["dscp2prio"][dscp], where + " -> priority %d (the port's DSCP map)" % mlnx_qos["dscp2prio"][dscp]
    return dscp >> 3, where + " -> priority %d (the default DSCP map)" % (dscp >> 3)
