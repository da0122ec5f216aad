"""Careless and hostile input through the playbooks on the local cluster: every
bad value of tests/bad_settings.py (those of different variables together, so
85 values take 8 runs) and the contradictions below are refused by the
playbook's first task with one message naming each variable, its value and
the fix, and the cluster is the same afterwards: no namespace, node label,
taint or cordon, no object in the SR-IOV operator's namespace, no RBAC
binding was made or changed."""

import os
import uuid

import pytest
from ansible_cli import REPO, run_playbook
from bad_settings import BAD, GOOD
from kubernetes import client, dynamic
from rendering import render

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


# Settings that are each fine but not together, and single values through
# the other playbooks: (playbook, extra variables, words the one message
# must hold). Each message also names the variable and the value given.
CASES = [
    ("deploy.yml", {"cluster_namespace": "kube-system"}, "is a namespace of the platform itself"),
    ("deploy.yml", {"cluster_namespace": OPERATOR_NAMESPACE, "cluster_allow_system_namespace": "true"},
     "is the SR-IOV operator's namespace"),
    ("deploy.yml", {"cluster_network_mode": "tcp"}, "cluster_network_mode=tcp attaches none"),
    ("train.yml", {"train_run_id": "x;reboot"}, "is not a run id"),
    ("teardown.yml", {"purge_workspaces": "everything"}, "is not a boolean"),
]

# The two tasks every playbook runs first; nothing else may run.
SETTINGS_TASKS = ["Convert and check the inventory's variables",
                  "Refuse settings that cannot be used, before anything changes"]


def assert_refused_first_and_nothing_changed(api_client, playbook, settings):
    """Runs the playbook and returns its one failure message, after checking
    that only the settings check ran and the cluster is as it was."""
    before = cluster_state(api_client)
    run = run_playbook(playbook, "local", settings)
    assert run.failed
    (message,) = run.failure_messages()
    # The settings check is all that ran: nothing before it could change
    # anything, and no argument spec was printed.
    ran = [task["task"]["name"].split(" : ")[-1] for play in run.document["plays"] for task in play["tasks"]]
    assert ran == SETTINGS_TASKS, ran
    assert "argument_spec_data" not in str(run.document)
    after = cluster_state(api_client)
    # An earlier test's namespace may still be going away: nothing may be
    # added, and what may be removed meanwhile is only what goes with it.
    assert set(after.pop("namespaces")) <= set(before.pop("namespaces"))
    assert set(after.pop("role_bindings")) <= set(before.pop("role_bindings"))
    assert after == before
    # What hostile names and values would have run (touch /tmp/owned, touch F).
    assert not os.path.exists("/tmp/owned") and not os.path.exists(os.path.join(REPO, "F"))
    return message


def batches_of_distinct_variables(cases):
    """The cases grouped so that no group names a variable twice."""
    batches = []
    for case in cases:
        batch = next((batch for batch in batches if case[0] not in [taken[0] for taken in batch]), None)
        if batch is None:
            batch = []
            batches.append(batch)
        batch.append(case)
    return batches


BAD_BATCHES = batches_of_distinct_variables(BAD)
# Each batch through another playbook: each of them checks first. Not
# verify-rdma.yml for the first three, which hold a bad cluster_image: its
# verify_probe_image defaults to cluster_image and is refused too.
PLAYBOOKS = ["deploy.yml", "train.yml", "teardown.yml", "verify-rdma.yml", "scale.yml", "status.yml", "soak.yml",
             "site.yml"]


@pytest.mark.parametrize("index", range(len(BAD_BATCHES)),
                         ids=["%s-%d-values" % (PLAYBOOKS[index % len(PLAYBOOKS)].split(".")[0], len(batch))
                              for index, batch in enumerate(BAD_BATCHES)])
def test_every_bad_value_is_refused_first_naming_each_and_nothing_changes(api_client, index):
    from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import check_settings
    batch = BAD_BATCHES[index]
    given = dict((name, value) for name, value, _problem, _fix in batch)
    settings = dict({"cluster_namespace": "hostile-%s" % uuid.uuid4().hex[:6]}, **given)
    message = assert_refused_first_and_nothing_changed(api_client, PLAYBOOKS[index % len(PLAYBOOKS)], settings)
    assert message.startswith("%d setting(s) refused: " % len(batch)), message
    for name, value, problem, fix in batch:
        # What the settings check says of this value alone (its unit test
        # holds the variable, the value and the fix in it), word for word.
        [alone] = check_settings(dict(GOOD, **{name: value}))["errors"]
        assert alone["message"] in message and problem in alone["message"] and fix in alone["fix"], name


def test_the_playbooks_refuse_at_least_sixty_bad_values():
    assert len(BAD) >= 60 and sum(len(batch) for batch in BAD_BATCHES) == len(BAD)


@pytest.mark.parametrize("playbook,extra,words", CASES,
                         ids=["%s-%s" % (case[0].split(".")[0], "-".join(case[1])) + "-%d" % index
                              for index, case in enumerate(CASES)])
def test_settings_that_do_not_go_together_are_refused_first(api_client, playbook, extra, words):
    settings = dict({"cluster_namespace": "hostile-%s" % uuid.uuid4().hex[:6]}, **extra)
    message = assert_refused_first_and_nothing_changed(api_client, playbook, settings)
    assert message.startswith("1 setting(s) refused: ") and words in message, message
    name = [key for key in extra if key != "cluster_allow_system_namespace"][0]
    assert name in message and "fix: " in message, message


@pytest.mark.parametrize("playbook, extra, words, work", [
    # Results lost at the end of a run, and a baseline found unreadable after
    # every run, before: now refused before any check or run starts.
    ("verify-rdma.yml", {"verify_report_dir": "/proc/mlinfra-report"},
     "verify_report_dir /proc/mlinfra-report is not a directory this controller can write; fix: -e "
     "verify_report_dir=DIR", "Start a probe pod on each GPU node"),
    ("soak.yml", {"soak_baseline": "/nonexistent/baseline.json"},
     "soak_baseline /nonexistent/baseline.json is not a file this controller can read; fix: the path of a "
     "baseline saved earlier", "Run the workload again and again"),
])
def test_paths_a_play_cannot_use_are_refused_before_any_work(api_client, playbook, extra, words, work):
    settings = dict({"cluster_namespace": "hostile-%s" % uuid.uuid4().hex[:6]}, **extra)
    before = cluster_state(api_client)
    run = run_playbook(playbook, "local", settings)
    assert run.failed
    (message,) = run.failure_messages()
    assert words in message, message
    assert run.tasks_run()[-1] == "Refuse paths that cannot be used, before any work starts"
    assert not [name for name in run.tasks_run() if work in name]
    assert cluster_state(api_client)["nodes"] == before["nodes"]


def rendered(tmp_path, name, extra):
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
    # "no": only the nodes verify-rdma.yml failed are left out; "TRUE": only the ones it passed are taken.
    verified = [[expression for expression in statefulset_of(document)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
        if expression["key"] == "mlinfra.io/rdma-verified"] for document in (off, on)]
    assert verified == [[{"key": "mlinfra.io/rdma-verified", "operator": "NotIn", "values": ["false"]}],
                        [{"key": "mlinfra.io/rdma-verified", "operator": "In", "values": ["true"]}]]
    # The networks without the policies (host networking, the "on" case,
    # needs neither).
    kinds = [doc["kind"] for doc in off["sriov"]]
    assert "SriovNetwork" in kinds and "SriovNetworkNodePolicy" not in kinds and on["sriov"] == []
    train_off, train_on = str(off["train"]), str(on["train"])
    assert "compile.enable=false" in train_off and "compile.enable=true" in train_on
    assert "float8" not in train_off and "quantize.linear.float8" in train_on
