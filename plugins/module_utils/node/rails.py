# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Which NIC each GPU's traffic leaves by (the node's rails), and where a
pod's CPUs sit against its GPUs, from the facts of node_facts.

NCCL sends each GPU's network traffic through the RDMA NIC nearest to it on
the PCIe tree. How near is said in the words of ``nvidia-smi topo -m``,
worked out here from the sysfs paths of the two PCI functions and their NUMA
nodes, so that no nvidia-smi is needed (a pod may have none):

    PIX   one PCIe bridge between them (two ports of one switch)
    PXB   several PCIe bridges, not the host bridge (one switch, or a root port)
    PHB   through the PCIe host bridge (the CPU's root complex)
    NODE  between host bridges of one NUMA node
    SYS   across the interconnect between the CPUs (another NUMA node)

A GPU whose nearest NIC is NODE or SYS away sends every byte across the CPU
first: GPUDirect RDMA then runs at a fraction of the NIC's rate, or NCCL
stops using it. Standard library only: shared by the modules and the in-pod
command mlinfra node-check.
"""

from __future__ import absolute_import, division, print_function

import re

from .facts import cpu_set, natural_key

__metaclass__ = type

DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")
# On the GPU's own switch or host bridge: GPUDirect RDMA at the NIC's rate.
NEAR = ("PIX", "PXB", "PHB")
_BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")


def pci_chain(pci_path):
    """The host bridge and the PCI functions from it down to the device, as
    a sysfs path (/sys/devices/pci0000:15/0000:15:01.0/.../0000:18:00.0)
    names them; [] when the path is not one."""
    parts = [part for part in (pci_path or "").split("/") if part]
    for index, part in enumerate(parts):
        if _HOST_BRIDGE_RE.match(part):
            chain = [part]
            for function in parts[index + 1:]:
                if not _BDF_RE.match(function):
                    break
                chain.append(function)
            return chain if len(chain) > 1 else []
    return []


def distance(a, b):
    """How far apart two PCI functions are (one of DISTANCES), each given as
    {pci_path, numa_node}; None when it cannot be told."""
    chain_a, chain_b = pci_chain(a.get("pci_path")), pci_chain(b.get("pci_path"))
    if not chain_a or not chain_b:
        return None
    if chain_a[0] != chain_b[0]:
        numa_a, numa_b = a.get("numa_node"), b.get("numa_node")
        if numa_a is None or numa_b is None:
            return None
        # -1: the kernel knows no NUMA nodes, so there is one.
        return "NODE" if numa_a == numa_b or -1 in (numa_a, numa_b) else "SYS"
    common = 0
    for one, other in zip(chain_a[:-1], chain_b[:-1]):
        if one != other:
            break
        common += 1
    if common == 1:
        return "PHB"
    # The bridges on the way: each side's below the shared one, and that one.
    bridges = (len(chain_a) - 1 - common) + (len(chain_b) - 1 - common) + 1
    return "PIX" if bridges == 1 else "PXB"


def _gpu_name(facts, gpu):
    """GPUn as nvidia-smi numbers them: by minor number, else PCI order."""
    gpus = facts["nvidia"]["gpus"]
    if gpu.get("minor") is not None and all(other.get("minor") is not None for other in gpus):
        return "GPU%d" % gpu["minor"]
    return "GPU%d" % sorted(other["pci"] for other in gpus).index(gpu["pci"])


def rdma_nics(facts, pod_interfaces=None):
    """The RDMA NICs as rails: a virtual function stands for its physical
    function's port (the PF and its VFs are one rail). ``pod_interfaces``:
    only the NICs behind these network interfaces (a pod's net1..netN)."""
    rails = {}
    for dev in facts["rdma"]["devices"]:
        if pod_interfaces is not None and not set(dev.get("netdevs") or ()) & set(pod_interfaces):
            continue
        rail = dev.get("physfn") or dev.get("pci") or dev["name"]
        # The PF itself names the rail where both are seen (the host).
        if rail not in rails or not dev.get("physfn"):
            rails[rail] = {"nic": dev["name"], "pci_path": dev.get("pci_path"), "numa_node": dev.get("numa_node"),
                           "netdevs": list(dev.get("netdevs") or ())}
    return sorted(rails.values(), key=lambda nic: natural_key(nic["nic"]))


def rail_table(facts, pod_interfaces=None):
    """Each GPU with its nearest NIC and how far it is; which NICs no GPU
    is near, and which NICs carry several GPUs while another NIC carries
    none (NCCL would pair them so)."""
    nics = rdma_nics(facts, pod_interfaces)
    gpus = sorted(facts["nvidia"]["gpus"], key=lambda gpu: gpu["pci"])
    # Each GPU's distance to each NIC, worked out once.
    away = dict((gpu["pci"], [(distance(gpu, nic), nic) for nic in nics]) for gpu in gpus)
    rails, unknown = [], []
    for gpu in gpus:
        name = _gpu_name(facts, gpu)
        ranked = sorted(away[gpu["pci"]], key=lambda pair: (
            DISTANCES.index(pair[0]) if pair[0] else len(DISTANCES), natural_key(pair[1]["nic"])))
        if not ranked or ranked[0][0] is None:
            unknown.append(name)
            continue
        nearest, nic = ranked[0]
        rails.append({"gpu": name, "gpu_pci": gpu["pci"], "gpu_numa": gpu.get("numa_node"), "nic": nic["nic"],
                      "netdevs": nic["netdevs"], "nic_numa": nic["numa_node"], "distance": nearest})
    used = dict((nic["nic"], [rail["gpu"] for rail in rails if rail["nic"] == nic["nic"]]) for nic in nics)
    free = [name for name, gpus in used.items() if not gpus]
    near_any = set(nic["nic"] for pairs in away.values() for how_far, nic in pairs if how_far in NEAR)
    return {
        "rails": rails,
        "unknown": unknown,
        "nics": [nic["nic"] for nic in nics],
        "shared": [{"nic": name, "gpus": gpus, "free": free} for name, gpus in used.items()
                   if len(gpus) > 1 and free],
        "nics_without_gpu": [nic["nic"] for nic in nics if nic["nic"] not in near_any],
    }


def pod_rail_table(facts):
    """rail_table of a pod's own NICs: those behind its interfaces other
    than lo and eth0 (the cluster network's), which are net1..netN."""
    interfaces = [name for name in facts["netdevs"] if name not in ("lo", "eth0")]
    return rail_table(facts, pod_interfaces=interfaces), interfaces


# Bits per byte: link rates are in Gb/s, bus bandwidth in GB/s.
BITS = 8


def rail_bandwidth(facts, table):
    """What the rails of ``table`` (a rail_table) carry out of the node:
    each NIC that is some GPU's nearest, at the rate of its active ports
    (NCCL sends each GPU's traffic through its nearest NIC, so a NIC no GPU
    is nearest to adds nothing, and a port down adds nothing). GB/s; None
    when there is no rail, or an active port's rate is unknown."""
    ports = dict((dev["name"], dev["ports"]) for dev in facts["rdma"]["devices"])
    nics = sorted(set(rail["nic"] for rail in table["rails"]), key=natural_key)
    rates = [port["rate_gbps"] for nic in nics for port in ports.get(nic, []) if port.get("state") == "ACTIVE"]
    if not nics or None in rates:
        return {"rails": nics, "gbytes_per_s": None}
    return {"rails": nics, "gbytes_per_s": sum(rates) / BITS}


def cpu_placement(facts):
    """The NUMA nodes of the CPUs this process may run on (a pod's cgroup
    cpuset) against those of its GPUs."""
    allowed = cpu_set(facts["cpus"].get("allowed_list"))
    numa = dict((int(node), cpu_set(cpulist)) for node, cpulist in facts["numa"]["nodes"].items() if cpulist)
    gpu_nodes = sorted(set(gpu["numa_node"] for gpu in facts["nvidia"]["gpus"]
                           if gpu.get("numa_node") is not None and gpu["numa_node"] >= 0))
    if not allowed or not numa:
        return {"known": False, "gpu_numa_nodes": gpu_nodes}
    cpu_nodes = dict((node, len(allowed & cpus)) for node, cpus in sorted(numa.items()) if allowed & cpus)
    return {
        "known": True,
        "allowed_list": facts["cpus"]["allowed_list"],
        "cpus_per_numa_node": cpu_nodes,
        "gpu_numa_nodes": gpu_nodes,
        # CPUs on a NUMA node none of its GPUs is on; GPU nodes without a CPU.
        "spans": sorted(node for node in cpu_nodes if gpu_nodes and node not in gpu_nodes),
        "misses": [node for node in gpu_nodes if node not in cpu_nodes],
    }
