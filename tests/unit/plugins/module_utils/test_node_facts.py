"""node_facts on recorded snapshots that follow the kernel's sysfs layout."""

import os
import struct
import sys

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.node import facts as node_facts
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_node_facts, gid_ipv4, \
    parse_rate_gbps, parse_topology

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nodes"))
import build_snapshots  # noqa: E402


def test_committed_snapshots_are_what_the_builder_writes(tmp_path, snapshot):
    # The snapshots are generated; a hand edit (or a builder change without
    # rebuilding) would make the tests read something else than documented.
    for name in sorted(build_snapshots.SNAPSHOTS):
        built = build_snapshots.build(str(tmp_path), [name])[0]
        assert build_snapshots.tree_listing(built) == build_snapshots.tree_listing(snapshot(name)), name


def test_healthy_roce_node_facts(snapshot):
    facts = gather_node_facts(snapshot("healthy-roce-h100"))
    assert facts["errors"] == []
    assert facts["kernel"]["release"].startswith("5.14.0")
    assert facts["iommu"]["cmdline"] == {"intel_iommu": "on", "iommu": "pt"}
    assert facts["iommu"]["group_types"] == {"identity": 12}
    mods = facts["modules"]["modules"]
    assert mods["mlx5_core"]["loaded"] and mods["mlx5_core"]["version"] == "24.07-0.6.1"
    assert mods["nvidia_peermem"]["loaded"] and not mods["nv_peer_mem"]["loaded"]
    assert facts["ofed_version"] == "OFED-internal-24.07-0.6.1"
    assert facts["gpudirect"]["peermem_modules"] == ["nvidia_peermem"]
    assert [gpu["pci"] for gpu in facts["nvidia"]["gpus"]] == \
        ["0000:18:00.0", "0000:3f:00.0", "0000:99:00.0", "0000:bf:00.0"]
    assert facts["nvidia"]["gpus"][2]["numa_node"] == 1
    assert facts["nvidia"]["driver_version"] == "550.90.07"
    devices = facts["rdma"]["devices"]
    assert [d["name"] for d in devices] == ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"]  # natural order
    mlx5_10 = devices[2]
    assert mlx5_10["netdevs"] == ["net3"] and mlx5_10["pci"] == "0000:9a:00.2" and mlx5_10["numa_node"] == 1
    port = mlx5_10["ports"][0]
    assert (port["state"], port["phys_state"], port["link_layer"], port["rate_gbps"]) == \
        ("ACTIVE", "LinkUp", "Ethernet", 400.0)
    v2 = [g for g in port["gids"] if g["type"] == "RoCE v2" and g["ipv4"]]
    assert [(g["index"], g["ipv4"], g["ndev"]) for g in v2] == [(3, "10.241.3.21", "net3")]
    assert facts["netdevs"]["net3"]["mtu"] == 9000
    assert facts["default_route_interface"] == "eth0"
    assert facts["memlock"] == {"soft": "unlimited", "hard": "unlimited", "unit": "bytes"}
    assert facts["cpus"]["usable"] == 128
    assert facts["topology"]["available"]
    assert facts["topology"]["gpu_links"]["GPU0"] == {"GPU1": "NV18", "GPU2": "NV18", "GPU3": "NV18"}
    assert facts["topology"]["nic_links"]["GPU0"]["mlx5_6"] == "PXB"
    assert facts["topology"]["nic_links"]["GPU0"]["mlx5_10"] == "SYS"
    # Root port, switch upstream, downstream ports of GPU and NIC: 4 per switch.
    assert len(facts["pci_acs"]["bridges"]) == 16
    assert all(state["acs"] and not state["redirect"]["request_redirect"]
               for state in facts["pci_acs"]["bridges"].values())


def test_infiniband_node_facts(snapshot):
    facts = gather_node_facts(snapshot("infiniband-h100"))
    ports = [dev["ports"][0] for dev in facts["rdma"]["devices"]]
    assert {p["link_layer"] for p in ports} == {"InfiniBand"}
    assert all(p["gids"][0]["type"] == "IB/RoCE v1" and p["gids"][0]["ipv4"] is None for p in ports)
    assert facts["rdma"]["devices"][0]["netdevs"] == ["ib0"]


def test_tcp_only_node_has_no_rdma(snapshot):
    facts = gather_node_facts(snapshot("tcp-only"))
    assert facts["rdma"] == {"class_present": False, "devices": [], "uverbs": []}
    assert not facts["modules"]["modules"]["mlx5_core"]["loaded"]
    assert facts["iommu"]["groups"] == 0
    assert len(facts["nvidia"]["gpus"]) == 4


def test_broken_snapshot_is_reported_not_raised(snapshot):
    facts = gather_node_facts(snapshot("broken"))
    errors = "\n".join(facts["errors"])
    for expected in ("/proc/modules: malformed", "/proc/self/limits: malformed", "rate: malformed: 'fast'",
                     "link_layer: Is a directory", "gids/3: malformed", "cpu/online: malformed",
                     "/proc/driver/nvidia/version: malformed", "/proc/net/route: malformed"):
        assert expected in errors
    assert facts["memlock"]["soft"] is None
    assert facts["topology"]["available"] is False
    assert "exited 18" in facts["topology"]["reason"]
    # Paths in messages are the node's, not the snapshot directory's.
    assert snapshot("broken") not in errors


def test_empty_root_gathers_nothing_without_errors(tmp_path):
    facts = gather_node_facts(str(tmp_path), topology=False)
    assert facts["errors"] == []
    assert facts["rdma"]["devices"] == [] and facts["nvidia"]["gpus"] == []
    assert facts["memlock"]["soft"] is None


def test_builtin_module_and_sysfs_only_module(snapshot_copy):
    root = snapshot_copy("tcp-only")
    # A built-in driver has a /sys/module directory without initstate and
    # never appears in /proc/modules.
    (root / "sys/module/mlx5_core/parameters").mkdir(parents=True)
    facts = gather_node_facts(str(root), topology=False)
    assert facts["modules"]["modules"]["mlx5_core"] == dict(
        loaded=True, builtin=True, version=None, srcversion=None, refcount=None)


def test_dmabuf_needs_open_module_driver_and_kernel(snapshot_copy):
    root = snapshot_copy("no-peermem")
    nvrm = root / "proc/driver/nvidia/version"
    nvrm.write_text(build_snapshots.OPEN_NVRM)
    facts = gather_node_facts(str(root), topology=False)
    assert facts["gpudirect"]["dmabuf"] is True
    (root / "proc/sys/kernel/osrelease").write_text("5.10.0-1\n")
    facts = gather_node_facts(str(root), topology=False)
    assert facts["gpudirect"]["dmabuf"] is False and "older than 5.12" in facts["gpudirect"]["dmabuf_reason"]


def test_an_unknown_kernel_release_is_said_as_unknown_not_as_old(snapshot_copy):
    """A node recorded without osrelease (the kernel named only in
    /proc/version) once failed gpudirect_rdma with "kernel None is older
    than 5.12"."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.node.checks import Expectations, \
        check_gpudirect_rdma
    root = snapshot_copy("no-peermem")
    (root / "proc/driver/nvidia/version").write_text(build_snapshots.OPEN_NVRM)
    (root / "proc/sys/kernel/osrelease").unlink()
    (root / "proc/version").write_text("Linux version 6.18.0-1.el10.x86_64 (mockbuild@example) (gcc 14.2.1) "
                                       "#1 SMP PREEMPT_DYNAMIC\n")
    facts = gather_node_facts(str(root), topology=False)
    assert facts["kernel"]["release"] == "6.18.0-1.el10.x86_64" and facts["gpudirect"]["dmabuf"] is True
    (root / "proc/version").unlink()
    facts = gather_node_facts(str(root), topology=False)
    assert facts["kernel"]["release"] is None and facts["gpudirect"]["dmabuf"] is None
    assert "could not be read" in facts["gpudirect"]["dmabuf_reason"]
    check = check_gpudirect_rdma(facts, Expectations(mode="rdma"))
    assert check["status"] == "warn" and check["message"].startswith("GPUDirect RDMA unknown: ")
    assert "older than" not in check["message"]


def test_cgroup_quota_and_cpuset_narrow_the_cpus(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    (root / "sys/fs/cgroup").mkdir(parents=True)
    (root / "sys/fs/cgroup/cpu.max").write_text("6400000 100000\n")
    facts = gather_node_facts(str(root), topology=False)
    assert facts["cpus"] == {"online": 128, "cpuset": 128, "cgroup_quota": 64, "usable": 64, "allowed_list": "0-127"}


def test_acs_redirect_bits_from_config_space(snapshot):
    facts = gather_node_facts(snapshot("acs-redirect"), topology=False)
    state = facts["pci_acs"]["bridges"]["0000:17:01.0"]
    assert state["control"] == 0x001D
    assert state["redirect"] == {"request_redirect": True, "completion_redirect": True, "egress_control": False}


def test_short_config_space_is_unknown_not_clean(tmp_path):
    reader = node_facts.NodeReader(str(tmp_path))
    (tmp_path / "sys/bus/pci/devices/0000:00:01.0").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices/0000:00:01.0/config").write_bytes(b"\x00" * 64)
    assert node_facts.pci_acs_state(reader, "0000:00:01.0")["readable"] is False


def test_ext_capability_chain_is_followed():
    config = bytearray(4096)
    struct.pack_into("<I", config, 0x100, 0x0001 | (1 << 16) | (0x140 << 20))  # AER, next at 0x140
    struct.pack_into("<IHH", config, 0x140, 0x000D | (1 << 16), 0x5F, 0x0004)
    assert node_facts._find_ext_capability(bytes(config), 0x000D) == 0x140
    struct.pack_into("<I", config, 0x140, 0x0001 | (1 << 16) | (0x100 << 20))  # a loop back to 0x100
    assert node_facts._find_ext_capability(bytes(config), 0x000D) is None


@pytest.mark.parametrize("gid,ip", [
    ("0000:0000:0000:0000:0000:ffff:0af1:0315", "10.241.3.21"),
    ("fe80:0000:0000:0000:0a02:0bff:fe02:1002", None),
    ("0000:0000:0000:0000:0000:0000:0000:0000", None),
    ("garbage", None),
])
def test_gid_ipv4(gid, ip):
    assert gid_ipv4(gid) == ip


@pytest.mark.parametrize("text,rate", [("400 Gb/sec (4X NDR)", 400.0), ("2.5 Gb/sec (1X SDR)", 2.5),
                                       ("fast", None), ("", None)])
def test_parse_rate(text, rate):
    assert parse_rate_gbps(text) == rate


def test_topology_of_the_reference_h200_host():
    # nvidia-smi topo -m as captured on a two-GPU H200 host (escape character lost in the copy).
    text = ("\t[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID[0m\n"
            "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    topo = parse_topology(text)
    assert topo["gpus"] == ["GPU0", "GPU1"]
    assert topo["gpu_links"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    assert topo["affinity"]["GPU1"] == {"cpu_affinity": "0-31", "numa_affinity": "0"}


def test_host_nvidia_smi_that_cannot_run_is_not_used(snapshot_copy, monkeypatch):
    root = snapshot_copy("healthy-roce-h100")
    # A host binary seen through /host whose libraries are missing in the pod.
    (root / "usr/bin/nvidia-smi").write_text("#!/bin/sh\nexit 127\n")
    monkeypatch.setenv("PATH", "/nonexistent")
    facts = gather_node_facts(str(root))
    assert facts["topology"] == {"available": False, "reason": "nvidia-smi not found"}
