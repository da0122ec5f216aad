# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""An inventory proposed from what a cluster shows (playbooks/discover.yml):
the GPU nodes and a label that selects them, GPUs per node, the network
mode, the RDMA NICs each pod gets, their MTU, and notes on what was found
(link layers, the NICs' NUMA nodes) and what could not be decided.

Read from: the Node objects (labels, allocatable GPUs and device-plugin
resources), the SR-IOV operator's SriovNetworkNodePolicies (the resource
each NIC's virtual functions are offered as, its physical function and
MTU), and the node checks' facts of each GPU node (RDMA devices, their
ports' link layers, netdevs and MTUs, NUMA nodes), each where there is one.
Every decision is made here; the playbook only gathers and writes.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from .common.quantity import parse_quantity
from .workload.node_selection import names_shown

GPU_RESOURCE = "nvidia.com/gpu"
# Labels that select GPU nodes, the most telling first: the GPU operator's
# feature discovery, Node Feature Discovery's RDMA and NVIDIA PCI labels.
PREFERRED_LABELS = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/rdma.capable",
                    "feature.node.kubernetes.io/pci-10de.present")
# Labels no selector should rest on: each node's own, or its state.
_NODE_OWN_LABELS = ("kubernetes.io/hostname", "mlinfra.io/rdma-verified", "mlinfra.io/rdma-verified-date")
# The RDMA shared device plugin's resources (k8s-rdma-shared-dev-plugin).
SHARED_RDMA_PREFIX = "rdma/"


def _allocatable(node):
    return (node.get("status") or {}).get("allocatable") or {}


def _count(value):
    amount = parse_quantity(value)
    return int(amount) if amount is not None else 0


def gpu_nodes(nodes):
    """The names of the nodes that offer GPUs, sorted."""
    return sorted(node["metadata"]["name"] for node in nodes or [] if _count(_allocatable(node).get(GPU_RESOURCE)) > 0)


def selecting_label(nodes, chosen):
    """A ``key=value`` every node of ``chosen`` carries and no other node
    does (the preferred ones first, then any other, sorted), or None."""
    labels = dict((node["metadata"]["name"], node["metadata"].get("labels") or {}) for node in nodes or [])
    if not chosen:
        return None
    first = labels[chosen[0]]
    common = [(key, value) for key, value in sorted(first.items()) if key not in _NODE_OWN_LABELS
              and all(labels[name].get(key) == value for name in chosen)]
    others = [name for name in labels if name not in chosen]
    selecting = [(key, value) for key, value in common if all(labels[name].get(key) != value for name in others)]
    ranked = sorted(selecting, key=lambda item: (PREFERRED_LABELS.index(item[0]) if item[0] in PREFERRED_LABELS
                                                 else len(PREFERRED_LABELS), item[0]))
    return "%s=%s" % ranked[0] if ranked else None


def _pf_name(selector_name):
    # nicSelector.pfNames may name VFs of a PF: "eno5np0#0-7".
    return str(selector_name).split("#", 1)[0]


def _policy_nics(policies, resources):
    """{resource: {pf, mtu, is_rdma}} of the policies whose resource the
    nodes offer (matched by the name after the prefix: the operator adds
    its RESOURCE_PREFIX)."""
    by_name = dict((resource.split("/", 1)[-1], resource) for resource in resources)
    found = {}
    for policy in policies or []:
        spec = policy.get("spec") or {}
        resource = by_name.get(spec.get("resourceName"))
        if resource is None:
            continue
        pfs = [_pf_name(name) for name in (spec.get("nicSelector") or {}).get("pfNames") or []]
        found[resource] = {"pf": pfs[0] if pfs else None, "mtu": spec.get("mtu"), "is_rdma": spec.get("isRdma")}
    return found


def _common_resources(nodes, names):
    """The device-plugin resources (a '/' in the name, GPUs aside) every
    one of ``names`` offers at least one of."""
    by_name = dict((node["metadata"]["name"], _allocatable(node)) for node in nodes)
    sets = [set(key for key, value in by_name[name].items() if "/" in key and key != GPU_RESOURCE
                and _count(value) > 0) for name in names]
    return sorted(set.intersection(*sets)) if sets else []


def _rdma_facts(facts):
    """Per node the RDMA devices of its node checks' facts: name, NUMA
    node, link layers, and the MTUs of their netdevs."""
    found = {}
    for node, node_facts in sorted((facts or {}).items()):
        netdevs = node_facts.get("netdevs") or {}
        devices = []
        for device in (node_facts.get("rdma") or {}).get("devices") or []:
            devices.append({"name": device.get("name"), "numa_node": device.get("numa_node"),
                            "link_layers": sorted(set(port.get("link_layer") for port in device.get("ports") or []
                                                      if port.get("link_layer"))),
                            "mtus": sorted(set((netdevs.get(netdev) or {}).get("mtu") for netdev in
                                               device.get("netdevs") or [] if (netdevs.get(netdev) or {}).get("mtu")))})
        found[node] = devices
    return found


def propose(nodes, policies=None, facts=None, platform="kubernetes"):
    """``{settings, notes, undecided, gpu_nodes}``: the inventory settings the cluster
    suggests (in the order a group_vars file lists them), a note per
    setting on what it rests on, and what could not be decided (each with
    the variable to set by hand). ``policies``: the SriovNetworkNodePolicies
    (None when the SR-IOV operator's API is not there); ``facts``: node name
    to the node checks' facts. ``gpu_nodes``: the nodes that offer GPUs."""
    nodes = list(nodes or [])
    settings, notes, undecided = {"cluster_platform": platform}, {}, []
    chosen = gpu_nodes(nodes)
    if not chosen:
        undecided.append("cluster_gpu_nodes: no node offers nvidia.com/gpu; is the GPU operator (or the NVIDIA device "
                         "plugin) installed and its pods Running?")
        return {"settings": settings, "notes": notes, "undecided": undecided, "gpu_nodes": chosen}
    others = len(nodes) - len(chosen)
    label = selecting_label(nodes, chosen)
    if label:
        settings["cluster_gpu_node_selector"] = label
        notes["cluster_gpu_node_selector"] = "selects the %d GPU node(s) (%s) and none of the %d other(s)" % (
            len(chosen), names_shown(chosen), others)
    else:
        settings["cluster_gpu_nodes"] = chosen
        notes["cluster_gpu_nodes"] = "no label sets the GPU nodes apart from the %d other node(s); named instead" % others
    gpus = sorted(set(_count(_allocatable(node).get(GPU_RESOURCE)) for node in nodes
                      if node["metadata"]["name"] in chosen))
    settings["cluster_gpus_per_node"] = gpus[0]
    notes["cluster_gpus_per_node"] = "every GPU node offers %d" % gpus[0] if len(gpus) == 1 else \
        "the GPU nodes offer %s; the fewest, so that a pod fits on each" % " or ".join(map(str, gpus))

    resources = _common_resources(nodes, chosen)
    sriov = _policy_nics(policies, resources)
    shared = [resource for resource in resources if resource.startswith(SHARED_RDMA_PREFIX)]
    rdma_devices = _rdma_facts(facts)
    has_devices = any(rdma_devices.values())
    if sriov:
        settings["cluster_network_mode"] = "rdma"
        settings["cluster_rdma_network_type"] = "sriov"
        nics = []
        for index, resource in enumerate(sorted(sriov, key=lambda name: (sriov[name]["pf"] or name, name))):
            pf = sriov[resource]["pf"]
            nic = {"name": "%s-network" % (pf or resource.split("/", 1)[-1]), "resource": resource}
            if pf:
                nic["pf"] = pf
            else:
                undecided.append("cluster_rdma_nics: the policy of %s names no physical function (nicSelector.pfNames); "
                                 "add pf to its entry" % resource)
            nic["netdev"] = "net%d" % (index + 1)
            nics.append(nic)
        settings["cluster_rdma_nics"] = nics
        notes["cluster_rdma_nics"] = "from the SR-IOV operator's policies whose resources every GPU node offers; " \
                                     "netdev: Multus names the attachments net1, net2, ... in this order"
        mtus = sorted(set(entry["mtu"] for entry in sriov.values() if entry["mtu"]))
        if mtus:
            settings["cluster_rdma_mtu"] = mtus[0]
            notes["cluster_rdma_mtu"] = "the policies' mtu" + (" (they differ: %s; the lowest)" % mtus if len(mtus) > 1
                                                               else "")
    elif shared:
        settings["cluster_network_mode"] = "rdma"
        settings["cluster_rdma_shared_resource"] = shared[0]
        notes["cluster_rdma_shared_resource"] = "the RDMA shared device plugin's resource every GPU node offers"
        undecided.append("cluster_rdma_network_type: the nodes offer %s but no SR-IOV policy; choose host-device, "
                         "macvlan or ipoib and list the NICs in cluster_rdma_nics" % shared[0])
    elif has_devices:
        settings["cluster_network_mode"] = "rdma"
        settings["cluster_host_network"] = True
        settings["cluster_rdma_nics"] = []
        notes["cluster_host_network"] = "the nodes have RDMA devices but offer no RDMA resource to pods: only the " \
                                        "host network reaches them"
    else:
        settings["cluster_network_mode"] = "tcp"
        settings["cluster_rdma_nics"] = []
        notes["cluster_network_mode"] = "no RDMA resource offered and no RDMA device seen" if facts else \
            "no RDMA resource offered (the node checks did not run: run discover.yml with its probes to look for " \
            "RDMA devices)"
    if has_devices and "cluster_rdma_mtu" not in settings and settings["cluster_network_mode"] == "rdma":
        mtus = sorted(set(mtu for devices in rdma_devices.values() for device in devices for mtu in device["mtus"]))
        if mtus:
            settings["cluster_rdma_mtu"] = mtus[0]
            notes["cluster_rdma_mtu"] = "the MTU of the RDMA devices' interfaces" + (
                " (they differ: %s; the lowest)" % mtus if len(mtus) > 1 else "")
    if has_devices:
        layers = sorted(set(layer for devices in rdma_devices.values() for device in devices
                            for layer in device["link_layers"]))
        notes["link_layers"] = ", ".join(layers) + (" (RoCE)" if layers == ["Ethernet"] else "")
        placement = {}
        for node, devices in rdma_devices.items():
            for device in devices:
                placement.setdefault(device["numa_node"], set()).add(device["name"])
        notes["numa"] = "; ".join("node %s: %s" % (numa, ", ".join(sorted(names)))
                                  for numa, names in sorted(placement.items(), key=lambda item: str(item[0])))
        unseen = [node for node in chosen if node not in rdma_devices]
        if unseen:
            notes["not_probed"] = ", ".join(unseen)
    return {"settings": settings, "notes": notes, "undecided": undecided, "gpu_nodes": chosen}


def group_vars_text(proposal, cluster_name, when):
    """The proposal as a group_vars file: each setting with its note above
    it, what was found, and what to decide by hand. Values are written as
    JSON, which YAML reads as they are."""
    lines = ["---", "# Proposed by playbooks/discover.yml from cluster %s on %s." % (cluster_name, when),
             "# Read every line before use; the settings it could not decide are listed at the end."]
    for name, value in proposal["settings"].items():
        if name in proposal["notes"]:
            lines.append("# " + proposal["notes"][name])
        if isinstance(value, list) and value:
            lines.append("%s:" % name)
            lines.extend("  - %s" % json.dumps(item, sort_keys=False) for item in value)
        else:
            lines.append("%s: %s" % (name, json.dumps(value)))
    found = [(name, note) for name, note in proposal["notes"].items() if name not in proposal["settings"]]
    if found:
        lines.append("# Found:")
        lines.extend("#   %s: %s" % item for item in found)
    if proposal["undecided"]:
        lines.append("# Not decided (set by hand):")
        lines.extend("#   %s" % item for item in proposal["undecided"])
    return "\n".join(lines) + "\n"
