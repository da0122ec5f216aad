"""deploy.yml, scale.yml and teardown.yml run by ansible-playbook against the
local cluster (real API server, scheduler and controllers; kwok kubelets)."""

import contextlib
import json
import time
import types
import uuid

import pytest
from ansible_cli import remove_namespace, run_module, run_playbook
from kubernetes import client, dynamic

pytestmark = pytest.mark.integration

APP = "h-kim"
GPU_NODES = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr", "moc-r4pcc04u12-nairr",
             "moc-r4pcc04u16-nairr", "moc-r4pcc04u25-nairr", "moc-r4pcc04u36-nairr"]
# Recorded with a port down, and cordoned in the local inventory for that.
RAIL_DOWN_NODE = "moc-r4pcc04u36-nairr"


@pytest.fixture
def deploy_ns(api_client):
    """A namespace name for one test; whatever the test deployed there is
    torn down (claims too) afterwards."""
    name = "dep-%s" % uuid.uuid4().hex[:6]
    yield name
    remove_namespace(api_client, name)


def pods(api_client, namespace):
    items = client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/name=%s" % APP).items
    return sorted((p for p in items if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)


def claims(api_client, namespace):
    items = client.CoreV1Api(api_client).list_namespaced_persistent_volume_claim(namespace).items
    return dict((c.metadata.name, (c.metadata.uid, c.spec.volume_name)) for c in items)


def namespace_exists(api_client, namespace):
    try:
        client.CoreV1Api(api_client).read_namespace(namespace)
        return True
    except client.ApiException as err:
        assert err.status == 404
        return False


@contextlib.contextmanager
def uncordoned(api_client, node):
    """The node takes pods for the duration, and is cordoned again afterwards."""
    core = client.CoreV1Api(api_client)
    core.patch_node(node, {"spec": {"unschedulable": False}})
    try:
        yield node
    finally:
        core.patch_node(node, {"spec": {"unschedulable": True}})


def exec_json(api_client, namespace, pod, command):
    """Run a command in the pod's trainer container and parse its output as JSON."""
    from kubernetes.stream import stream
    out = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, pod, namespace,
                 container="trainer", command=command, stdout=True, stderr=True, stdin=False, tty=False)
    return json.loads(out)


def wait_gone(api_client, namespace, timeout=60):
    deadline = time.monotonic() + timeout
    while pods(api_client, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    return pods(api_client, namespace)


@pytest.fixture(scope="module")
def deployed(api_client):
    """One deployment of the local inventory from nothing, which the tests
    that only read it share: status.yml before it, and the first deploy.yml
    run (each cost a deploy and a teardown per test)."""
    ns = {"cluster_namespace": "dep-%s" % uuid.uuid4().hex[:6]}
    try:
        before = run_playbook("status.yml", "local", ns)
        first = run_playbook("deploy.yml", "local", ns)
        yield types.SimpleNamespace(namespace=ns["cluster_namespace"], status_before=before, first=first)
    finally:
        remove_namespace(api_client, ns["cluster_namespace"])


def test_deploy_from_nothing_then_nothing_changes(api_client, deployed):
    first, deploy_ns = deployed.first, deployed.namespace
    assert not first.failed, first.failure_messages() or first.stderr
    assert first.changed > 0
    running = pods(api_client, deploy_ns)
    assert [p.metadata.name for p in running] == [APP + "-0", APP + "-1"]
    nodes = [p.spec.node_name for p in running]
    assert set(nodes) <= set(GPU_NODES) and len(set(nodes)) == 2
    for pod in running:
        assert pod.status.phase == "Running"
        trainer = pod.spec.containers[0]
        assert trainer.resources.limits["nvidia.com/gpu"] == "4"
        assert trainer.resources.limits["openshift.io/eno5np0rdma"] == "1"
        assert "IPC_LOCK" not in str(trainer.security_context.capabilities) or trainer.security_context.privileged
        assert '"interface": "net4"' in pod.metadata.annotations["k8s.v1.cni.cncf.io/networks"]
        assert pod.spec.init_containers[0].name == "autodetect"
    sts = client.AppsV1Api(api_client).read_namespaced_stateful_set(APP, deploy_ns)
    assert sts.spec.pod_management_policy == "Parallel"
    assert sts.spec.persistent_volume_claim_retention_policy.when_scaled == "Retain"
    assert sts.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
    headless = client.CoreV1Api(api_client).read_namespaced_service(APP + "-headless", deploy_ns)
    assert headless.spec.cluster_ip == "None" and headless.spec.publish_not_ready_addresses is True
    # The init container ran the shipped detection on each pod's node; the
    # play read its result back from every pod and found them agreeing.
    for pod in running:
        detected = exec_json(api_client, deploy_ns, pod.metadata.name, ["sh", "-c", 'cat "$MLINFRA_RUN_DIR/nccl.json"'])
        assert detected["transport"] == "rdma" and len(detected["rdma_ports"]) == 4 and detected["gpus"] == 4
    (report,) = first.results("Report what each pod detected")
    assert [item["msg"].split(":")[0] for item in report["results"]] == [
        "%s on %s" % (pod.metadata.name, pod.spec.node_name) for pod in running]
    (agreement,) = first.results("Check that the pods agree")
    assert not agreement.get("failed") and not agreement.get("skipped")

    second = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns})
    assert not second.failed, second.failure_messages()
    assert second.changed == 0


def test_check_mode_on_a_fresh_namespace_creates_nothing(api_client, deploy_ns):
    run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns}, check=True)
    assert not run.failed, run.failure_messages() or run.stderr
    assert run.changed > 0  # it says what it would do ...
    assert not namespace_exists(api_client, deploy_ns)  # ... and does none of it


def test_pods_that_disagree_on_the_rails_fail_the_deploy_naming_the_node(api_client, deploy_ns):
    with uncordoned(api_client, RAIL_DOWN_NODE):
        run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns,
                                                   "cluster_gpu_nodes": [GPU_NODES[0], RAIL_DOWN_NODE]})
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert "disagree on usable RDMA ports: 4 on 1 pod(s), but 3 on" in messages, messages
    assert "(node %s)" % RAIL_DOWN_NODE in messages and "verify-rdma.yml" in messages
    # status.yml shows the same, and fails for nothing.
    status = run_playbook("status.yml", "local", {"cluster_namespace": deploy_ns})
    assert not status.failed, status.failure_messages()
    (table,) = status.results("Show the table")
    assert any(line.startswith("pods differ: usable RDMA ports") for line in table["msg"])


def test_vfs_the_sriov_role_has_made_are_checked_before_any_pod(api_client, deploy_ns):
    """In sriov mode the operator makes the NICs' resources after the sriov
    role's policies, so they are required only before the StatefulSet."""
    nics = [{"name": "eno%dnp0-network" % n, "resource": "openshift.io/eno%dnp0rdma" % n, "pf": "eno%dnp0" % n,
             "netdev": "net%d" % (n - 4)} for n in (5, 6, 7, 8)]
    nics[0]["resource"] = "openshift.io/notmade"
    run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns, "cluster_rdma_nics": nics})
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert "cannot host a pod: openshift.io/notmade (wants 1, has 0)" in messages, messages
    policies = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "sriovnetwork.openshift.io", "v1", "openshift-sriov-network-operator", "sriovnetworknodepolicies")["items"]
    assert "notmade" in [p["spec"]["resourceName"] for p in policies]  # it got that far ...
    assert client.AppsV1Api(api_client).list_namespaced_stateful_set(deploy_ns).items == []  # ... and no further


def test_status_shows_pods_nodes_images_and_detected_settings(api_client, deployed):
    deploy_ns = deployed.namespace
    ns = {"cluster_namespace": deploy_ns}
    before = deployed.status_before
    assert not before.failed, before.failure_messages()
    first_line = before.results("Show the table")[0]["msg"][0]
    assert first_line.endswith("not deployed (ansible-playbook playbooks/deploy.yml -i inventories/local)")
    assert not deployed.first.failed
    status = run_playbook("status.yml", "local", ns)
    assert not status.failed and status.changed == 0
    lines = status.results("Show the table")[0]["msg"]
    assert status.last_words() == lines  # the table is what the user reads last
    assert lines[0] == "StatefulSet %s/%s: 2 of 2 pod(s) Ready" % (deploy_ns, APP)
    assert lines[1].split() == ["POD", "NODE", "STATE", "IMAGE", "TRANSPORT", "RDMA-PORTS", "GPUS", "GPUDIRECT"]
    for line, pod in zip(lines[2:4], pods(api_client, deploy_ns)):
        cells = line.split()
        assert cells[:4] == [pod.metadata.name, pod.spec.node_name, "Running/Ready", "registry.local/mlinfra/trainer:0.1.0"]
        assert cells[4:7] == ["rdma", "4", "4"]
    assert lines[4].startswith(APP + "-0: ") and "NCCL_SOCKET_IFNAME==eth0" in lines[4]
    assert "workspace claims: workspace-%s-0, workspace-%s-1" % (APP, APP) in lines


def test_pods_exec_reports_each_pod_and_fails_only_when_asked(localcluster, api_client, deployed, tmp_path):
    deploy_ns = deployed.namespace
    assert not deployed.first.failed
    args = {"kubeconfig": str(localcluster.KUBECONFIG), "namespace": deploy_ns,
            "label_selectors": ["app.kubernetes.io/name=" + APP], "container": "trainer"}
    nodes = run_module("pods_exec", dict(args, command=["sh", "-c", 'echo "{\\"node\\": \\"$MLINFRA_NODE_NAME\\"}"'],
                                         parse_json=True), check=True)
    assert not nodes.get("failed") and not nodes["changed"] and nodes["failed_pods"] == []
    assert [(p["pod"], p["json"]["node"]) for p in nodes["pods"]] == [
        (p.metadata.name, p.spec.node_name) for p in pods(api_client, deploy_ns)]
    exit3 = run_module("pods_exec", dict(args, command=["sh", "-c", "echo half >&2; exit 3"]))
    assert not exit3.get("failed") and [p["rc"] for p in exit3["pods"]] == [3, 3]
    assert exit3["pods"][0]["stderr"] == "half\n" and exit3["failed_pods"] == [APP + "-0", APP + "-1"]
    missing = run_module("pods_exec", dict(args, command=["no-such-program"], fail_on_error=True))
    assert missing["failed"] and missing["pods"][0]["rc"] is None and missing["pods"][0]["error"]
    assert missing["msg"].startswith("the command failed in 2 of 2 pod(s): %s-0: " % APP)
    # Followed while the answer holds: the third look answers "done". The
    # pods are processes of this machine, so they share tmp_path with the test.
    looks = tmp_path / "looks"
    counting = ('n=$(cat "$1" 2>/dev/null || echo 0); echo $((n + 1)) > "$1"; '
                'if [ "$n" -ge 2 ]; then echo "{\\"state\\": \\"done\\"}"; else echo "{\\"state\\": \\"running\\"}"; fi')
    followed = run_module("pods_exec", dict(args, pods=[APP + "-0"], command=["sh", "-c", counting, "sh", str(looks)],
                                            parse_json=True, repeat_while={"state": "running"}, repeat_every=1,
                                            repeat_for=60))
    assert not followed.get("failed") and followed["rounds"] == 3 and looks.read_text() == "3\n"
    assert followed["pods"][0]["json"] == {"state": "done"}
    unparsed = run_module("pods_exec", dict(args, command=["true"], repeat_while={"state": "running"}))
    assert unparsed["failed"] and unparsed["msg"] == "repeat_while compares the pods' JSON answers: set parse_json: true"


def test_scale_up_to_zero_and_back_keeps_the_workspaces(api_client, deploy_ns):
    # Six pods need all six nodes, the cordoned one too; in tcp mode its
    # down port does not matter.
    with uncordoned(api_client, RAIL_DOWN_NODE):
        _scale_up_to_zero_and_back(api_client, {"cluster_namespace": deploy_ns, "cluster_network_mode": "tcp",
                                                "cluster_rdma_nics": []})


def _scale_up_to_zero_and_back(api_client, ns):
    deploy_ns = ns["cluster_namespace"]
    assert not run_playbook("deploy.yml", "local", ns).failed
    before = claims(api_client, deploy_ns)

    six = run_playbook("scale.yml", "local", dict(ns, replicas=6))
    assert not six.failed, six.failure_messages()
    running = pods(api_client, deploy_ns)
    assert len(running) == 6 and sorted(p.spec.node_name for p in running) == sorted(GPU_NODES)
    after_six = claims(api_client, deploy_ns)
    assert len(after_six) == 6
    assert all(after_six[name] == value for name, value in before.items())

    zero = run_playbook("scale.yml", "local", dict(ns, replicas=0))
    assert not zero.failed, zero.failure_messages()
    assert wait_gone(api_client, deploy_ns) == []
    assert claims(api_client, deploy_ns) == after_six  # dormant: every workspace kept

    two = run_playbook("deploy.yml", "local", dict(ns, replicas=2))
    assert not two.failed, two.failure_messages()
    assert len(pods(api_client, deploy_ns)) == 2
    assert claims(api_client, deploy_ns) == after_six  # the same claims, the same volumes


def privileges(api_client, namespace):
    """The service accounts (but the namespace's default), roles, bindings,
    cluster roles and SCCs of a deployment in namespace."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    sccs = dynamic.DynamicClient(api_client).resources.get(
        api_version="security.openshift.io/v1", kind="SecurityContextConstraints").get().items
    return sorted(
        ["ServiceAccount/" + a.metadata.name for a in client.CoreV1Api(api_client).list_namespaced_service_account(
            namespace).items if a.metadata.name != "default"]
        + ["Role/" + r.metadata.name for r in rbac.list_namespaced_role(namespace).items]
        + ["RoleBinding/" + b.metadata.name for b in rbac.list_namespaced_role_binding(namespace).items]
        + ["ClusterRole/" + r.metadata.name for r in rbac.list_cluster_role().items
           if r.metadata.name.startswith(namespace + "-")]
        + ["SecurityContextConstraints/" + c.metadata.name for c in sccs if c.metadata.name.startswith(namespace + "-")])


def test_teardown_keeps_the_workspaces_unless_purged_and_leaves_no_privilege(api_client, deploy_ns):
    # OpenShift's objects too: its SCC of the IPC_LOCK capability and the RBAC
    # that lets the deployment's account use it (a prebuilt image: nothing
    # here builds one).
    ns = {"cluster_namespace": deploy_ns, "cluster_platform": "openshift", "image_build": False,
          "cluster_security_mode": "ipc_lock"}
    assert not run_playbook("deploy.yml", "local", ns).failed
    assert privileges(api_client, deploy_ns) == [
        "ClusterRole/%s-%s-scc" % (deploy_ns, APP), "RoleBinding/%s-scc" % APP,
        "SecurityContextConstraints/%s-%s-ipc-lock" % (deploy_ns, APP), "ServiceAccount/" + APP]
    kept = claims(api_client, deploy_ns)
    down = run_playbook("teardown.yml", "local", ns)
    assert not down.failed, down.failure_messages()
    assert wait_gone(api_client, deploy_ns) == []
    assert privileges(api_client, deploy_ns) == []
    apps = client.AppsV1Api(api_client)
    assert apps.list_namespaced_stateful_set(deploy_ns).items == []
    # Every ConfigMap the deploy made (the pods' code, commands and training
    # files) goes; only the one Kubernetes puts in every namespace stays.
    config_maps = client.CoreV1Api(api_client).list_namespaced_config_map(deploy_ns).items
    assert [c.metadata.name for c in config_maps] == ["kube-root-ca.crt"]
    assert claims(api_client, deploy_ns) == kept
    purge = run_playbook("teardown.yml", "local", dict(ns, purge_workspaces=True))
    assert not purge.failed, purge.failure_messages()
    assert claims(api_client, deploy_ns) == {}


# What the variables alone refuse (replicas out of range or more than the
# nodes, a mode or a quantity that is not one) is tested case by case in
# tests/unit/plugins/module_utils/test_inventory_settings.py and through the
# playbooks in test_hostile_input.py; these need the cluster.
@pytest.mark.parametrize("extra,words", [
    ({"replicas": 6}, "only 5 of the cluster_gpu_nodes take pods: moc-r4pcc04u36-nairr is cordoned"),
    ({"cluster_gpu_nodes": ["moc-r4pcc04u09-nairr", "no-such-node"]}, "no-such-node"),
    ({"cluster_gpus_per_node": 8}, "nvidia.com/gpu (wants 8, has 4)"),
    # macvlan: no operator makes these resources, so they must be there already.
    ({"cluster_rdma_network_type": "macvlan", "cluster_rdma_nics": [
        {"name": "rdma-a", "resource": "example.com/not-offered", "pf": "eno5np0", "netdev": "net1"}]},
     "example.com/not-offered (wants 1, has 0)"),
])
def test_bad_input_fails_before_anything_is_created(api_client, deploy_ns, extra, words):
    run = run_playbook("deploy.yml", "local", dict(extra, cluster_namespace=deploy_ns))
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert words in messages, messages
    assert not namespace_exists(api_client, deploy_ns)
