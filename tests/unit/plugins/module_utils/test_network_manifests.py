"""The sriov role's objects (plugins/module_utils/workload/network_manifests.py), built
from the settings of the real inventories: the objects of each network type,
and that no value, however hostile, adds a field."""

import json

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import Refused
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.network_manifests import (
    NetworkManifestError, attachment, network_manifests, node_policy, sriov_network)

from manifest_checks import HOSTILE, inventory_settings, key_paths, paths_holding, round_trip


def ipam_of(settings):
    return dict((nic["name"], {"type": "whereabouts", "range": "192.168.%d.0/24" % (100 + index)})
                for index, nic in enumerate(settings["cluster_rdma_nics"]))


def build(inventory="barcelona", **changes):
    settings = inventory_settings(inventory, **changes)
    return network_manifests(settings, ipam_of(settings))


def test_sr_iov_policies_come_before_the_networks_one_of_each_per_nic():
    objects = build()
    assert [(obj["kind"], obj["metadata"]["name"]) for obj in objects] == [
        ("SriovNetworkNodePolicy", "rdma-net-1"), ("SriovNetworkNodePolicy", "rdma-net-2"),
        ("SriovNetwork", "rdma-net-1"), ("SriovNetwork", "rdma-net-2")]
    policy, network = objects[0], objects[2]
    assert policy["metadata"]["namespace"] == "openshift-sriov-network-operator"
    assert policy["spec"] == {"resourceName": "mlx5rdma1", "nodeSelector": {"multinode.mlinfra.io/sriov-rdma": "true"},
                              "numVfs": 8, "mtu": 9000, "nicSelector": {"vendor": "15b3", "pfNames": ["ens1f0np0"]},
                              "deviceType": "netdevice", "isRdma": True}
    assert network["spec"] == {"networkNamespace": "nccl-test", "resourceName": "mlx5rdma1",
                               "ipam": '{"type": "whereabouts", "range": "192.168.100.0/24"}'}


def test_the_policies_options():
    objects = build(sriov_create_policies="no")
    assert [obj["kind"] for obj in objects] == ["SriovNetwork", "SriovNetwork"]
    policy = build(sriov_nic_device_id="1017", sriov_node_selector={"example.com/rdma": "true"}, sriov_num_vfs="4",
                   sriov_is_rdma="false", sriov_device_type="vfio-pci")[0]["spec"]
    assert policy["nicSelector"] == {"vendor": "15b3", "pfNames": ["ens1f0np0"], "deviceID": "1017"}
    assert policy["nodeSelector"] == {"example.com/rdma": "true"}
    assert (policy["numVfs"], policy["isRdma"], policy["deviceType"]) == (4, False, "vfio-pci")
    with pytest.raises(Refused, match="sriov_is_rdma is not a boolean"):
        build(sriov_is_rdma="sometimes")


@pytest.mark.parametrize("network_type, expected", [
    ("host-device", {"device": "ens1f0np0"}),
    ("macvlan", {"master": "ens1f0np0", "mode": "bridge", "mtu": 9000}),
    ("ipoib", {"master": "ens1f0np0"}),
])
def test_attachments_carry_the_cni_configuration_of_their_type(network_type, expected):
    objects = build(cluster_rdma_network_type=network_type)
    assert [(obj["kind"], obj["metadata"]["namespace"]) for obj in objects] == [
        ("NetworkAttachmentDefinition", "nccl-test")] * 2
    first = objects[0]
    assert first["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/resourceName": "openshift.io/mlx5rdma1"}
    config = json.loads(first["spec"]["config"])
    assert list(config) == ["cniVersion", "name", "type"] + list(expected) + ["ipam"]
    assert config == dict({"cniVersion": "0.3.1", "name": "rdma-net-1", "type": network_type,
                           "ipam": {"type": "whereabouts", "range": "192.168.100.0/24"}}, **expected)


def test_what_the_sr_iov_operators_webhook_would_refuse_is_refused_before_it_is_applied():
    """One rule through network_manifests; every rule: test_admission_rules.py."""
    with pytest.raises(NetworkManifestError, match=r'resource name "mlx5-rdma1" contains invalid characters.*'
                                                   r'fix: cluster_rdma_nics\[\]\.resource'):
        build(cluster_rdma_nics=[{"name": "rdma-a", "resource": "openshift.io/mlx5-rdma1", "pf": "ens1f0np0"}])
    with pytest.raises(NetworkManifestError, match="end range exceeds the maximum VF index"):
        build(sriov_num_vfs="4", cluster_rdma_nics=[{"name": "rdma-a", "resource": "openshift.io/a", "pf": "ens1f0#0-7"}])


def test_a_nic_without_its_physical_function_or_ipam_is_refused():
    settings = inventory_settings("barcelona", cluster_rdma_nics=[{"name": "rdma-a", "resource": "openshift.io/a"}])
    with pytest.raises(NetworkManifestError, match="'rdma-a' has no pf"):
        network_manifests(settings, ipam_of(settings))
    with pytest.raises(NetworkManifestError, match="no IPAM configuration for the RDMA NIC rdma-net-1"):
        network_manifests(inventory_settings("barcelona"), {})


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("network_type", ["sriov", "host-device", "macvlan", "ipoib"])
def test_hostile_values_are_one_value_each_and_add_no_field(hostile, network_type):
    def nics(value):
        return [{"name": "rdma-a", "resource": "openshift.io/" + value, "pf": value, "netdev": value}]

    def settings_of(value):
        return inventory_settings("barcelona", cluster_rdma_network_type=network_type, cluster_name=value,
                                  cluster_namespace=value, sriov_operator_namespace=value, sriov_nic_vendor=value,
                                  sriov_nic_device_id=value, sriov_device_type=value, cluster_rdma_nics=nics(value))

    def objects(value):
        # Each object as its builder makes it: network_manifests itself
        # refuses what the SR-IOV operator's webhook would (below).
        settings = settings_of(value)
        ipam, nic = ipam_of(settings), settings["cluster_rdma_nics"][0]
        if network_type == "sriov":
            return [node_policy(settings, nic, ipam), sriov_network(settings, nic, ipam)]
        return [attachment(settings, nic, ipam)]

    if network_type == "sriov":
        with pytest.raises(NetworkManifestError, match="SR-IOV Network Operator's admission webhook"):
            network_manifests(settings_of(hostile), ipam_of(settings_of(hostile)))
    before, after = objects("plain"), objects(hostile)
    assert [key_paths(obj) for obj in after] == [key_paths(obj) for obj in before]
    assert paths_holding(after, hostile) == paths_holding(before, "plain")
    assert round_trip(after) == after
    for obj in after:
        if "config" in obj["spec"]:
            assert json.loads(obj["spec"]["config"])["name"] == "rdma-a"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_node_label_is_the_one_key_of_the_node_selector(hostile):
    policy = build(sriov_node_label=hostile)[0]
    assert policy["spec"]["nodeSelector"] == {hostile: "true"}
    assert round_trip([policy]) == [policy]
