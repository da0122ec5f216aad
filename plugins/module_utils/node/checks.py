# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Verdicts on the facts of one GPU node (see node_facts).

Each check returns ``{name, status, message, remediation, data}`` with a
status of ``pass``, ``warn``, ``fail`` or ``skip``. The mode (``rdma`` or
``tcp``) and the expectations decide how strict a check is: a port down is a
failure where training needs RDMA and a warning where it runs over TCP.

Standard library only: shared by the ``rdma_node_check`` module and the
in-pod command ``mlinfra node-check``.
"""

from __future__ import absolute_import, division, print_function

from .facts import roce_v2_ipv4_gids
from .rails import NEAR, cpu_placement, pod_rail_table, rail_table
from ..fabric.roce_qos import nccl_priority
from ..common.status import FAIL, PASS, SKIP, WARN, check_result

__metaclass__ = type

STATUSES = (PASS, WARN, FAIL, SKIP)
MODES = ("rdma", "tcp")

# The order the checks run and are reported in.
CHECK_NAMES = (
    "iommu_passthrough",
    "mlx5_driver",
    "gpudirect_rdma",
    "rdma_devices",
    "rdma_link",
    "roce_gid",
    "memlock",
    "gpu_count",
    "nvlink_topology",
    "pcie_acs",
    "mtu",
    "roce_lossless",
    "gpu_nic_rails",
    "kubelet_topology",
)
# Checks of what a training pod itself sees (run with in_pod=True): the
# node can be fine and the pod still lack the capability or the devices.
POD_CHECK_NAMES = (
    "ipc_lock",
    "dev_infiniband",
    "pod_rails",
    "cpu_placement",
)


class Expectations:
    """What a node must show. ``None`` means "do not check"."""

    def __init__(self, mode="rdma", gpus=None, rdma_devices=None, require_gpudirect=True,
                 min_mtu=9000, min_link_rate_gbps=None, min_gpus=None, nccl_ib_tc=None):
        if mode not in MODES:
            raise ValueError("mode must be one of %s, got %r" % (", ".join(MODES), mode))
        if gpus is not None and min_gpus is not None:
            raise ValueError("expect either an exact GPU count or a minimum, not both")
        self.mode = mode
        # A pod sees exactly the GPUs it asked for (gpus); a node may hold
        # more GPUs than one pod asks for (min_gpus).
        self.gpus = gpus
        self.min_gpus = min_gpus
        self.rdma_devices = rdma_devices
        self.require_gpudirect = require_gpudirect
        self.min_mtu = min_mtu
        self.min_link_rate_gbps = min_link_rate_gbps
        # The traffic class NCCL's RoCE packets carry (NCCL_IB_TC; None: NCCL's default, 0).
        self.nccl_ib_tc = nccl_ib_tc

    @property
    def rdma(self):
        return self.mode == "rdma"

    def severity(self):
        """How a missing RDMA prerequisite counts in this mode."""
        return FAIL if self.rdma else WARN


def _not_applicable(name, message, data=None):
    return check_result(name, SKIP, message, data=data, not_applicable=True)


def _rdma_ports(facts):
    for dev in facts["rdma"]["devices"]:
        for port in dev["ports"]:
            yield dev, port


def check_iommu_passthrough(facts, expect):
    iommu = facts["iommu"]
    data = {"cmdline": iommu["cmdline"], "groups": iommu["groups"], "group_types": iommu["group_types"]}
    translating = dict((kind, count) for kind, count in iommu["group_types"].items() if kind != "identity")
    passthrough_arg = iommu["cmdline"].get("iommu") == "pt" or iommu["cmdline"].get("iommu.passthrough") in ("1", "on", "y")
    fix = ("Add the kernel arguments iommu=pt and intel_iommu=on (Intel) or amd_iommu=on (AMD): on OpenShift "
           "a MachineConfig with spec.kernelArguments for the GPU pool, elsewhere the boot loader; the nodes reboot.")
    if iommu["groups"] == 0:
        # No IOMMU at all: DMA is untranslated, which is what passthrough
        # gives GPUDirect. (Only vfio-pci virtual functions would need one.)
        return check_result("iommu_passthrough", PASS,
                            "IOMMU off (no IOMMU groups): DMA is not translated", data=data)
    if translating:
        return check_result("iommu_passthrough", expect.severity(),
                            "IOMMU translates DMA (group types %s%s): GPUDirect RDMA peer-to-peer traffic is remapped "
                            "or blocked" % (", ".join("%s x%d" % item for item in sorted(translating.items())),
                                            "" if passthrough_arg else "; no iommu=pt on the kernel command line"),
                            fix, data)
    if iommu["group_types"]:
        return check_result("iommu_passthrough", PASS,
                            "IOMMU in passthrough mode (%d groups, all identity)" % iommu["groups"], data=data)
    # Older kernels have no group type file: fall back to the command line.
    if passthrough_arg:
        return check_result("iommu_passthrough", PASS,
                            "iommu=pt on the kernel command line (%d IOMMU groups)" % iommu["groups"], data=data)
    return check_result("iommu_passthrough", expect.severity(),
                        "IOMMU on (%d groups) without iommu=pt on the kernel command line" % iommu["groups"], fix, data)


def check_mlx5_driver(facts, expect):
    modules = facts["modules"]["modules"]
    core, ib = modules["mlx5_core"], modules["mlx5_ib"]
    version = core["version"] or ib["version"]
    data = {"mlx5_core": core["loaded"], "mlx5_ib": ib["loaded"], "driver_version": version,
            "ofed_version": facts.get("ofed_version"), "kernel": facts["kernel"]["release"]}
    source = ("driver %s" % version) if version else "in-box kernel driver %s" % (facts["kernel"]["release"] or "")
    if facts.get("ofed_version"):
        source += ", %s" % facts["ofed_version"]
    missing = [name for name, mod in (("mlx5_core", core), ("mlx5_ib", ib)) if not mod["loaded"]]
    if not missing:
        return check_result("mlx5_driver", PASS, "mlx5_core and mlx5_ib loaded (%s)" % source.strip(), data=data)
    if not facts["modules"]["proc_modules_readable"] and not any(m["loaded"] for m in (core, ib)):
        return check_result("mlx5_driver", SKIP if not expect.rdma else FAIL,
                            "cannot tell: /proc/modules is not readable and /sys/module shows no mlx5 module",
                            "Run the check with the host's /proc and /sys mounted (root option).", data)
    fix = ("Load the driver (modprobe -a %s) or install the NVIDIA network operator / DOCA-OFED driver "
           "container on the node." % " ".join(missing))
    if not expect.rdma:
        return check_result("mlx5_driver", PASS, "%s not loaded; not needed in tcp mode" % ", ".join(missing), data=data)
    return check_result("mlx5_driver", FAIL, "%s not loaded" % ", ".join(missing), fix, data)


def check_gpudirect_rdma(facts, expect):
    data = facts["gpudirect"]
    peermem, dmabuf, dmabuf_reason = data["peermem_modules"], data["dmabuf"], data["dmabuf_reason"]
    if not expect.rdma:
        return _not_applicable("gpudirect_rdma", "not used in tcp mode", data=data)
    if peermem:
        return check_result("gpudirect_rdma", PASS, "%s loaded" % peermem[0], data=data)
    if dmabuf:
        return check_result("gpudirect_rdma", PASS, "DMA-BUF capable (%s); no peermem module needed" % dmabuf_reason,
                            data=data)
    if dmabuf is None:
        # Not measured is never a pass, nor a fail on a guess.
        return check_result("gpudirect_rdma", WARN,
                            "GPUDirect RDMA unknown: nvidia_peermem is not loaded and %s" % dmabuf_reason,
                            "Check the node's kernel release (uname -r: DMA-BUF needs 5.12 or later with NVIDIA's open "
                            "kernel modules), or load nvidia_peermem (GPU operator: driver.rdma.enabled=true).", data)
    status = FAIL if expect.require_gpudirect else WARN
    return check_result("gpudirect_rdma", status,
                        "no GPUDirect RDMA: nvidia_peermem is not loaded and DMA-BUF is not available (%s)" % dmabuf_reason,
                        "Load nvidia_peermem (GPU operator: driver.rdma.enabled=true in the ClusterPolicy), or move to "
                        "NVIDIA's open kernel modules (driver.useOpenKernelModules=true) for DMA-BUF.", data)


def check_rdma_devices(facts, expect):
    devices = facts["rdma"]["devices"]
    data = {"devices": [dict((key, dev[key]) for key in ("name", "netdevs", "pci", "numa_node", "hca_type", "fw_ver"))
                        for dev in devices]}
    names = ", ".join("%s (%s, %s, NUMA %s)" % (d["name"], "/".join(d["netdevs"]) or "no netdev", d["pci"] or "?",
                                                d["numa_node"]) for d in devices)
    if not expect.rdma:
        if devices:
            return check_result("rdma_devices", PASS, "%d RDMA device(s), not used in tcp mode: %s" % (len(devices), names),
                                data=data)
        return _not_applicable("rdma_devices", "no RDMA devices; not needed in tcp mode", data=data)
    wanted = expect.rdma_devices if expect.rdma_devices is not None else 1
    if not devices:
        mlx5 = facts["modules"]["modules"]["mlx5_core"]["loaded"]
        return check_result("rdma_devices", FAIL,
                            "no RDMA devices under /sys/class/infiniband%s" %
                            (" although mlx5_core is loaded" if mlx5 else ""),
                            "Check that the SR-IOV policy created virtual functions with isRdma: true and that the "
                            "pod requests the RDMA resources; on the node, that mlx5_ib is loaded.", data)
    if len(devices) < wanted:
        return check_result("rdma_devices", FAIL, "%d RDMA device(s), expected %d: %s" % (len(devices), wanted, names),
                            "Check the SR-IOV policy's numVfs and the pod's RDMA resource requests.", data)
    return check_result("rdma_devices", PASS, "%d RDMA device(s): %s" % (len(devices), names), data=data)


def check_rdma_link(facts, expect):
    ports = list(_rdma_ports(facts))
    data = {"ports": [{"device": dev["name"], "port": port["port"], "state": port["state"],
                       "phys_state": port["phys_state"], "rate": port["rate"], "rate_gbps": port["rate_gbps"],
                       "link_layer": port["link_layer"]} for dev, port in ports]}
    if not ports:
        return _not_applicable("rdma_link", "no RDMA ports", data=data)
    down = ["%s/%s %s (%s)" % (dev["name"], port["port"], port["state"] or "state unknown",
                               port["phys_state"] or "physical state unknown")
            for dev, port in ports if port["state"] != "ACTIVE" or port["phys_state"] != "LinkUp"]
    slow = []
    if expect.min_link_rate_gbps:
        slow = ["%s/%s at %s" % (dev["name"], port["port"], port["rate"]) for dev, port in ports
                if port["state"] == "ACTIVE" and (port["rate_gbps"] or 0) < expect.min_link_rate_gbps]
    layers = sorted(set(port["link_layer"] or "unknown" for dev, port in ports))
    if down:
        return check_result("rdma_link", expect.severity(), "port(s) not active: %s" % "; ".join(down),
                            "Check the cable and switch port of each NIC named (ibstat / ethtool on the node), and the "
                            "subnet manager on InfiniBand fabrics.", data)
    if slow:
        return check_result("rdma_link", expect.severity(),
                            "port(s) below %s Gb/s: %s" % (expect.min_link_rate_gbps, "; ".join(slow)),
                            "A link trained at a lower rate: reseat or replace the cable, check the switch port speed.", data)
    rates = sorted(set(port["rate"] for dev, port in ports if port["rate"]))
    return check_result("rdma_link", PASS, "%d port(s) active, %s, %s" % (len(ports), "/".join(layers), ", ".join(rates)),
                        data=data)


def check_roce_gid(facts, expect):
    roce = [(dev, port) for dev, port in _rdma_ports(facts) if port["link_layer"] == "Ethernet"]
    if not roce:
        return _not_applicable("roce_gid", "no RoCE (Ethernet link layer) ports")
    per_device, missing = [], []
    for dev, port in roce:
        entries = roce_v2_ipv4_gids(port)
        if entries:
            first = entries[0]
            per_device.append({"device": dev["name"], "port": port["port"], "netdev": first["ndev"],
                               "index": first["index"], "gid": first["gid"], "ipv4": first["ipv4"]})
        else:
            missing.append("%s/%s" % (dev["name"], port["port"]))
    indices = sorted(set(entry["index"] for entry in per_device))
    data = {"per_device": per_device, "indices": indices, "consistent": len(indices) == 1}
    if missing:
        return check_result("roce_gid", expect.severity(),
                            "no RoCE v2 GID with an IPv4 address on %s" % ", ".join(missing),
                            "Give each RDMA netdev an IPv4 address (the SR-IOV network's IPAM) and keep RoCE v2 enabled "
                            "(cma_roce_mode); the GID table fills in when the address is set.", data)
    summary = ", ".join("%s(%s)=%d" % (e["device"], e["netdev"], e["index"]) for e in per_device)
    if len(indices) > 1:
        return check_result("roce_gid", PASS,
                            "RoCE v2 GIDs at different indices per device: %s; leave NCCL_IB_GID_INDEX unset" % summary,
                            data=data)
    return check_result("roce_gid", PASS, "RoCE v2 GID at index %d on every device: %s" % (indices[0], summary), data=data)


def check_memlock(facts, expect):
    memlock = facts["memlock"]
    data = dict(memlock)
    if memlock["soft"] is None:
        return check_result("memlock", SKIP, "max locked memory unknown: /proc/self/limits is missing, unreadable or "
                            "has no valid 'Max locked memory' line", data=data)
    if memlock["soft"] == "unlimited":
        return check_result("memlock", PASS, "max locked memory unlimited", data=data)
    message = "max locked memory is %s %s (soft), %s (hard); RDMA registers GPU and host buffers" % (
        memlock["soft"], memlock["unit"], memlock["hard"])
    return check_result("memlock", expect.severity(), message,
                        "Run the pod with the IPC_LOCK capability (or privileged) and raise the limit before launch "
                        "(prlimit --memlock=unlimited:unlimited, or LimitMEMLOCK=infinity for the container runtime).",
                        data)


def check_gpu_count(facts, expect):
    gpus = facts["nvidia"]["gpus"]
    data = {"count": len(gpus), "models": sorted(set(g["model"] for g in gpus if g["model"])),
            "driver_version": facts["nvidia"]["driver_version"], "gpus": gpus}
    missing = ("Check the GPU operator's driver pod on the node and nvidia-smi; a GPU missing from "
               "/proc/driver/nvidia/gpus fell off the bus or is excluded.")
    if expect.gpus is not None and len(gpus) != expect.gpus:
        return check_result("gpu_count", FAIL, "%d GPU(s), expected %d" % (len(gpus), expect.gpus), missing, data)
    if expect.min_gpus is not None and len(gpus) < expect.min_gpus:
        return check_result("gpu_count", FAIL, "%d GPU(s), expected at least %d" % (len(gpus), expect.min_gpus),
                            missing, data)
    if not gpus:
        wanted = expect.gpus or expect.min_gpus
        if facts["nvidia"]["driver_version"] is None:
            return check_result("gpu_count", FAIL if wanted else SKIP,
                                "no NVIDIA driver loaded (/proc/driver/nvidia absent)",
                                "Install the NVIDIA GPU operator or driver on the node." if wanted else "", data)
        return check_result("gpu_count", FAIL, "NVIDIA driver %s loaded but no GPU listed" % facts["nvidia"]["driver_version"],
                            "Check dmesg on the node for NVRM errors.", data)
    summary = "%d GPU(s): %s, driver %s" % (len(gpus), ", ".join(data["models"]), facts["nvidia"]["driver_version"])
    return check_result("gpu_count", PASS, summary, data=data)


def check_nvlink_topology(facts, expect):
    topo = facts["topology"]
    if not topo.get("available"):
        return check_result("nvlink_topology", SKIP, topo.get("reason", "topology not gathered"))
    links = topo["gpu_links"]
    pairs = {}
    for gpu, peers in links.items():
        for peer, link in peers.items():
            pairs[tuple(sorted((gpu, peer), key=lambda n: int(n[3:])))] = link
    data = {"gpu_links": links, "nic_links": topo["nic_links"], "nic_legend": topo["nic_legend"],
            "affinity": topo["affinity"]}
    if not pairs:
        return check_result("nvlink_topology", PASS if len(topo["gpus"]) <= 1 else WARN,
                            "%d GPU(s), no GPU pairs" % len(topo["gpus"]), data=data)
    not_nvlink = ["%s-%s %s" % (a, b, link) for (a, b), link in sorted(pairs.items()) if not link.startswith("NV")]
    kinds = sorted(set(pairs.values()))
    if not_nvlink:
        return check_result("nvlink_topology", WARN,
                            "GPU pairs without NVLink (peer traffic crosses PCIe): %s" % ", ".join(not_nvlink),
                            "Expected on PCIe GPUs; on SXM systems check the NVSwitch fabric manager "
                            "(nvidia-fabricmanager) and nvidia-smi nvlink --status.", data)
    return check_result("nvlink_topology", PASS, "all %d GPU pair(s) on NVLink (%s)" % (len(pairs), ", ".join(kinds)),
                        data=data)


def check_pcie_acs(facts, expect):
    acs = facts["pci_acs"]
    bridges = acs["bridges"]
    if not bridges:
        return check_result("pcie_acs", SKIP, "no PCI bridges above the GPUs and NICs (or none visible)", data=acs)
    unreadable = sorted(bdf for bdf, state in bridges.items() if not state.get("readable"))
    redirecting = sorted(bdf for bdf, state in bridges.items()
                         if state.get("acs") and (state["redirect"]["request_redirect"] or
                                                  state["redirect"]["completion_redirect"]))
    if redirecting:
        return check_result("pcie_acs", expect.severity(),
                            "ACS redirects peer-to-peer requests on bridge(s) %s: GPU-NIC and GPU-GPU traffic goes "
                            "through the root complex" % ", ".join(redirecting),
                            "Disable ACS on these bridges (BIOS setting, or setpci on each bridge at boot), or keep "
                            "IOMMU passthrough so the redirect costs less.", acs)
    if unreadable and len(unreadable) == len(bridges):
        return check_result("pcie_acs", SKIP, "PCI config space of the bridges not readable: %s" %
                            bridges[unreadable[0]].get("reason"), data=acs)
    message = "no ACS redirect on %d bridge(s)" % (len(bridges) - len(unreadable))
    if unreadable:
        message += "; %d bridge(s) not readable" % len(unreadable)
    return check_result("pcie_acs", PASS, message, data=acs)


def check_mtu(facts, expect):
    netdevs = facts["netdevs"]
    roce_netdevs = []
    for dev, port in _rdma_ports(facts):
        if port["link_layer"] == "Ethernet":
            roce_netdevs.extend(name for name in dev["netdevs"] if name not in roce_netdevs)
    if not roce_netdevs:
        return _not_applicable("mtu", "no RoCE netdevs (InfiniBand MTU is negotiated by the fabric)")
    mtus = dict((name, netdevs.get(name, {}).get("mtu")) for name in roce_netdevs)
    data = {"mtu": mtus, "min_mtu": expect.min_mtu}
    small = ["%s=%s" % (name, mtu) for name, mtu in sorted(mtus.items()) if mtu is None or mtu < (expect.min_mtu or 0)]
    if small:
        return check_result("mtu", WARN, "RoCE netdev MTU below %s: %s" % (expect.min_mtu, ", ".join(small)),
                            "Set mtu: %s in the SR-IOV policy (and on the switch ports)." % expect.min_mtu, data)
    return check_result("mtu", PASS, "RoCE netdev MTU %s" % ", ".join("%s=%s" % item for item in sorted(mtus.items())),
                        data=data)


LOSSLESS_FIX = ("Make NCCL's priority lossless end to end: PFC on it (mlnx_qos -i <netdev> --pfc, and on the switch "
                "ports), ECN on it (/sys/class/net/<netdev>/ecn/roce_np/enable/<prio> and roce_rp, and ECN marking "
                "on the switches), or set NCCL_IB_TC (cluster_nccl_env_overrides) to the traffic class of the "
                "priority that is. Watch rx_prio<N>_pause and tx_prio<N>_pause (ethtool -S), np_cnp_sent, "
                "rp_cnp_handled and out_of_sequence (the verify report's port counters).")


def check_roce_lossless(facts, expect):
    qos = facts.get("roce_qos") or {}
    if not qos:
        return _not_applicable("roce_lossless", "no RoCE netdevs to check (InfiniBand links are lossless by design)")
    if not expect.rdma:
        return _not_applicable("roce_lossless", "tcp mode: NCCL does not use RoCE")
    problems, unknown, fine = [], [], []
    for netdev, port in sorted(qos.items()):
        priority, how = nccl_priority(expect.nccl_ib_tc, port["mlnx_qos"])
        if priority is None:
            unknown.append("%s: %s" % (netdev, how))
            continue
        pfc = (port["mlnx_qos"] or {}).get("pfc")
        ecn = dict((kind, port["ecn"][kind].get(priority)) for kind in ("roce_np", "roce_rp") if kind in port["ecn"])
        off = ["PFC"] if pfc is not None and not pfc[priority] else []
        off += ["ECN %s" % kind for kind, enabled in sorted(ecn.items()) if enabled is False]
        missing = ["PFC (%s)" % port["mlnx_qos_source"]] if pfc is None else []
        missing += ["ECN %s" % kind for kind in ("roce_np", "roce_rp") if ecn.get(kind) is None]
        if off:
            problems.append("%s priority %d: %s off (%s)" % (netdev, priority, ", ".join(off), how))
        if missing:
            unknown.append("%s priority %d: %s not readable" % (netdev, priority, ", ".join(missing)))
        if not off and not missing:
            fine.append(netdev)
    data = {"ports": qos, "nccl_ib_tc": expect.nccl_ib_tc}
    if problems:
        return check_result("roce_lossless", WARN, "NCCL's RoCE priority is not lossless: %s" % "; ".join(problems),
                            LOSSLESS_FIX, data)
    if unknown:
        return check_result("roce_lossless", SKIP, "lossless settings not known: %s" % "; ".join(unknown), data=data)
    return check_result("roce_lossless", PASS, "PFC and ECN on NCCL's priority on %s" % ", ".join(fine), data=data)


def check_ipc_lock(facts, expect):
    caps = facts["capabilities"]
    data = dict(caps)
    if caps["ipc_lock"] is None:
        return check_result("ipc_lock", SKIP, "effective capabilities unknown: no CapEff line in /proc/self/status",
                            data=data)
    if caps["ipc_lock"]:
        return check_result("ipc_lock", PASS, "IPC_LOCK is an effective capability (CapEff %s)" % caps["effective"],
                            data=data)
    remedy = ("Add IPC_LOCK to the container's securityContext.capabilities (cluster_security_mode: ipc_lock), "
              "or run it privileged; on OpenShift the pod's SCC must allow the capability.")
    if facts["memlock"]["soft"] == "unlimited":
        return check_result("ipc_lock", WARN, "IPC_LOCK is not an effective capability (CapEff %s); memlock is "
                            "unlimited, so registration works until a process lowers its limit" % caps["effective"],
                            remedy, data)
    return check_result("ipc_lock", expect.severity(), "IPC_LOCK is not an effective capability (CapEff %s) and "
                        "memlock is limited: RDMA memory registration fails" % caps["effective"], remedy, data)


def check_dev_infiniband(facts, expect):
    dev = facts["dev_infiniband"]
    data = dict(dev)
    uverbs = [name for name in dev["entries"] if name.startswith("uverbs")]
    if not expect.rdma and not dev["present"]:
        return _not_applicable("dev_infiniband", "/dev/infiniband absent; not needed in tcp mode", data=data)
    if not expect.rdma:
        return check_result("dev_infiniband", PASS,
                            "/dev/infiniband %s; not needed in tcp mode" % ("present" if dev["present"] else "absent"),
                            data=data)
    remedy = ("Request the RDMA resources of cluster_rdma_nics in the pod (the device plugin adds their "
              "/dev/infiniband entries); with host networking, mount the host's /dev/infiniband.")
    if not dev["present"]:
        return check_result("dev_infiniband", FAIL, "/dev/infiniband is missing: verbs cannot open any RDMA device",
                            remedy, data)
    if not uverbs:
        return check_result("dev_infiniband", FAIL, "/dev/infiniband holds no uverbs device (%s)"
                            % (", ".join(dev["entries"]) or "empty"), remedy, data)
    return check_result("dev_infiniband", PASS, "/dev/infiniband: %s" % ", ".join(dev["entries"]), data=data)


def _rails_result(name, table, remedy_far):
    """The verdict on a rail table: every finding costs speed, not
    correctness, so the worst is a warning."""
    rails = table["rails"]
    data = dict(table)
    if not rails:
        return check_result(name, SKIP, "no GPU could be placed against a NIC (%s)" % (
            "PCI paths of %s not readable" % ", ".join(table["unknown"]) if table["unknown"] else "no GPUs"), data=data)
    findings = ["%s's nearest NIC %s is %s away (%s)" % (
        rail["gpu"], rail["nic"], rail["distance"],
        "another NUMA node" if rail["distance"] == "SYS" else "across host bridges")
        for rail in rails if rail["distance"] not in NEAR]
    findings += ["%s carry their traffic through one NIC, %s, while %s carries none"
                 % (" and ".join(shared["gpus"]), shared["nic"], ", ".join(shared["free"])) for shared in table["shared"]]
    table_text = ", ".join("%s-%s %s" % (rail["gpu"], rail["nic"], rail["distance"]) for rail in rails)
    if findings:
        return check_result(name, WARN, "; ".join(findings) + " (rails: %s)" % table_text, remedy_far, data)
    message = "every GPU has a NIC on its own PCIe switch or host bridge: %s" % table_text
    if table["nics_without_gpu"]:
        return check_result(name, WARN, "%s; no GPU is near %s" % (message, ", ".join(table["nics_without_gpu"])),
                            "A NIC no GPU is near carries GPU traffic across the CPU if NCCL uses it: leave it out of "
                            "NCCL_IB_HCA (cluster_rdma_nics) unless it serves storage or management only.", data)
    return check_result(name, PASS, message, data=data)


def check_gpu_nic_rails(facts, expect):
    if not facts["rdma"]["devices"]:
        return _not_applicable("gpu_nic_rails", "no RDMA NICs to pair the GPUs with")
    return _rails_result("gpu_nic_rails", rail_table(facts),
                         "Put each GPU's NIC in a PCIe slot on the GPU's switch (the server's rail layout), or "
                         "use the NICs that are (cluster_rdma_nics); a GPU whose NIC is across the CPU sends every "
                         "byte through host memory.")


def check_pod_rails(facts, expect):
    """The GPUs a pod was given against the NICs it was given: the node may
    have a NIC beside every GPU and the pod still get the wrong pairs."""
    if not expect.rdma:
        return _not_applicable("pod_rails", "tcp mode: no RDMA NICs in the pod")
    table, interfaces = pod_rail_table(facts)
    if not table["nics"]:
        return check_result("pod_rails", SKIP, "the pod has no RDMA NICs behind its interfaces (%s)"
                            % (", ".join(interfaces) or "none"), data=table)
    return _rails_result("pod_rails", table,
                         "The pod's GPUs and NICs were allocated on different NUMA nodes or switches: set the "
                         "kubelet's topologyManagerPolicy to single-numa-node (OpenShift: a PerformanceProfile "
                         "with numa.topologyPolicy single-numa-node) and give the SR-IOV network one resource per "
                         "NUMA node, so the device plugins hand out GPUs and NICs that belong together.")


def check_cpu_placement(facts, expect):
    placement = cpu_placement(facts)
    if not placement["known"]:
        return check_result("cpu_placement", SKIP, "the pod's CPU set or the NUMA nodes' CPU lists are not readable",
                            data=placement)
    if not placement["gpu_numa_nodes"]:
        return check_result("cpu_placement", SKIP, "no GPU with a known NUMA node", data=placement)
    spread = ", ".join("node %d: %d CPU(s)" % item for item in placement["cpus_per_numa_node"].items())
    problems = []
    if placement["misses"]:
        problems.append("no CPU on NUMA node(s) %s of its GPUs" % ", ".join(map(str, placement["misses"])))
    if placement["spans"]:
        problems.append("CPUs on NUMA node(s) %s where none of its GPUs is" % ", ".join(map(str, placement["spans"])))
    if problems:
        return check_result("cpu_placement", WARN, "the pod may run on CPUs %s (%s): %s; the first suspect when a job "
                            "is slower under Kubernetes than on the same hosts without it"
                            % (placement["allowed_list"], spread, "; ".join(problems)),
                            "Give the kubelet cpuManagerPolicy static with topologyManagerPolicy single-numa-node (or "
                            "restricted) and the pods Guaranteed QoS (whole CPUs, requests equal to limits); on "
                            "OpenShift, a PerformanceProfile does both.", placement)
    return check_result("cpu_placement", PASS, "the pod's CPUs %s are on its GPUs' NUMA node(s) %s"
                        % (placement["allowed_list"], ", ".join(map(str, placement["gpu_numa_nodes"]))), data=placement)


def check_kubelet_topology(facts, expect):
    kubelet = facts.get("kubelet") or {}
    if not kubelet.get("source"):
        return check_result("kubelet_topology", SKIP, "no kubelet configuration found on the node (%s)"
                            % ", ".join("/var/lib/kubelet/config.yaml /etc/kubernetes/kubelet.conf".split()), data=kubelet)
    nodes = sorted(set(gpu["numa_node"] for gpu in facts["nvidia"]["gpus"]
                       if gpu.get("numa_node") is not None and gpu["numa_node"] >= 0))
    settings = ", ".join("%s=%s" % (name, kubelet[name]) for name in
                         ("cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy") if kubelet[name])
    aligned = (kubelet["topologyManagerPolicy"] in ("single-numa-node", "restricted")
               and kubelet["cpuManagerPolicy"] == "static")
    if aligned or len(nodes) < 2:
        return check_result("kubelet_topology", PASS, "%s (%s; GPUs on %d NUMA node(s))"
                            % (settings, kubelet["source"], len(nodes)), data=kubelet)
    return check_result("kubelet_topology", WARN, "the GPUs are on NUMA nodes %s and the kubelet does not keep a pod's "
                        "CPUs, GPUs and NICs on one: %s (%s)" % (", ".join(map(str, nodes)), settings, kubelet["source"]),
                        "Set cpuManagerPolicy: static and topologyManagerPolicy: single-numa-node (or restricted) in the "
                        "kubelet configuration (OpenShift: a PerformanceProfile with numa.topologyPolicy); the kubelet "
                        "needs its cpu_manager_state removed when the CPU policy changes.", kubelet)


CHECKS = dict((name, globals()["check_" + name]) for name in CHECK_NAMES + POD_CHECK_NAMES)


def run_checks(facts, expect, only=None, in_pod=False):
    """Run the checks in order (the pod's own checks too where ``in_pod``);
    a check that breaks becomes a ``fail`` with the reason, never an
    exception."""
    results = []
    for name in CHECK_NAMES + (POD_CHECK_NAMES if in_pod else ()):
        if only and name not in only:
            continue
        try:
            results.append(CHECKS[name](facts, expect))
        except Exception as exc:  # a malformed snapshot must not stop the other checks
            results.append(check_result(name, FAIL, "check could not evaluate the node's facts: %s: %s"
                                        % (type(exc).__name__, exc),
                                        "Look at the facts' errors list for files that could not be read."))
    return results


def summarize(results):
    summary = dict((status, 0) for status in STATUSES)
    for result in results:
        summary[result["status"]] += 1
    summary["total"] = len(results)
    return summary


def failed(results, fail_on):
    """The checks that fail the task: ``fail_on`` is fail, warn or never."""
    if fail_on == "never":
        return []
    levels = (FAIL,) if fail_on == "fail" else (FAIL, WARN)
    return [result for result in results if result["status"] in levels]
