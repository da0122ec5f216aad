"""The sriov role, run through playbooks/deploy.yml --tags sriov against the
local cluster (real API server serving the SR-IOV Network Operator's and
Multus' kinds), and its teardown tasks.

The local cluster runs the SR-IOV Network Operator's manager (built from its
pinned module, started with the cluster) in its namespace: its network
controllers render the NetworkAttachmentDefinition of each SriovNetwork, put
their finalizer on it and delete the attachment with it. No config daemon
runs (there is no SR-IOV hardware here): where a test needs one, the test
plays it, creating the SriovNetworkNodeState of each node and setting its
status through the status subresource, as the daemon does on a real node.
Each test has a deployment namespace, an app name and a node label of its
own; the operator's namespace is shared, so each test starts and ends with
no SR-IOV object in it (the networks deleted through the operator).
"""

import json
import threading
import time
import uuid
from pathlib import Path

import pytest
from ansible_cli import run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

TEARDOWN = str(Path(__file__).resolve().parent / "playbooks" / "sriov_teardown.yml")
GROUP, VERSION = "sriovnetwork.openshift.io", "v1"
NODES = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]
# cluster_rdma_nics and sriov_ipam_ranges of inventories/local.
NICS = {"eno5np0-network": ("eno5np0rdma", "eno5np0", "192.168.105.0/24"),
        "eno6np0-network": ("eno6np0rdma", "eno6np0", "192.168.106.0/24"),
        "eno7np0-network": ("eno7np0rdma", "eno7np0", "192.168.107.0/24"),
        "eno8np0-network": ("eno8np0rdma", "eno8np0", "192.168.108.0/24")}
PFS = [pf for dummy, pf, dummy in NICS.values()]
# Where the local cluster's operator runs (tools/localcluster/operator_catalog.py).
OPERATOR_NAMESPACE = "openshift-sriov-network-operator"


class Deployment:
    """The names of one test's deployment and what the cluster holds for it."""

    def __init__(self, api_client):
        tag = uuid.uuid4().hex[:6]
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.namespace = "sriov-%s" % tag
        self.operator_namespace = OPERATOR_NAMESPACE
        self.label = "test.mlinfra.io/sriov-%s" % tag
        self.vars = {"cluster_namespace": self.namespace, "cluster_app_name": "sriov-%s" % tag,
                     "sriov_operator_namespace": self.operator_namespace, "sriov_node_label": self.label,
                     "sriov_create_operator_namespace": False, "cluster_gpu_nodes": NODES, "replicas": 2}

    def deploy(self, check=False, **extra):
        return run_playbook("deploy.yml", "local", dict(self.vars, **extra), check=check, tags="sriov")

    def teardown(self, **extra):
        return run_playbook(TEARDOWN, "local", dict(self.vars, **extra))

    def objects(self, plural, namespace=None):
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace or self.operator_namespace,
                                                          plural)["items"]
        return dict((item["metadata"]["name"], item) for item in items)

    def attachments(self):
        items = self.custom.list_namespaced_custom_object("k8s.cni.cncf.io", "v1", self.namespace,
                                                          "network-attachment-definitions")["items"]
        return dict((item["metadata"]["name"], item) for item in items)

    def labelled_nodes(self):
        return sorted(n.metadata.name for n in self.core.list_node(label_selector=self.label).items)

    def namespace_exists(self, name=None):
        try:
            self.core.read_namespace(name or self.namespace)
            return True
        except client.ApiException as err:
            assert err.status == 404
            return False

    def set_node_state(self, node, sync, error="", interfaces=()):
        """What the operator's config daemon reports for a node: the state
        object (created when missing) and its status."""
        try:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, self.operator_namespace,
                                                        "sriovnetworknodestates",
                                                        {"apiVersion": "%s/%s" % (GROUP, VERSION),
                                                         "kind": "SriovNetworkNodeState",
                                                         "metadata": {"name": node}, "spec": {}})
        except client.ApiException as err:
            assert err.status == 409
        status = {"syncStatus": sync, "lastSyncError": error,
                  "interfaces": [{"name": pf, "pciAddress": "0000:%02x:00.0" % (0x20 + i), "vendor": "15b3",
                                  "deviceID": "101d", "numVfs": vfs, "totalvfs": 16, "mtu": mtu}
                                 for i, (pf, vfs, mtu) in enumerate(interfaces)]}
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, self.operator_namespace,
                                                          "sriovnetworknodestates", node, {"status": status})

    def clear_operator_namespace(self):
        """No SR-IOV object left in the operator's namespace: the networks
        deleted and waited for (the operator deletes their attachments, then
        lifts its finalizer), the policies and node states deleted."""
        for plural in ("sriovnetworks", "sriovnetworknodepolicies", "sriovnetworknodestates"):
            for name in self.objects(plural):
                try:
                    self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.operator_namespace, plural, name)
                except client.ApiException as err:
                    assert err.status == 404
        deadline = time.monotonic() + 30
        while self.objects("sriovnetworks") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert self.objects("sriovnetworks") == {}, "the SR-IOV operator kept its finalizer"


@pytest.fixture
def deployment(api_client):
    """A Deployment on an empty operator namespace; its namespace, objects
    and node label are removed afterwards."""
    dep = Deployment(api_client)
    dep.clear_operator_namespace()
    yield dep
    dep.clear_operator_namespace()
    for node in dep.labelled_nodes():
        dep.core.patch_node(node, {"metadata": {"labels": {dep.label: None}}})
    try:
        dep.core.delete_namespace(dep.namespace)
    except client.ApiException as err:
        assert err.status == 404


def configured(vfs=8, mtu=9000):
    return [(pf, vfs, mtu) for pf in PFS] + [("eno1np0", 0, 1500)]


def test_policies_and_networks_are_created_then_nothing_changes(deployment):
    first = deployment.deploy()
    assert not first.failed, first.failure_messages() or first.stderr
    assert first.changed > 0

    policies = deployment.objects("sriovnetworknodepolicies")
    assert sorted(policies) == sorted(NICS)
    for name, (resource, pf, dummy) in NICS.items():
        policy = policies[name]
        assert policy["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "mlinfra.multinode",
                                                "app.kubernetes.io/part-of": "local"}
        assert policy["spec"] == {"resourceName": resource, "nodeSelector": {deployment.label: "true"},
                                  "numVfs": 8, "mtu": 9000, "nicSelector": {"vendor": "15b3", "pfNames": [pf]},
                                  "deviceType": "netdevice", "isRdma": True}
    assert deployment.labelled_nodes() == NODES

    networks = deployment.objects("sriovnetworks")
    assert sorted(networks) == sorted(NICS)
    for name, (resource, dummy, cidr) in NICS.items():
        spec = networks[name]["spec"]
        assert spec["networkNamespace"] == deployment.namespace and spec["resourceName"] == resource
        assert json.loads(spec["ipam"]) == {"type": "whereabouts", "range": cidr}
    # The operator renders the attachments into the namespace, so it exists
    # before the pods; the role waited for them. They are the operator's
    # (its sriov CNI configuration, the resource with its prefix), and each
    # network carries its finalizer.
    assert deployment.namespace_exists()
    attachments = deployment.attachments()
    assert sorted(attachments) == sorted(NICS)
    for name, (resource, dummy, cidr) in NICS.items():
        meta = attachments[name]["metadata"]
        assert meta["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "openshift.io/" + resource
        assert "labels" not in meta or "app.kubernetes.io/managed-by" not in meta["labels"]
        config = json.loads(attachments[name]["spec"]["config"])
        assert config["type"] == "sriov" and config["ipam"] == {"type": "whereabouts", "range": cidr}, config
        assert networks[name]["metadata"]["finalizers"] == ["netattdef.finalizers.sriovnetwork.openshift.io"]
    (waited,) = first.results("Wait until the operator has rendered the networks' attachments")
    assert not waited.get("failed") and waited["resources"]
    # No operator reports node states here, and the role says so instead of waiting.
    reason = first.results("Say why there is no wait for the nodes")[0]
    assert "there is no SriovNetworkNodeState in %s" % deployment.operator_namespace in reason["msg"]

    second = deployment.deploy()
    assert not second.failed, second.failure_messages()
    assert second.changed == 0


def test_check_mode_creates_nothing(deployment):
    run = deployment.deploy(check=True)
    assert not run.failed, run.failure_messages() or run.stderr
    assert run.changed > 0  # it says what it would do ...
    assert deployment.objects("sriovnetworknodepolicies") == {}  # ... and does none of it
    assert deployment.objects("sriovnetworks") == {}
    assert deployment.labelled_nodes() == []
    assert not deployment.namespace_exists()


def test_waits_until_the_operator_has_configured_the_nodes(deployment):
    # Succeeded from before the policies, without VFs: not done yet.
    for node in NODES:
        deployment.set_node_state(node, "Succeeded", interfaces=configured(vfs=0, mtu=1500))

    def operator():
        # Reconfigures the nodes once the networks (applied after the
        # policies) exist, and takes long enough that the role's first look
        # finds them in progress.
        deadline = time.monotonic() + 120
        while len(deployment.objects("sriovnetworks")) < len(NICS) and time.monotonic() < deadline:
            time.sleep(0.5)
        for node in NODES:
            deployment.set_node_state(node, "InProgress", interfaces=configured(vfs=0, mtu=1500))
        time.sleep(12)
        for node in NODES:
            deployment.set_node_state(node, "Succeeded", interfaces=configured())
        synced.append(time.monotonic())

    synced = []
    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    run = deployment.deploy(sriov_sync_timeout=90)
    finished = time.monotonic()
    thread.join(timeout=130)
    assert not run.failed, run.failure_messages() or run.stderr
    assert synced and finished > synced[0]
    wait = run.results("Wait until the operator reports the named nodes in sync")[0]
    assert wait["attempts"] > 1


def test_a_failed_node_fails_the_run_naming_the_node_and_its_error(deployment):
    deployment.set_node_state(NODES[0], "Succeeded", interfaces=configured())
    deployment.set_node_state(NODES[1], "Failed", error="failed to set numVfs of eno7np0: write error: no space left",
                              interfaces=configured(vfs=0))
    run = deployment.deploy(sriov_sync_timeout=2)
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "has not configured every named node after 2s" in message, message
    assert "%s: syncStatus Failed: failed to set numVfs of eno7np0: write error" % NODES[1] in message
    assert NODES[0] not in message
    assert "fix: read the node states (kubectl -n %s get sriovnetworknodestates" % deployment.operator_namespace \
        in message
    assert "sriov_sync_timeout" in message


def test_networks_no_operator_renders_fail_the_deploy_naming_the_namespace(deployment):
    """An operator namespace where no operator runs (the operator renders
    only the networks of its own namespace): the policies and networks are
    applied there, no attachment comes, and the play fails before any pod."""
    elsewhere = deployment.namespace + "-op"
    deployment.core.create_namespace({"metadata": {"name": elsewhere}})
    try:
        run = deployment.deploy(sriov_operator_namespace=elsewhere, sriov_attachment_timeout=2)
        assert run.failed
        (message,) = run.failure_messages()
        assert message.startswith(
            "the SR-IOV operator's NetworkAttachmentDefinitions in %s are not what the pods need after "
            "sriov_attachment_timeout=2 s: eno5np0-network: not rendered yet; eno6np0-network: not rendered yet"
            % deployment.namespace), message
        assert message.endswith("fix: is the SR-IOV operator running? Read its log in %s (kubectl -n %s logs "
                                "deploy/sriov-network-operator), or raise sriov_attachment_timeout"
                                % (elsewhere, elsewhere)), message
        assert deployment.attachments() == {}
    finally:
        for plural in ("sriovnetworks", "sriovnetworknodepolicies"):
            for name in deployment.objects(plural, elsewhere):
                deployment.custom.delete_namespaced_custom_object(GROUP, VERSION, elsewhere, plural, name)
        deployment.core.delete_namespace(elsewhere)


def test_macvlan_attachments_then_nothing_changes(deployment):
    first = deployment.deploy(cluster_rdma_network_type="macvlan")
    assert not first.failed, first.failure_messages() or first.stderr
    attachments = deployment.attachments()
    assert sorted(attachments) == sorted(NICS)
    for name, (resource, pf, cidr) in NICS.items():
        meta = attachments[name]["metadata"]
        assert meta["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "openshift.io/" + resource
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "mlinfra.multinode"
        assert json.loads(attachments[name]["spec"]["config"]) == {
            "cniVersion": "0.3.1", "name": name, "type": "macvlan", "master": pf, "mode": "bridge", "mtu": 9000,
            "ipam": {"type": "whereabouts", "range": cidr}}
    # No operator objects, and no node labels, for a network without the operator.
    assert deployment.objects("sriovnetworks") == {} and deployment.objects("sriovnetworknodepolicies") == {}
    assert deployment.labelled_nodes() == []

    second = deployment.deploy(cluster_rdma_network_type="macvlan")
    assert not second.failed, second.failure_messages()
    assert second.changed == 0


@pytest.mark.parametrize("network_type, extra", [
    ("host-device", {"device": "eno5np0"}),
    ("ipoib", {"master": "eno5np0"}),
])
def test_host_device_and_ipoib_attachments(deployment, network_type, extra):
    run = deployment.deploy(cluster_rdma_network_type=network_type,
                            sriov_ipam_ranges={"eno5np0-network": {"type": "dhcp"}})
    assert not run.failed, run.failure_messages() or run.stderr
    config = json.loads(deployment.attachments()["eno5np0-network"]["spec"]["config"])
    assert config == dict({"cniVersion": "0.3.1", "name": "eno5np0-network", "type": network_type,
                           "ipam": {"type": "dhcp"}}, **extra)


@pytest.mark.parametrize("extra, reason", [
    # Without NICs: the settings check refuses NICs that would not be attached.
    ({"cluster_network_mode": "tcp", "cluster_rdma_nics": []}, "cluster_network_mode is tcp"),
    ({"cluster_host_network": True, "cluster_rdma_nics": []}, "cluster_host_network is true"),
])
def test_nothing_to_attach_creates_nothing(deployment, extra, reason):
    run = deployment.deploy(**extra)
    assert not run.failed, run.failure_messages() or run.stderr
    assert run.changed == 0
    assert reason in run.results("Say why the pods need no network attachments")[0]["msg"]
    assert deployment.objects("sriovnetworknodepolicies") == {} and deployment.objects("sriovnetworks") == {}
    assert not deployment.namespace_exists() and deployment.labelled_nodes() == []


def test_teardown_keeps_the_policies_unless_purged(deployment):
    assert not deployment.deploy().failed
    # Another deployment of the collection in the namespace still uses the networks.
    apps = client.AppsV1Api(deployment.api_client)
    other = {"metadata": {"name": "other-app", "labels": {"app.kubernetes.io/managed-by": "mlinfra.multinode"}},
             "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "other-app"}},
                      "template": {"metadata": {"labels": {"app": "other-app"}},
                                   "spec": {"containers": [{"name": "c", "image": "registry.local/none"}]}}}}
    apps.create_namespaced_stateful_set(deployment.namespace, other)
    kept = deployment.teardown()
    assert not kept.failed, kept.failure_messages() or kept.stderr
    assert "StatefulSet(s) other-app there still use them" in kept.results("Report what was deleted")[0]["msg"]
    assert sorted(deployment.objects("sriovnetworks")) == sorted(NICS)

    apps.delete_namespaced_stateful_set("other-app", deployment.namespace)
    down = deployment.teardown()
    assert not down.failed, down.failure_messages()
    report = down.results("Report what was deleted")[0]["msg"]
    assert "deleted 4 network(s) of %s" % deployment.namespace in report
    assert "delete them with -e purge_sriov_policies=true" in report and "drain" in report
    # Gone when teardown ends: the operator deleted the attachments it
    # rendered and let the networks go.
    assert deployment.objects("sriovnetworks") == {} and deployment.attachments() == {}
    assert sorted(deployment.objects("sriovnetworknodepolicies")) == sorted(NICS)
    assert deployment.labelled_nodes() == NODES

    purge = deployment.teardown(purge_sriov_policies=True)
    assert not purge.failed, purge.failure_messages()
    assert "the operator now drains and reconfigures the nodes" in purge.results("Report what was deleted")[0]["msg"]
    assert deployment.objects("sriovnetworknodepolicies") == {}
    assert deployment.labelled_nodes() == []


def test_teardown_deletes_the_attachments_it_created(deployment):
    assert not deployment.deploy(cluster_rdma_network_type="macvlan").failed
    # The mode changed since: teardown still finds the attachments by their labels.
    down = deployment.teardown(cluster_network_mode="tcp", cluster_rdma_nics=[])
    assert not down.failed, down.failure_messages() or down.stderr
    assert deployment.attachments() == {}


@pytest.mark.parametrize("extra, words", [
    ({"cluster_rdma_nics": [{"name": "eno5np0-network", "resource": "openshift.io/eno5np0rdma", "netdev": "net1"}]},
     "every cluster_rdma_nics entry needs its physical function for the sriov network, these have none: "
     "eno5np0-network; fix: add pf"),
    ({"sriov_ipam_ranges": {"eno5np0-network": "192.168.300.0/24"}},
     "sriov_ipam_ranges[eno5np0-network] must be a CIDR range such as 192.168.100.0/24"),
    ({"sriov_ipam_ranges": {"eno5np0-network": "192.168.105.0/24", "eno6np0-network": "192.168.105.128/25"}},
     "the ranges of eno5np0-network (192.168.105.0/24) and eno6np0-network (192.168.105.128/25) overlap"),
    ({"sriov_operator_namespace": "no-such-operator-namespace"},
     "sriov_operator_namespace=no-such-operator-namespace does not exist"),
    ({"sriov_node_selector": {"feature.node.kubernetes.io/network-sriov.capable": "false"}},
     "node moc-r4pcc04u09-nairr lacks labels of sriov_node_selector"),
    ({"sriov_nic_vendor": 15}, "sriov_nic_vendor and sriov_nic_device_id are 4-digit hexadecimal PCI ids"),
    ({"sriov_num_vfs": 0}, "sriov_num_vfs is out of range (got 0); fix: give a number from 1 to 256"),
])
def test_bad_input_fails_before_anything_is_created(deployment, extra, words):
    run = deployment.deploy(**extra)
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert words in messages, messages
    assert deployment.objects("sriovnetworknodepolicies") == {} and deployment.objects("sriovnetworks") == {}
    assert not deployment.namespace_exists() and deployment.labelled_nodes() == []


def test_a_network_of_another_namespace_is_not_taken_one_of_this_namespace_is_kept(deployment):
    # Another deployment's network of the same name, serving a namespace that exists.
    deployment.custom.create_namespaced_custom_object(GROUP, VERSION, deployment.operator_namespace, "sriovnetworks", {
        "apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "SriovNetwork", "metadata": {"name": "eno6np0-network"},
        "spec": {"resourceName": "eno6np0rdma", "networkNamespace": "default"}})
    run = deployment.deploy()
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "SriovNetwork %s/eno6np0-network already serves namespace default" % deployment.operator_namespace \
        in message, message
    assert "fix: give the cluster_rdma_nics of %s other names" % deployment.namespace in message
    assert deployment.objects("sriovnetworknodepolicies") == {} and not deployment.namespace_exists()

    # One made by someone else for this very namespace (which exists, as it
    # serves it) is used as it is, the operator's attachment waited for.
    deployment.core.create_namespace({"metadata": {"name": deployment.namespace}})
    deployment.custom.patch_namespaced_custom_object(GROUP, VERSION, deployment.operator_namespace, "sriovnetworks",
                                                     "eno6np0-network",
                                                     {"spec": {"networkNamespace": deployment.namespace,
                                                               "ipam": '{"type": "dhcp"}'}})
    run = deployment.deploy(cluster_allow_existing_namespace=True)
    assert not run.failed, run.failure_messages()
    assert "eno6np0-network existed already and were left as they are" in run.results("Report the networks")[0]["msg"]
    kept = deployment.objects("sriovnetworks")["eno6np0-network"]
    assert kept["spec"]["ipam"] == '{"type": "dhcp"}' and "labels" not in kept["metadata"]
    assert json.loads(deployment.objects("sriovnetworks")["eno5np0-network"]["spec"]["ipam"])["type"] == "whereabouts"
    # Teardown leaves it too.
    assert not deployment.teardown().failed
    assert sorted(deployment.objects("sriovnetworks")) == ["eno6np0-network"]

    # One left over from a namespace that is gone is taken over.
    deployment.custom.patch_namespaced_custom_object(GROUP, VERSION, deployment.operator_namespace, "sriovnetworks",
                                                     "eno6np0-network", {"spec": {"networkNamespace": "gone-ns"}})
    run = deployment.deploy(cluster_allow_existing_namespace=True)
    assert not run.failed, run.failure_messages()
    assert deployment.objects("sriovnetworks")["eno6np0-network"]["spec"]["networkNamespace"] == deployment.namespace
    assert "eno6np0-network" in deployment.attachments()


def test_networks_left_by_a_deleted_namespace_serve_the_next_deployment(api_client, deployment):
    """A namespace deleted by hand, without teardown.yml: its attachments go
    with it, its networks stay. The operator would keep trying to delete the
    attachments of the gone namespace (its last-network-namespace) and never
    render them for the next one; the role makes those networks anew."""
    assert not deployment.deploy().failed
    before = dict((name, item["metadata"]["uid"]) for name, item in deployment.objects("sriovnetworks").items())
    deployment.core.delete_namespace(deployment.namespace)
    deadline = time.monotonic() + 60
    while deployment.namespace_exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not deployment.namespace_exists()

    following = Deployment(api_client)
    following.label = deployment.label
    following.vars.update(sriov_node_label=deployment.label)
    try:
        run = following.deploy()
        assert not run.failed, run.failure_messages()
        networks = following.objects("sriovnetworks")
        assert all(networks[name]["metadata"]["uid"] != uid for name, uid in before.items())
        assert all(item["spec"]["networkNamespace"] == following.namespace for item in networks.values())
        assert sorted(following.attachments()) == sorted(NICS)
    finally:
        following.clear_operator_namespace()
        following.core.delete_namespace(following.namespace)
