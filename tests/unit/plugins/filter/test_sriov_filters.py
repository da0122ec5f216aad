"""The sriov role's filters (rdma_ipam, sriov_unsynced, sriov_unrendered), called as Ansible calls them (their
FilterModule)."""

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.filter.rdma_ipam import FilterModule as IpamFilters
from ansible_collections.mlinfra.multinode.plugins.filter.sriov_unrendered import FilterModule as RenderedFilters
from ansible_collections.mlinfra.multinode.plugins.filter.sriov_unsynced import FilterModule as SyncFilters

rdma_ipam = IpamFilters().filters()["rdma_ipam"]
sriov_unsynced = SyncFilters().filters()["sriov_unsynced"]
sriov_unrendered = RenderedFilters().filters()["sriov_unrendered"]

NICS = [{"name": "rail-1", "pf": "eno5np0"}, {"name": "rail-2", "pf": "eno6np0"}, {"name": "rail-3", "pf": "eno7np0"}]


def test_rdma_ipam_gives_each_unlisted_nic_a_subnet_of_its_own():
    assert rdma_ipam(NICS, {}) == {
        "rail-1": {"type": "whereabouts", "range": "192.168.100.0/24"},
        "rail-2": {"type": "whereabouts", "range": "192.168.101.0/24"},
        "rail-3": {"type": "whereabouts", "range": "192.168.102.0/24"},
    }


def test_rdma_ipam_takes_a_range_or_a_whole_ipam_config_per_nic():
    ipam = rdma_ipam(NICS, {"rail-1": " 10.56.0.0/16 ", "rail-2": {"type": "dhcp"}})
    assert ipam["rail-1"] == {"type": "whereabouts", "range": "10.56.0.0/16"}
    assert ipam["rail-2"] == {"type": "dhcp"}
    assert ipam["rail-3"] == {"type": "whereabouts", "range": "192.168.102.0/24"}
    # A range with host bits set is passed on as written; IPv6 works too.
    assert rdma_ipam(NICS[:1], {"rail-1": "192.168.2.225/28"})["rail-1"]["range"] == "192.168.2.225/28"
    assert rdma_ipam(NICS[:1], {"rail-1": "fd00:10::/64"})["rail-1"]["range"] == "fd00:10::/64"
    assert json.dumps(ipam)  # what the templates render into the CNI configuration


@pytest.mark.parametrize("ranges, words", [
    ({"rail-9": "10.0.0.0/24"}, "sriov_ipam_ranges names rail-9, which cluster_rdma_nics does not (its names: "
                                "rail-1, rail-2, rail-3)"),
    ({"rail-1": "300.1.1.0/24"}, "sriov_ipam_ranges[rail-1] must be a CIDR range such as 192.168.100.0/24"),
    ({"rail-1": "10.0.0.0/31"}, "leaves no room for pod addresses"),
    ({"rail-1": 24}, "sriov_ipam_ranges[rail-1] must be a CIDR string or an IPAM mapping"),
    ({"rail-1": {"range": "10.0.0.0/24"}}, "sriov_ipam_ranges[rail-1] is an IPAM mapping without a type"),
    ({"rail-1": "10.0.0.0/16", "rail-2": "10.0.5.0/24"}, "the ranges of rail-1 (10.0.0.0/16) and rail-2 (10.0.5.0/24) "
                                                         "overlap; each RDMA NIC needs its own subnet"),
    ({"rail-2": "192.168.100.0/24"}, "the ranges of rail-1 (192.168.100.0/24) and rail-2 (192.168.100.0/24) overlap"),
    (["rail-1"], "sriov_ipam_ranges must be a mapping"),
])
def test_rdma_ipam_errors_name_the_variable_and_the_fix(ranges, words):
    with pytest.raises(AnsibleFilterError) as error:
        rdma_ipam(NICS, ranges)
    assert words in str(error.value)
    assert "fix: correct sriov_ipam_ranges" in str(error.value)


def test_rdma_ipam_refuses_what_is_not_a_nic_list():
    with pytest.raises(AnsibleFilterError, match="list of mappings that each have a name"):
        rdma_ipam([{"pf": "eno5np0"}], {})


def node_state(node, sync="Succeeded", error="", interfaces=None):
    status = {"syncStatus": sync, "lastSyncError": error}
    if interfaces is not None:
        status["interfaces"] = [{"name": name, "numVfs": vfs, "mtu": mtu, "pciAddress": "0000:%02x:00.0" % i}
                                for i, (name, vfs, mtu) in enumerate(interfaces)]
    return {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetworkNodeState",
            "metadata": {"name": node, "namespace": "openshift-sriov-network-operator"}, "status": status}


CONFIGURED = [("eno5np0", 8, 9000), ("eno6np0", 8, 9000), ("eno1", 0, 1500)]


def test_sriov_unsynced_is_empty_when_every_node_has_its_vfs():
    states = [node_state("gpu-1", interfaces=CONFIGURED), node_state("gpu-2", interfaces=CONFIGURED),
              node_state("other", sync="Failed", error="not ours")]
    assert sriov_unsynced(states, ["gpu-1", "gpu-2"], ["eno5np0", "eno6np0"], 8, 9000) == []
    # More VFs than asked (another policy on the same NIC) is fine.
    assert sriov_unsynced(states, ["gpu-1"], ["eno5np0"], 4, 9000) == []


def test_sriov_unsynced_says_what_each_node_lacks():
    states = [
        node_state("gpu-1", sync="Failed", error="failed to set numVfs on eno6np0: write error"),
        node_state("gpu-2", sync="InProgress"),
        node_state("gpu-3", interfaces=[("eno5np0", 0, 1500), ("eno1", 0, 1500)]),
        {"metadata": {"name": "gpu-4"}},
    ]
    problems = sriov_unsynced(states, ["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"], ["eno5np0", "eno6np0"], 8, 9000)
    assert problems == [
        "gpu-1: syncStatus Failed: failed to set numVfs on eno6np0: write error",
        "gpu-2: syncStatus InProgress",
        "gpu-3: eno5np0 has 0 of 8 VFs",
        "gpu-3: eno5np0 has MTU 1500, wants 9000",
        "gpu-3: has no NIC eno6np0 (it reports eno1, eno5np0)",
        "gpu-4: syncStatus not reported",
        "gpu-5: no SriovNetworkNodeState yet (the operator's config daemon has not reported this node)",
    ]


def test_sriov_unsynced_a_stale_succeeded_does_not_count():
    # Succeeded from before the policy existed: the NIC has no VFs yet.
    stale = [node_state("gpu-1", interfaces=[("eno5np0", 0, 9000)])]
    assert sriov_unsynced(stale, ["gpu-1"], ["eno5np0"], 8, 9000) == ["gpu-1: eno5np0 has 0 of 8 VFs"]
    # Without physical functions to check (policies owned by the administrators) only the verdict counts.
    assert sriov_unsynced(stale, ["gpu-1"], [], 8) == []


def test_sriov_unsynced_shortens_a_long_error_and_skips_the_mtu_when_not_asked():
    long_error = "x" * 1000
    problem = sriov_unsynced([node_state("gpu-1", sync="Failed", error=long_error)], ["gpu-1"], [], 8)[0]
    assert problem.startswith("gpu-1: syncStatus Failed: xxx") and problem.endswith("...") and len(problem) < 400
    assert sriov_unsynced([node_state("gpu-1", interfaces=[("eno5np0", 8, 1500)])], ["gpu-1"], ["eno5np0"], 8, 0) == []


def test_sriov_unsynced_refuses_bad_arguments():
    with pytest.raises(AnsibleFilterError, match="list of SriovNetworkNodeState objects"):
        sriov_unsynced({"items": []}, ["gpu-1"], [], 8)
    with pytest.raises(AnsibleFilterError, match="num_vfs and mtu must be whole numbers"):
        sriov_unsynced([], ["gpu-1"], [], "eight")


with open(Path(__file__).resolve().parents[3] / "fixtures" / "sriov" / "rendered-attachment.json") as _handle:
    # What the real operator rendered from a SriovNetwork (the file says how).
    RENDERED = json.load(_handle)["network_attachment_definition"]

RDMA_NICS = [{"name": "eno5np0-network", "resource": "openshift.io/eno5np0rdma"},
             {"name": "eno6np0-network", "resource": "openshift.io/eno6np0rdma"}]


def test_sriov_unrendered_waits_for_each_nic_s_attachment_from_the_operator():
    assert sriov_unrendered([RENDERED], RDMA_NICS) == [
        {"nic": "eno6np0-network", "rendered": False, "problem": "eno6np0-network: not rendered yet"}]
    other = json.loads(json.dumps(RENDERED).replace("eno5np0", "eno6np0"))
    assert sriov_unrendered([RENDERED, other], RDMA_NICS) == []
    # One of another network type made before: the operator takes it over.
    macvlan = json.loads(json.dumps(other).replace('\\"sriov\\"', '\\"macvlan\\"'))
    assert sriov_unrendered([RENDERED, macvlan], RDMA_NICS) == [
        {"nic": "eno6np0-network", "rendered": False,
         "problem": "eno6np0-network: not rendered yet (the one there is of CNI type macvlan, not sriov)"}]


def test_sriov_unrendered_names_a_resource_the_pods_would_not_be_attached_to():
    # An operator installed with another RESOURCE_PREFIX.
    prefixed = json.loads(json.dumps(RENDERED).replace("openshift.io/", "example.com/"))
    assert sriov_unrendered([prefixed], RDMA_NICS[:1]) == [
        {"nic": "eno5np0-network", "rendered": True, "problem": "eno5np0-network: the operator gives the pods "
         "example.com/eno5np0rdma, the NIC's resource is openshift.io/eno5np0rdma"}]
    with pytest.raises(AnsibleFilterError, match="cluster_rdma_nics, each with a name"):
        sriov_unrendered([RENDERED], [{"resource": "openshift.io/x"}])
