"""The inventory discover.yml proposes, from what a cluster shows: here the
local cluster's nodes as its inventory describes them (tools/localcluster),
the SR-IOV policies the sriov role gives it, and the node checks' facts of
the recorded nodes behind them; it must come back to inventories/local's
own settings. Then clusters of other shapes."""

import importlib.util
import sys
from pathlib import Path

import yaml

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_discovery import group_vars_text, propose
from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import check_settings
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_node_facts
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.network_manifests import node_policy

ROOT = Path(__file__).resolve().parents[4]
SPEC = importlib.util.spec_from_file_location("mlinfra_localcluster_discovery",
                                              ROOT / "tools" / "localcluster" / "localcluster.py")
localcluster = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = localcluster
SPEC.loader.exec_module(localcluster)

LOCAL = {}
for part in ("cluster", "sriov"):
    LOCAL.update(yaml.safe_load((ROOT / "inventories" / "local" / "group_vars" / "all" / (part + ".yml")).read_text()))


def local_nodes():
    return localcluster.inventory_nodes()


def local_policies():
    checked = check_settings(dict(LOCAL, sriov_node_label="", sriov_node_selector={"a": "b"}, sriov_num_vfs=8,
                                  sriov_nic_device_id="", sriov_device_type="netdevice", sriov_is_rdma=True))
    settings = checked["values"]
    return [node_policy(settings, nic) for nic in settings["cluster_rdma_nics"]]


def local_facts(nodes):
    facts = {}
    for node in nodes:
        snapshot = (node["metadata"].get("annotations") or {}).get("localcluster.mlinfra.io/snapshot")
        if snapshot:
            root = ROOT / "tests" / "fixtures" / "nodes" / snapshot
            facts[node["metadata"]["name"]] = gather_node_facts(str(root), topology=False)
    return facts


def test_the_local_cluster_gives_back_its_own_inventory():
    nodes = local_nodes()
    proposal = propose(nodes, local_policies(), local_facts(nodes), platform="kubernetes")
    settings = proposal["settings"]
    assert proposal["undecided"] == []
    # The GPU operator's label selects the six GPU nodes, not the infra worker.
    assert settings["cluster_gpu_node_selector"] == "nvidia.com/gpu.present=true"
    assert proposal["notes"]["cluster_gpu_node_selector"] == (
        "selects the 6 GPU node(s) (%s) and none of the 1 other(s)" % ", ".join(sorted(LOCAL["cluster_gpu_nodes"])))
    for name in ("cluster_platform", "cluster_gpus_per_node", "cluster_network_mode", "cluster_rdma_network_type",
                 "cluster_rdma_nics", "cluster_rdma_mtu"):
        assert settings[name] == LOCAL[name], name
    assert proposal["notes"]["link_layers"] == "Ethernet (RoCE)"
    assert proposal["notes"]["numa"].startswith("node 0: mlx5_")


def test_the_file_written_reads_back_as_the_proposal_and_passes_the_settings_check():
    nodes = local_nodes()
    proposal = propose(nodes, local_policies(), local_facts(nodes))
    text = group_vars_text(proposal, "local", "2026-11-29")
    assert text.startswith("---\n# Proposed by playbooks/discover.yml from cluster local on 2026-11-29.\n")
    assert "# selects the 6 GPU node(s)" in text and "#   link_layers: Ethernet (RoCE)" in text
    assert yaml.safe_load(text) == proposal["settings"]
    assert check_settings(dict(yaml.safe_load(text), replicas=2))["errors"] == []


def test_without_sriov_policies_the_shared_rdma_resource_is_proposed_and_the_network_type_left_open():
    proposal = propose(local_nodes(), policies=None, facts=None)
    assert proposal["settings"]["cluster_network_mode"] == "rdma"
    assert proposal["settings"]["cluster_rdma_shared_resource"] == "rdma/rdma_shared_device_a"
    assert proposal["undecided"] == [
        "cluster_rdma_network_type: the nodes offer rdma/rdma_shared_device_a but no SR-IOV policy; choose "
        "host-device, macvlan or ipoib and list the NICs in cluster_rdma_nics"]


def without_rdma_resources(nodes):
    for node in nodes:
        allocatable = node["status"]["allocatable"]
        for key in [key for key in allocatable if "rdma" in key]:
            del allocatable[key]
    return nodes


def test_no_rdma_resource_and_no_device_seen_is_tcp_and_says_what_was_not_looked_at():
    proposal = propose(without_rdma_resources(local_nodes()), policies=None, facts=None)
    assert proposal["settings"]["cluster_network_mode"] == "tcp"
    assert proposal["settings"]["cluster_rdma_nics"] == []
    assert "the node checks did not run" in proposal["notes"]["cluster_network_mode"]


def test_rdma_devices_with_no_resource_for_pods_mean_the_host_network():
    nodes = without_rdma_resources(local_nodes())
    proposal = propose(nodes, policies=[], facts=local_facts(nodes))
    assert proposal["settings"]["cluster_host_network"] is True
    assert proposal["settings"]["cluster_rdma_mtu"] == 9000


def test_one_policy_for_every_nic_by_pci_address_leaves_the_pf_undecided():
    # A network operator's policy for a BM.GPU.A100-v2.8 shape names its 16
    # PFs by PCI address under one resource (github.com/OguzPastirmaci/misc,
    # network-operator-vf/25.7.0/README.md).
    nodes = local_nodes()
    for node in nodes:
        if "nvidia.com/gpu" in node["status"]["allocatable"]:
            node["status"]["allocatable"]["nvidia.com/sriov-rdma-vf"] = "16"
    policy = {"kind": "SriovNetworkNodePolicy", "spec": {
        "deviceType": "netdevice", "mtu": 4220, "isRdma": True, "numVfs": 1, "resourceName": "sriov-rdma-vf",
        "nicSelector": {"vendor": "15b3", "rootDevices": ["0000:0c:00.0", "0000:0c:00.1"]}}}
    proposal = propose(nodes, [policy], facts=None)
    assert proposal["settings"]["cluster_rdma_nics"] == [
        {"name": "sriov-rdma-vf-network", "resource": "nvidia.com/sriov-rdma-vf", "netdev": "net1"}]
    assert proposal["settings"]["cluster_rdma_mtu"] == 4220
    assert proposal["undecided"] == [
        "cluster_rdma_nics: the policy of nvidia.com/sriov-rdma-vf names no physical function (nicSelector.pfNames); "
        "add pf to its entry"]


def test_nodes_no_label_sets_apart_are_named_and_a_cluster_without_gpus_says_what_to_install():
    nodes = local_nodes()
    for node in nodes:
        node["metadata"]["labels"] = {"kubernetes.io/hostname": node["metadata"]["name"]}
    proposal = propose(nodes)
    assert proposal["settings"]["cluster_gpu_nodes"] == sorted(LOCAL["cluster_gpu_nodes"])
    assert "cluster_gpu_node_selector" not in proposal["settings"]
    for node in nodes:
        node["status"]["allocatable"].pop("nvidia.com/gpu", None)
    bare = propose(nodes)
    assert bare["undecided"][0].startswith("cluster_gpu_nodes: no node offers nvidia.com/gpu")
