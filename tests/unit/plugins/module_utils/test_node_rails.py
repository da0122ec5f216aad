"""node_rails: how far each GPU is from each NIC (from sysfs paths alone),
the rail table NCCL would follow, where a pod's CPUs sit, and the checks
that judge them (gpu_nic_rails, pod_rails, cpu_placement, kubelet_topology)
on the recorded snapshots and on variations of them."""

import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.checks import Expectations, run_checks
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_kubelet, gather_node_facts, \
    NodeReader
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.rails import cpu_placement, distance, \
    pci_chain, rail_table

ROOT = "/sys/devices/pci0000:15/0000:15:01.0"
SWITCH = ROOT + "/0000:16:00.0"


def at(path, numa=0):
    return {"pci_path": path, "numa_node": numa}


@pytest.mark.parametrize("a, b, expected", [
    # Two ports of one switch, each with its device: the switch's upstream
    # port and the two downstream ports lie between (nvidia-smi: PXB).
    (at(SWITCH + "/0000:17:00.0/0000:18:00.0"), at(SWITCH + "/0000:17:01.0/0000:19:00.2"), "PXB"),
    # Two functions behind one downstream port: one bridge between them.
    (at(SWITCH + "/0000:17:00.0/0000:18:00.0"), at(SWITCH + "/0000:17:00.0/0000:18:00.1"), "PIX"),
    # Two root ports of one host bridge.
    (at(ROOT + "/0000:16:00.0"), at("/sys/devices/pci0000:15/0000:15:02.0/0000:20:00.0"), "PHB"),
    # Two host bridges: the NUMA nodes decide.
    (at(ROOT + "/0000:16:00.0", 0), at("/sys/devices/pci0000:3c/0000:3c:01.0/0000:3d:00.0", 0), "NODE"),
    (at(ROOT + "/0000:16:00.0", 0), at("/sys/devices/pci0000:96/0000:96:01.0/0000:97:00.0", 1), "SYS"),
    # A kernel without NUMA (-1 everywhere) has one node.
    (at(ROOT + "/0000:16:00.0", -1), at("/sys/devices/pci0000:96/0000:96:01.0/0000:97:00.0", -1), "NODE"),
    # Unknown: another host bridge and no NUMA node, or no PCI path at all.
    (at(ROOT + "/0000:16:00.0", None), at("/sys/devices/pci0000:96/0000:96:01.0/0000:97:00.0", 1), None),
    (at(None), at(ROOT + "/0000:16:00.0"), None),
    (at("/sys/devices/virtual/net/eth0"), at(ROOT + "/0000:16:00.0"), None),
])
def test_distance_in_nvidia_smi_words(a, b, expected):
    # Either way round.
    assert distance(a, b) == expected
    assert distance(*reversed((a, b))) == expected


def test_the_pci_chain_starts_at_the_host_bridge():
    assert pci_chain(SWITCH + "/0000:17:00.0/0000:18:00.0/drm/card0") == [
        "pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"]
    assert pci_chain("/sys/devices/platform/foo") == []


def checks(root, mode="rdma"):
    results = run_checks(gather_node_facts(str(root), topology=False), Expectations(mode=mode), in_pod=True)
    return dict((result["name"], result) for result in results)


def test_a_healthy_node_has_a_nic_on_every_gpu_switch(snapshot):
    results = checks(snapshot("healthy-roce-h100"))
    assert results["gpu_nic_rails"]["status"] == "pass"
    assert results["gpu_nic_rails"]["message"] == (
        "every GPU has a NIC on its own PCIe switch or host bridge: "
        "GPU0-mlx5_6 PXB, GPU1-mlx5_7 PXB, GPU2-mlx5_10 PXB, GPU3-mlx5_11 PXB")
    assert [rail["netdevs"] for rail in results["gpu_nic_rails"]["data"]["rails"]] == [
        ["net1"], ["net2"], ["net3"], ["net4"]]
    assert results["pod_rails"]["status"] == "pass"
    assert results["cpu_placement"]["status"] == "pass"
    assert results["kubelet_topology"]["status"] == "pass"
    assert "topologyManagerPolicy=single-numa-node" in results["kubelet_topology"]["message"]


def test_gpus_and_nics_across_numa_nodes_are_named_with_the_fix(snapshot):
    results = checks(snapshot("numa-crossed"))
    rails = results["gpu_nic_rails"]
    assert rails["status"] == "warn"
    assert rails["message"].startswith("GPU0's nearest NIC mlx5_10 is SYS away (another NUMA node); GPU1's nearest "
                                       "NIC mlx5_10 is SYS away (another NUMA node) (rails: GPU0-mlx5_10 SYS,")
    assert "PCIe slot on the GPU's switch" in rails["remediation"]
    pod = results["pod_rails"]
    assert pod["status"] == "warn" and "single-numa-node" in pod["remediation"]
    assert "SR-IOV network one resource per NUMA node" in pod["remediation"]
    placement = results["cpu_placement"]
    assert placement["status"] == "warn"
    assert placement["message"].startswith("the pod may run on CPUs 0-31,64-95 (node 0: 64 CPU(s)): no CPU on NUMA "
                                           "node(s) 1 of its GPUs")
    assert "PerformanceProfile" in placement["remediation"]
    kubelet = results["kubelet_topology"]
    assert kubelet["status"] == "warn"
    assert kubelet["message"] == ("the GPUs are on NUMA nodes 0, 1 and the kubelet does not keep a pod's CPUs, GPUs "
                                  "and NICs on one: cpuManagerPolicy=none, memoryManagerPolicy=None, "
                                  "topologyManagerPolicy=none (/var/lib/kubelet/config.yaml)")


def test_two_gpus_on_one_nic_while_another_is_idle(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    # mlx5_7 moved from GPU1's switch to GPU0's: GPU0 takes mlx5_6 (the
    # first of two equally near), GPU1 has no NIC on its switch and takes
    # mlx5_6 too, and mlx5_7 carries nothing.
    facts = gather_node_facts(str(root), topology=False)
    nic7 = [dev for dev in facts["rdma"]["devices"] if dev["name"] == "mlx5_7"][0]
    nic7["pci_path"] = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.3"
    table = rail_table(facts)
    assert [(rail["gpu"], rail["nic"], rail["distance"]) for rail in table["rails"]][:2] == [
        ("GPU0", "mlx5_6", "PXB"), ("GPU1", "mlx5_6", "NODE")]
    assert table["shared"] == [{"nic": "mlx5_6", "gpus": ["GPU0", "GPU1"], "free": ["mlx5_7"]}]
    result = run_checks(facts, Expectations(), only=("gpu_nic_rails",))[0]
    assert result["status"] == "warn"
    assert "GPU0 and GPU1 carry their traffic through one NIC, mlx5_6, while mlx5_7 carries none" in result["message"]


def test_a_virtual_function_is_its_physical_functions_rail(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    # The host sees the PF (mlx5_2) beside its VF (mlx5_6): one rail, named by the PF.
    facts = gather_node_facts(str(root), topology=False)
    vf = facts["rdma"]["devices"][0]
    vf["physfn"] = "0000:19:00.0"
    facts["rdma"]["devices"].append(dict(vf, name="mlx5_2", pci="0000:19:00.0", physfn=None, netdevs=["eno5np0"],
                                         pci_path=vf["pci_path"].replace("19:00.2", "19:00.0")))
    table = rail_table(facts)
    assert table["nics"] == ["mlx5_2", "mlx5_7", "mlx5_10", "mlx5_11"]
    assert table["rails"][0]["nic"] == "mlx5_2" and table["nics_without_gpu"] == []


def test_a_nic_no_gpu_is_near_is_a_warning(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    facts = gather_node_facts(str(root), topology=False)
    facts["rdma"]["devices"].append(dict(facts["rdma"]["devices"][0], name="mlx5_12", pci="0000:e0:00.0",
                                         physfn=None, numa_node=1, netdevs=["eno9"],
                                         pci_path="/sys/devices/pci0000:e0/0000:e0:01.0/0000:e1:00.0"))
    result = run_checks(facts, Expectations(), only=("gpu_nic_rails",))[0]
    assert result["status"] == "warn" and result["message"].endswith("; no GPU is near mlx5_12")
    assert "storage or management" in result["remediation"]
    # In the pod, only the NICs behind its own interfaces count.
    assert rail_table(facts, pod_interfaces=["net1", "net2"])["nics"] == ["mlx5_6", "mlx5_7"]


def test_rails_that_cannot_be_placed_are_a_skip_never_a_pass(snapshot, snapshot_copy):
    results = checks(snapshot("tcp-only"))
    assert results["gpu_nic_rails"]["status"] == "skip" and results["pod_rails"]["status"] == "skip"
    facts = gather_node_facts(snapshot("healthy-roce-h100"), topology=False)
    for gpu in facts["nvidia"]["gpus"]:
        gpu["pci_path"] = None
    result = run_checks(facts, Expectations(), only=("gpu_nic_rails",))[0]
    assert result["status"] == "skip" and "PCI paths of GPU0, GPU1, GPU2, GPU3 not readable" in result["message"]
    recorded = checks(snapshot("recorded/h100-vm-1gpu/snapshot"))
    names = ("gpu_nic_rails", "pod_rails", "cpu_placement", "kubelet_topology")
    # A virtual machine: no RDMA device, no kubelet, its GPU on NUMA node -1.
    assert dict((name, recorded[name]["status"]) for name in names) == dict.fromkeys(names, "skip")
    assert recorded["cpu_placement"]["message"] == "no GPU with a known NUMA node"


def test_cpu_placement_spanning_a_node_without_gpus(snapshot):
    facts = gather_node_facts(snapshot("healthy-roce-h100"), topology=False)
    facts["nvidia"]["gpus"] = [gpu for gpu in facts["nvidia"]["gpus"] if gpu["numa_node"] == 0]
    placement = cpu_placement(facts)
    assert placement["cpus_per_numa_node"] == {0: 64, 1: 64} and placement["spans"] == [1]
    assert placement["misses"] == []
    result = run_checks(facts, Expectations(), only=("cpu_placement",), in_pod=True)[0]
    assert result["status"] == "warn" and "CPUs on NUMA node(s) 1 where none of its GPUs is" in result["message"]


KUBELET_JSON = """{
  "kind": "KubeletConfiguration",
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "cpuManagerPolicy": "static",
  "cpuManagerReconcilePeriod": "5s",
  "topologyManagerPolicy": "restricted",
  "evictionHard": {"memory.available": "100Mi"}
}
"""


@pytest.mark.parametrize("files, expected", [
    # OpenShift's kubelet.conf is JSON; the memory and scope policies unset.
    ({"etc/kubernetes/kubelet.conf": KUBELET_JSON},
     {"cpuManagerPolicy": "static", "memoryManagerPolicy": "None", "topologyManagerPolicy": "restricted",
      "topologyManagerScope": "container", "source": "/etc/kubernetes/kubelet.conf"}),
    # Only the CPU manager's state file: the other policies unknown.
    ({"var/lib/kubelet/cpu_manager_state": '{"policyName":"static","defaultCpuSet":"0-127","checksum":1}'},
     {"cpuManagerPolicy": "static", "memoryManagerPolicy": None, "topologyManagerPolicy": None,
      "topologyManagerScope": None, "source": "/var/lib/kubelet/cpu_manager_state"}),
    # A nested key of the same name does not count.
    ({"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nfoo:\n    topologyManagerPolicy: restricted\n"},
     {"cpuManagerPolicy": "none", "memoryManagerPolicy": "None", "topologyManagerPolicy": "none",
      "topologyManagerScope": "container", "source": "/var/lib/kubelet/config.yaml"}),
    # The running kubelet (found through its systemd unit's cgroup): the
    # --config it was started with, read through its root, and a flag
    # that overrides the file.
    ({"sys/fs/cgroup/system.slice/kubelet.service/cgroup.procs": "2817\n",
      "proc/2817/cmdline": "/usr/bin/kubelet\0--register-node\0--config=/etc/kubernetes/kubelet.conf\0"
                           "--topology-manager-policy\0single-numa-node\0",
      "proc/2817/root/etc/kubernetes/kubelet.conf": KUBELET_JSON,
      "var/lib/kubelet/config.yaml": "cpuManagerPolicy: none\n"},
     {"cpuManagerPolicy": "static", "memoryManagerPolicy": "None", "topologyManagerPolicy": "single-numa-node",
      "topologyManagerScope": "container", "source": "/etc/kubernetes/kubelet.conf"}),
    ({}, {"cpuManagerPolicy": None, "memoryManagerPolicy": None, "topologyManagerPolicy": None,
          "topologyManagerScope": None, "source": None}),
])
def test_kubelet_policies_from_each_place_the_kubelet_keeps_them(tmp_path, files, expected):
    for rel, text in files.items():
        os.makedirs(str(tmp_path / os.path.dirname(rel)), exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert gather_kubelet(NodeReader(str(tmp_path))) == expected
