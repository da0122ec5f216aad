"""The manifest filters (workload_manifests, network_manifests,
probe_manifests), called as Ansible calls them (their FilterModule): a
setting missing or no boolean is the task's error, naming the setting."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.filter.network_manifests import FilterModule as NetworkFilters
from ansible_collections.mlinfra.multinode.plugins.filter.probe_manifests import FilterModule as ProbeFilters
from ansible_collections.mlinfra.multinode.plugins.filter.workload_manifests import FilterModule as WorkloadFilters

workload_manifests = WorkloadFilters().filters()["workload_manifests"]
network_manifests = NetworkFilters().filters()["network_manifests"]
probe_manifests = ProbeFilters().filters()["probe_manifests"]

NETWORK = {"cluster_name": "lab", "cluster_namespace": "train", "cluster_rdma_network_type": "sriov",
           "cluster_rdma_mtu": 9000, "cluster_rdma_nics": [{"name": "rdma-a", "resource": "openshift.io/a", "pf": "p0"}],
           "sriov_operator_namespace": "sriov", "sriov_create_policies": "false"}
IPAM = {"rdma-a": {"type": "dhcp"}}


def test_the_filters_take_a_mapping_of_settings():
    for call in (lambda: workload_manifests(["cluster_name"]), lambda: probe_manifests("cluster_name"),
                 lambda: network_manifests(NETWORK, None)):
        with pytest.raises(AnsibleFilterError, match="takes a mapping"):
            call()


def test_a_missing_setting_is_named():
    with pytest.raises(AnsibleFilterError, match="workload_manifests needs the setting 'cluster_namespace'"):
        workload_manifests({"cluster_name": "lab"})
    with pytest.raises(AnsibleFilterError, match="probe_manifests needs the setting 'cluster_platform'"):
        probe_manifests({"cluster_name": "lab", "cluster_namespace": "train", "cluster_app_name": "app"})
    with pytest.raises(AnsibleFilterError, match="network_manifests needs the setting 'sriov_nic_vendor'"):
        network_manifests(dict(NETWORK, sriov_create_policies=True), IPAM)


def test_a_word_that_is_no_boolean_is_refused_with_its_fix():
    with pytest.raises(AnsibleFilterError, match="sriov_create_policies is not a boolean; fix: give true or false"):
        network_manifests(dict(NETWORK, sriov_create_policies="perhaps"), IPAM)


def test_a_nic_the_objects_cannot_be_made_of_is_named():
    with pytest.raises(AnsibleFilterError, match="network_manifests: no IPAM configuration for the RDMA NIC rdma-a"):
        network_manifests(NETWORK, {})


def test_the_network_objects_of_the_settings():
    network, = network_manifests(NETWORK, IPAM)
    assert (network["kind"], network["spec"]["ipam"]) == ("SriovNetwork", '{"type": "dhcp"}')
