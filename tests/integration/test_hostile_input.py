"""Careless and hostile input through the playbooks on the local cluster: a
sample of each family of tests/unit/plugins/module_utils/test_inventory_settings.py
(which holds every case) is refused by the playbook's first task with one
message naming the variable, the value and the fix, and the cluster is the
same afterwards: no namespace, node label, taint or cordon, no object in the
SR-IOV operator's namespace, no RBAC binding was made or changed."""

import os
import uuid

import pytest
from ansible_cli import run_playbook
from kubernetes import client, dynamic

pytestmark = pytest.mark.integration

OPERATOR_NAMESPACE = "openshift-sriov-network-operator"


def cluster_state(api_client):
    """What a deploy would change first, cluster-wide."""
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    resources = dynamic.DynamicClient(api_client).resources
    nodes = dict((node.metadata.name, (sorted(node.metadata.labels.items()), node.spec.unschedulable,
                                       sorted(str(taint) for taint in node.spec.taints or [])))
                 for node in core.list_node().items)
    operator_objects = sorted(
        (kind, item.metadata.name, item.metadata.resource_version)
        for kind in ("SriovNetwork", "SriovNetworkNodePolicy")
        for item in resources.get(api_version="sriovnetwork.openshift.io/v1", kind=kind)
        .get(namespace=OPERATOR_NAMESPACE).items)
    return {
        "namespaces": sorted(ns.metadata.name for ns in core.list_namespace().items),
        "nodes": nodes,
        "operator_objects": operator_objects,
        "cluster_role_bindings": sorted(b.metadata.name for b in rbac.list_cluster_role_binding().items),
        "role_bindings": sorted((b.metadata.namespace, b.metadata.name)
                                for b in rbac.list_role_binding_for_all_namespaces().items),
    }


# (playbook, extra variables, words the one message must hold). Each message
# also names the variable and the value given.
CASES = [
    ("deploy.yml", {"cluster_nccl_env_overrides": {"NCCL_X;touch /tmp/owned;#": "1"}},
     "is not an NCCL variable name"),
    ("deploy.yml", {"cluster_nccl_env_overrides": {"NCCL_$(touch /tmp/owned)": "1"}},
     "is not an NCCL variable name"),
    ("deploy.yml", {"cluster_nccl_env_overrides": {"NCCL_DEBUG": "INFO\ntouch /tmp/owned"}}, "holds a line break"),
    ("deploy.yml", {"cluster_nccl_env_overrides": "NCCL_DEBUG=INFO"}, "is not a mapping"),
    ("deploy.yml", {"cluster_host_network": "maybe"}, "is not a boolean"),
    ("deploy.yml", {"statefulset_require_verified_nodes": "nope"}, "is not a boolean"),
    ("deploy.yml", {"cluster_rdma_mtu": "-5"}, "from 1280 to 9216"),
    ("deploy.yml", {"cluster_pod_cpu": "lots"}, "is not a CPU quantity"),
    ("deploy.yml", {"cluster_storage_size": "100"}, "is not a Kubernetes quantity with its unit"),
    ("deploy.yml", {"cluster_storage_class": "fast\n        volumeName: local-pv-00"}, "holds a line break"),
    ("deploy.yml", {"cluster_namespace": "kube-system"}, "is a namespace of the platform itself"),
    ("deploy.yml", {"cluster_namespace": OPERATOR_NAMESPACE, "cluster_allow_system_namespace": "true"},
     "is the SR-IOV operator's namespace"),
    ("deploy.yml", {"cluster_network_mode": "tcp"}, "cluster_network_mode=tcp attaches none"),
    ("deploy.yml", {"replicas": "-1"}, "is out of range"),
    ("train.yml", {"train_run_id": "x;reboot"}, "is not a run id"),
    ("teardown.yml", {"purge_workspaces": "everything"}, "is not a boolean"),
]


@pytest.mark.parametrize("playbook,extra,words", CASES,
                         ids=["%s-%s" % (case[0].split(".")[0], "-".join(case[1])) + "-%d" % index
                              for index, case in enumerate(CASES)])
def test_bad_input_is_refused_first_with_one_message_and_nothing_changes(api_client, playbook, extra, words):
    settings = dict({"cluster_namespace": "hostile-%s" % uuid.uuid4().hex[:6]}, **extra)
    before = cluster_state(api_client)
    run = run_playbook(playbook, "local", settings)
    assert run.failed
    (message,) = run.failure_messages()
    assert message.startswith("1 setting(s) refused: ") and words in message, message
    name = [key for key in extra if key != "cluster_allow_system_namespace"][0]
    assert name in message and "fix: " in message, message
    # The settings check is all that ran: nothing before it could change
    # anything, and no argument spec was printed.
    ran = [task["task"]["name"].split(" : ")[-1] for play in run.document["plays"] for task in play["tasks"]]
    assert ran == ["Convert and check the inventory's variables",
                   "Refuse settings that cannot be used, before anything changes"], ran
    assert "argument_spec_data" not in str(run.document)
    after = cluster_state(api_client)
    # An earlier test's namespace may still be going away: nothing may be
    # added, and what may be removed meanwhile is only what goes with it.
    assert set(after.pop("namespaces")) <= set(before.pop("namespaces"))
    assert set(after.pop("role_bindings")) <= set(before.pop("role_bindings"))
    assert after == before
    if "touch /tmp/owned" in str(extra):
        assert not os.path.exists("/tmp/owned")


def rendered(tmp_path, name, extra):
    from test_render import render
    return render("local", tmp_path / name, extra)


def statefulset_of(documents):
    return [doc for doc in documents["statefulset"] if doc["kind"] == "StatefulSet"][0]["spec"]["template"]["spec"]


def test_booleans_typed_on_the_command_line_mean_what_they_say(tmp_path):
    """render.yml (offline) with each boolean that shapes a manifest given as
    a string, as -e gives it: the false words render as false, the true
    words as true."""
    job = {"train_start_mode": "job", "cluster_storage_mode": "shared", "train_workload": "torchtitan"}
    off = rendered(tmp_path, "off", dict(job, cluster_host_network="false", statefulset_require_verified_nodes="no",
                                         sriov_create_policies="off", train_compile="0", train_float8="False"))
    on = rendered(tmp_path, "on", dict(job, cluster_host_network="yes", cluster_rdma_nics=[],
                                       statefulset_require_verified_nodes="TRUE", sriov_create_policies="on",
                                       train_compile="1", train_float8="On"))
    assert "hostNetwork" not in statefulset_of(off) and statefulset_of(on)["hostNetwork"] is True
    assert "/dev/infiniband" not in str(statefulset_of(off)) and "/dev/infiniband" in str(statefulset_of(on))
    assert "rdma-verified" not in str(statefulset_of(off)) and "mlinfra.io/rdma-verified" in str(statefulset_of(on))
    # The networks without the policies (host networking, the "on" case,
    # needs neither).
    kinds = [doc["kind"] for doc in off["sriov"]]
    assert "SriovNetwork" in kinds and "SriovNetworkNodePolicy" not in kinds and on["sriov"] == []
    train_off, train_on = str(off["train"]), str(on["train"])
    assert "compile.enable=false" in train_off and "compile.enable=true" in train_on
    assert "float8" not in train_off and "quantize.linear.float8" in train_on
