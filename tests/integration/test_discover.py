"""playbooks/discover.yml on the local cluster: from the nodes, the SR-IOV
operator's node policies (those the sriov role gives this cluster,
created here in the operator's namespace) and the node checks run in a
probe pod per GPU node, it proposes inventories/local's own settings, and a
selector the API server answers with the inventory's GPU nodes."""

import uuid

import pytest
import yaml
from ansible_cli import REPO, remove_namespace, run_doc_command
from kubernetes import client, dynamic

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import check_settings
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.network_manifests import node_policy

pytestmark = pytest.mark.integration

LOCAL = {}
for part in ("cluster", "sriov"):
    with open("%s/inventories/local/group_vars/all/%s.yml" % (REPO, part)) as handle:
        LOCAL.update(yaml.safe_load(handle))


@pytest.fixture
def sriov_policies(api_client):
    """The sriov role's node policies of the local inventory, as it would
    create them (one per NIC), in the operator's namespace; those this
    fixture made are deleted after (a deployment of an earlier test on this
    cluster may have left the same ones: teardown keeps them)."""
    values = check_settings(dict(LOCAL, sriov_node_label="", sriov_node_selector={"mlinfra.io/sriov": "true"},
                                 sriov_num_vfs=8, sriov_nic_device_id="", sriov_device_type="netdevice",
                                 sriov_is_rdma=True))["values"]
    policies = dynamic.DynamicClient(api_client).resources.get(api_version="sriovnetwork.openshift.io/v1",
                                                               kind="SriovNetworkNodePolicy")
    namespace = LOCAL["sriov_operator_namespace"]
    there = set(item.metadata.name for item in policies.get(namespace=namespace).items)
    wanted = [node_policy(values, nic) for nic in values["cluster_rdma_nics"]]
    made = [body for body in wanted if body["metadata"]["name"] not in there]
    for body in made:
        policies.create(body=body, namespace=namespace)
    try:
        yield wanted
    finally:
        for body in made:
            policies.delete(name=body["metadata"]["name"], namespace=namespace)


def test_discover_proposes_the_local_inventorys_own_settings(api_client, sriov_policies, tmp_path):
    namespace = "disc-%s" % uuid.uuid4().hex[:6]
    output = tmp_path / "proposed" / "cluster.yml"
    try:
        run = run_doc_command("ansible-playbook playbooks/discover.yml -i inventories/<cluster> "
                              "[-e discover_output=FILE]", inventory_values={"cluster_namespace": namespace},
                              discover_output=str(output))
    finally:
        remove_namespace(api_client, namespace)
    assert not run.failed, run.failure_messages()
    proposed = yaml.safe_load(output.read_text())
    for name in ("cluster_platform", "cluster_gpus_per_node", "cluster_network_mode", "cluster_rdma_network_type",
                 "cluster_rdma_nics", "cluster_rdma_mtu"):
        assert proposed[name] == LOCAL[name], name
    # The selector, asked of the API server, gives the inventory's GPU nodes.
    selected = client.CoreV1Api(api_client).list_node(label_selector=proposed["cluster_gpu_node_selector"]).items
    assert sorted(node.metadata.name for node in selected) == sorted(LOCAL["cluster_gpu_nodes"])
    text = output.read_text()
    # Each node was probed: its devices' link layer and NUMA placement noted.
    assert "#   link_layers: Ethernet (RoCE)" in text and "#   numa: node 0: mlx5_" in text
    assert "not_probed" not in text and "Not decided" not in text
    # The quickstart's command: the proposal where it says.
    default = run_doc_command("ansible-playbook playbooks/discover.yml -i inventories/<cluster>",
                              inventory_values={"cluster_namespace": namespace, "discover_probe_nodes": False})
    remove_namespace(api_client, namespace)
    assert not default.failed, default.failure_messages()
    written = "%s/.work/discover/local/cluster.yml" % REPO
    assert default.last_words().endswith("written to %s" % written)
    assert yaml.safe_load(open(written).read())["cluster_rdma_nics"] == LOCAL["cluster_rdma_nics"]
    (said,) = run.results("Say what was proposed and what is left to decide")
    assert said["msg"].startswith("proposed for cluster local (6 GPU node(s), 6 probed): cluster_platform, ")
    assert said["msg"].endswith("written to %s" % output)
