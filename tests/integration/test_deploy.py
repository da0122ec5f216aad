"""deploy.yml, scale.yml and teardown.yml run by ansible-playbook against the
local cluster (real API server, scheduler and controllers; kwok kubelets)."""

import concurrent.futures
import contextlib
import datetime
import getpass
import json
import os
import socket
import time
import uuid

import pytest
from ansible_cli import playbook_in_background, remove_namespace, run_doc_command, run_playbook
from collection_tarball import install_tarball
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


@contextlib.contextmanager
def node_verdicts(api_client, verdicts):
    """Nodes labelled as verify-rdma.yml labels them (node: (verdict, date))
    for the duration; the labels are removed afterwards."""
    core = client.CoreV1Api(api_client)
    for node, (verdict, date) in verdicts.items():
        core.patch_node(node, {"metadata": {"labels": {"mlinfra.io/rdma-verified": verdict,
                                                       "mlinfra.io/rdma-verified-date": date}}})
    try:
        yield
    finally:
        for node in verdicts:
            core.patch_node(node, {"metadata": {"labels": {"mlinfra.io/rdma-verified": None,
                                                           "mlinfra.io/rdma-verified-date": None}}})


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


def test_check_mode_on_a_fresh_namespace_creates_nothing(api_client, deploy_ns, tmp_path):
    # As a user runs it: the playbook of the collection installed from its
    # tarball, nothing of this checkout but the inventory.
    installed = install_tarball(tmp_path)
    run = run_doc_command("ansible-playbook playbooks/deploy.yml -i inventories/<cluster> --check",
                          inventory_values={"cluster_namespace": deploy_ns}, installed=installed)
    assert not run.failed, run.failure_messages() or run.stderr
    paths = [path for path in run.task_paths() if path]
    assert paths and all(path.startswith(installed["root"] + os.sep) for path in paths), paths[:5]
    assert run.changed > 0  # it says what it would do ...
    assert not namespace_exists(api_client, deploy_ns)  # ... and does none of it


def test_pods_that_disagree_on_the_rails_fail_the_scale_naming_the_node(api_client, deploy_ns):
    ns = {"cluster_namespace": deploy_ns, "cluster_gpu_nodes": [GPU_NODES[0], RAIL_DOWN_NODE], "replicas": 1}
    with uncordoned(api_client, RAIL_DOWN_NODE):
        deployed = run_playbook("deploy.yml", "local", ns)
        assert not deployed.failed, deployed.failure_messages()
        # The second pod lands on the other node, one rail short: the pods
        # cannot train together (deploy.yml reads them back the same way),
        # and the failure says the StatefulSet was already scaled, and how
        # to go back.
        scaled = run_playbook("scale.yml", "local", dict(ns, replicas=2))
        assert scaled.failed
        # The readback's failure, then the rescue's, which repeats it.
        checked, message = scaled.failure_messages()
        assert checked in " ".join(message.split()) or " ".join(checked.split()) in message, (checked, message)
        assert "disagree on usable RDMA ports: 4 on 1 pod(s), but 3 on" in message, message
        assert "(node %s)" % RAIL_DOWN_NODE in message and "verify-rdma.yml" in message
        assert message.endswith(
            "the StatefulSet %s/h-kim was already scaled from 1 to 2 pod(s) when this failed; fix the cause and run "
            "scale.yml again, or go back: ansible-playbook playbooks/scale.yml -i inventories/local -e replicas=1"
            % deploy_ns), message
        # What the user reads last: that one failure, once.
        block = scaled.stdout.split("mlinfra.multinode: what this run found\n", 1)[1].splitlines()
        assert [line for line in block if line.startswith("FAILED ")] == [
            "FAILED Scale the GPU pods of the cluster: Say that the StatefulSet was scaled before the failure: "
            + " ".join(message.split())]
    # status.yml shows the same, and fails for nothing. Meanwhile
    # verify-rdma.yml has failed the second pod's node and last passed the
    # first's long ago: both pods are named, the fix with each.
    with node_verdicts(api_client, {RAIL_DOWN_NODE: ("false", "2026-11-20"), GPU_NODES[0]: ("true", "2026-01-02")}):
        status = run_doc_command("ansible-playbook playbooks/status.yml -i inventories/<cluster>",
                                 inventory_values={"cluster_namespace": deploy_ns})
    assert not status.failed, status.failure_messages()
    (table,) = status.results("Show the table")
    assert any(line.startswith("pods differ: usable RDMA ports") for line in table["msg"])
    (warned,) = status.results("Warn about pods on nodes that failed or were verified too long ago")
    assert warned["msg"][0] == "WARNING: 2 pod(s) on doubtful nodes", warned["msg"]
    # Either pod may have landed on either node; the warnings follow the pods' order.
    on = dict((pod.spec.node_name, pod.metadata.name) for pod in pods(api_client, deploy_ns))
    stale, failed = sorted(warned["msg"][1:], key=lambda line: line.startswith(on[RAIL_DOWN_NODE]))
    assert warned["msg"][1:] == sorted(warned["msg"][1:])
    assert stale.startswith("%s runs on %s, last verified 2026-01-02 (" % (on[GPU_NODES[0]], GPU_NODES[0])), stale
    assert "more than cluster_verification_max_age=7); check it again: ansible-playbook playbooks/verify-rdma.yml " \
        "-i inventories/local -e verify_label_nodes=true" in stale
    failed_words = "%s runs on %s, which verify-rdma.yml failed on 2026-11-20" % (on[RAIL_DOWN_NODE], RAIL_DOWN_NODE)
    assert failed.startswith(failed_words), failed
    # The last screen repeats it.
    assert "- Show the state of the GPU pods of the cluster: WARNING: 2 pod(s) on doubtful nodes h-kim-0 runs on" \
        in status.stdout


def test_vfs_the_sriov_role_has_made_are_checked_before_any_pod(api_client, deploy_ns):
    """In sriov mode the operator makes the NICs' resources after the sriov
    role's policies, so they are required only before the StatefulSet."""
    nics = [{"name": "eno%dnp0-network" % n, "resource": "openshift.io/eno%dnp0rdma" % n, "pf": "eno%dnp0" % n,
             "netdev": "net%d" % (n - 4)} for n in (5, 6, 7, 8)]
    nics[0]["resource"] = "openshift.io/notmade"
    run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns, "cluster_rdma_nics": nics})
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert "cannot host a pod (the pods were not changed): nodes %s: openshift.io/notmade (wants 1, has 0); fix: check " \
        "the device plugins" % ", ".join(GPU_NODES[:5]) in messages, messages
    policies = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "sriovnetwork.openshift.io", "v1", "openshift-sriov-network-operator", "sriovnetworknodepolicies")["items"]
    assert "notmade" in [p["spec"]["resourceName"] for p in policies]  # it got that far ...
    assert client.AppsV1Api(api_client).list_namespaced_stateful_set(deploy_ns).items == []  # ... and no further
    # What the user reads last: the failure, then what was already changed.
    last = run.stdout.rstrip().splitlines()[-1]
    assert last.startswith("- Deploy the GPU pods of the cluster: the cluster was already changed before the failure, "
                           "and stays so: "), last
    assert "Create or update the node policies" in last and last.endswith(
        "; run it again once fixed (it changes only what differs)"), last


def test_scale_up_to_zero_and_back_keeps_the_workspaces(api_client, deploy_ns):
    # Six pods need all six nodes, the cordoned one too; in tcp mode its
    # down port does not matter. The nodes are chosen by the GPU operator's
    # label, in each playbook run anew.
    with uncordoned(api_client, RAIL_DOWN_NODE):
        _scale_up_to_zero_and_back(api_client, {"cluster_namespace": deploy_ns, "cluster_network_mode": "tcp",
                                                "cluster_rdma_nics": [], "cluster_gpu_nodes": [],
                                                "cluster_gpu_node_selector": "nvidia.com/gpu.present=true"})


def _scale_up_to_zero_and_back(api_client, ns):
    deploy_ns = ns["cluster_namespace"]
    deployed = run_playbook("deploy.yml", "local", ns)
    assert not deployed.failed, deployed.failure_messages()
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
    cluster roles, SCCs and admission policies of a deployment in namespace."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    dyn = dynamic.DynamicClient(api_client)
    sccs = dyn.resources.get(api_version="security.openshift.io/v1", kind="SecurityContextConstraints").get().items
    policies = [item for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
                for item in dyn.resources.get(api_version="admissionregistration.k8s.io/v1", kind=kind).get().items]
    return sorted(
        ["ServiceAccount/" + a.metadata.name for a in client.CoreV1Api(api_client).list_namespaced_service_account(
            namespace).items if a.metadata.name != "default"]
        + ["Role/" + r.metadata.name for r in rbac.list_namespaced_role(namespace).items]
        + ["RoleBinding/" + b.metadata.name for b in rbac.list_namespaced_role_binding(namespace).items]
        + ["ClusterRole/" + r.metadata.name for r in rbac.list_cluster_role().items
           if r.metadata.name.startswith(namespace + "-")]
        + ["SecurityContextConstraints/" + c.metadata.name for c in sccs if c.metadata.name.startswith(namespace + "-")]
        + ["%s/%s" % (p.kind, p.metadata.name) for p in policies if p.metadata.name.startswith(namespace + "-")])


def pod_admitted(api_client, namespace, account, host_path):
    """Whether the API server admits (in a dry run) a pod of account that
    mounts host_path from the host; else its refusal."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "host-path-probe"}, "spec": {
        "serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "host", "hostPath": {"path": host_path}}]}}
    try:
        client.CoreV1Api(api_client).create_namespaced_pod(namespace, pod, dry_run="All")
        return True
    except client.ApiException as err:
        return json.loads(err.body)["message"]


def running_probes(api_client, namespace):
    found = client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/name=%s-probe" % APP).items
    return sorted((pod.metadata.name, pod.spec.node_name) for pod in found if pod.status.phase == "Running")


def interrupted_soak(api_client, settings, report_dir):
    """soak.yml killed (as a lost controller is) once its privileged probes
    run, before it could delete them; the (probe, node) it left."""
    with playbook_in_background("soak.yml", "local", dict(settings, soak_runs=3, soak_report_dir=str(report_dir))):
        deadline, seen = time.monotonic() + 120, []
        # Every probe made, and no more coming.
        while not seen or running_probes(api_client, settings["cluster_namespace"]) != seen:
            assert time.monotonic() < deadline, "the soak's probes never ran"
            seen = running_probes(api_client, settings["cluster_namespace"])
            time.sleep(2)
    return seen


def plant_lock(api_client, namespace, holder):
    """The deployment's lock as another play holds it, taken now."""
    leases = client.CoordinationV1Api(api_client)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body = {"metadata": {"name": APP + "-lock"}, "spec": {
        "holderIdentity": holder, "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now}}
    try:
        body["metadata"]["resourceVersion"] = leases.read_namespaced_lease(
            APP + "-lock", namespace).metadata.resource_version
    except client.ApiException as err:
        assert err.status == 404
        leases.create_namespaced_lease(namespace, body)
        return
    leases.replace_namespaced_lease(APP + "-lock", namespace, body)


def test_teardown_keeps_the_workspaces_unless_purged_and_leaves_no_privilege(api_client, deploy_ns, tmp_path):
    # OpenShift's objects too: its SCC of the IPC_LOCK capability and the RBAC
    # that lets the deployment's account use it (a prebuilt image: nothing
    # here builds one); with the host network, the policy that holds the
    # SCC's hostPath volumes to /dev/infiniband.
    ns = {"cluster_namespace": deploy_ns, "cluster_platform": "openshift", "image_build": False,
          "cluster_security_mode": "ipc_lock", "cluster_host_network": True, "cluster_rdma_nics": []}
    deployed = run_playbook("deploy.yml", "local", ns)
    assert not deployed.failed, deployed.failure_messages()
    policy = "%s-%s-host-paths" % (deploy_ns, APP)
    assert privileges(api_client, deploy_ns) == [
        "ClusterRole/%s-%s-scc" % (deploy_ns, APP), "RoleBinding/%s-scc" % APP,
        "SecurityContextConstraints/%s-%s-ipc-lock" % (deploy_ns, APP), "ServiceAccount/" + APP,
        "ValidatingAdmissionPolicy/" + policy, "ValidatingAdmissionPolicyBinding/" + policy]
    # The API server's own admission: the deployment's account mounts
    # /dev/infiniband and nothing else of the host; other accounts are not
    # its business. (A new policy takes a moment to reach the admission.)
    deadline = time.monotonic() + 30
    while pod_admitted(api_client, deploy_ns, APP, "/") is True and time.monotonic() < deadline:
        time.sleep(0.5)
    refusal = pod_admitted(api_client, deploy_ns, APP, "/")
    assert isinstance(refusal, str) and "pods of service account %s/%s may mount only /dev/infiniband from the " \
        "host" % (deploy_ns, APP) in refusal, refusal
    assert pod_admitted(api_client, deploy_ns, APP, "/dev/infiniband") is True
    assert pod_admitted(api_client, deploy_ns, "default", "/") is True
    kept = claims(api_client, deploy_ns)
    # A soak whose controller is lost (killed) once its privileged probes
    # run: status.yml names them; teardown.yml deletes them and their account.
    left = interrupted_soak(api_client, ns, tmp_path)
    status = run_playbook("status.yml", "local", ns)
    assert not status.failed, status.failure_messages()
    assert "privileged probe pods: %s (verify-rdma.yml or soak.yml runs, or was interrupted; teardown.yml " \
           "deletes them)" % ", ".join("%s on %s" % probe for probe in left) in status.results("Show the table")[0]["msg"]
    assert status.last_words().endswith("; %d privileged probe pod(s) left" % len(left)), status.last_words()
    # Another play's lock, taken from another controller host: teardown waits
    # cluster_lock_wait seconds, then refuses naming it, deleting nothing.
    foreign = "deploy.yml by alice@elsewhere, pid 7 (start 1)"
    plant_lock(api_client, deploy_ns, foreign)
    started = time.monotonic()
    held = run_playbook("teardown.yml", "local", dict(ns, cluster_lock_wait=2))
    assert held.failed and time.monotonic() - started > 2
    (message,) = held.failure_messages()
    assert message.startswith("another play changes this deployment: the lock %s/%s-lock is held by %s since "
                              % (deploy_ns, APP, foreign)), message
    assert "delete the lock: kubectl -n %s delete lease %s-lock" % (deploy_ns, APP) in message
    assert client.AppsV1Api(api_client).read_namespaced_stateful_set(APP, deploy_ns).spec.replicas == 2
    # The lock a play of this host left when it failed: taken over at once.
    plant_lock(api_client, deploy_ns, "deploy.yml by %s@%s, pid 999999 (start 1)" % (
        getpass.getuser(), socket.gethostname()))
    down = run_playbook("teardown.yml", "local", dict(ns, cluster_lock_wait=0))
    assert not down.failed, down.failure_messages()
    assert client.CoordinationV1Api(api_client).list_namespaced_lease(deploy_ns).items == []
    # The claims kept, with the size a later deploy takes them again with.
    (report,) = down.results("Report what was kept")
    assert report["msg"].strip() == (
        "kept 2 workspace claim(s) in %s; delete them with -e purge_workspaces=true (a deploy takes kept claims "
        "again with the size and class they have): workspace-h-kim-0 (100Gi), workspace-h-kim-1 (100Gi)" % deploy_ns)
    assert wait_gone(api_client, deploy_ns) == []
    assert [p.metadata.name for p in client.CoreV1Api(api_client).list_namespaced_pod(deploy_ns).items] == []
    assert privileges(api_client, deploy_ns) == []
    apps = client.AppsV1Api(api_client)
    assert apps.list_namespaced_stateful_set(deploy_ns).items == []
    # Every ConfigMap the deploy made (the pods' code, commands and training
    # files) goes; only the one Kubernetes puts in every namespace stays.
    config_maps = client.CoreV1Api(api_client).list_namespaced_config_map(deploy_ns).items
    assert [c.metadata.name for c in config_maps] == ["kube-root-ca.crt"]
    assert claims(api_client, deploy_ns) == kept
    purge = run_doc_command("ansible-playbook playbooks/teardown.yml -i inventories/<cluster> [-e purge_workspaces=true] "
                            "[-e purge_image=true] [-e purge_sriov_policies=true]", inventory_values=ns,
                            purge_workspaces=True)
    assert not purge.failed, purge.failure_messages()
    assert claims(api_client, deploy_ns) == {}


def test_two_deploys_at_once_one_changes_the_deployment_the_other_is_refused_naming_it(api_client, deploy_ns):
    ns = {"cluster_namespace": deploy_ns}
    first = run_playbook("deploy.yml", "local", ns)
    assert not first.failed, first.failure_messages()
    # Two operators change one setting at the same moment; each waits at
    # most 2 s for the other's lock (cluster_lock_wait).
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = dict((cpu, pool.submit(run_playbook, "deploy.yml", "local", dict(
            ns, cluster_pod_cpu=cpu, cluster_lock_wait=2))) for cpu in ("30", "31"))
        runs = dict((cpu, future.result()) for cpu, future in runs.items())
    (winner,) = [cpu for cpu, run in runs.items() if not run.failed]
    (loser,) = [cpu for cpu, run in runs.items() if run.failed]
    (message,) = runs[loser].failure_messages()
    assert message.startswith("another play changes this deployment: the lock %s/%s-lock is held by deploy.yml by "
                              "%s@%s, pid " % (deploy_ns, APP, getpass.getuser(), socket.gethostname())), message
    # Refused before it changed anything: the winner's setting is the one
    # the StatefulSet and its pods have.
    assert runs[loser].changed == 0
    sts = client.AppsV1Api(api_client).read_namespaced_stateful_set(APP, deploy_ns)
    trainer = [c for c in sts.spec.template.spec.containers if c.name == "trainer"][0]
    assert trainer.resources.requests["cpu"] == winner
    assert client.CoordinationV1Api(api_client).list_namespaced_lease(deploy_ns).items == []


def test_another_owners_objects_are_refused_before_any_change_and_never_deleted(api_client, deploy_ns):
    """Another team's namespace holding a ConfigMap, a ServiceAccount and a
    claim of the deployment's names (none made by the collection)."""
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": deploy_ns, "labels": {"team": "alice"}}})
    core.create_namespaced_config_map(deploy_ns, {"metadata": {"name": APP + "-pod-runtime"},
                                                  "data": {"notes.txt": "alice's"}})
    core.create_namespaced_service_account(deploy_ns, {"metadata": {"name": APP}})
    core.create_namespaced_persistent_volume_claim(deploy_ns, {
        "metadata": {"name": "workspace-%s-0" % APP, "labels": {"app.kubernetes.io/name": APP}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})

    def hers():
        return (core.read_namespace(deploy_ns).metadata.labels,
                core.read_namespaced_config_map(APP + "-pod-runtime", deploy_ns).data,
                core.read_namespaced_service_account(APP, deploy_ns).metadata.labels,
                core.read_namespaced_persistent_volume_claim("workspace-%s-0" % APP, deploy_ns).metadata.labels,
                sorted(s.metadata.name for s in core.list_namespaced_service(deploy_ns).items),
                client.AppsV1Api(api_client).list_namespaced_stateful_set(deploy_ns).items)
    before = hers()

    run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns})
    assert run.failed and run.changed == 0
    assert run.failure_messages() == [
        "namespace %s exists and was not created by this deployment (no app.kubernetes.io labels; it lacks "
        "app.kubernetes.io/managed-by=mlinfra.multinode and app.kubernetes.io/instance=%s). Nothing was changed. Fix: "
        "set cluster_namespace to a namespace of its own (deploy.yml creates it), or "
        "-e cluster_allow_existing_namespace=true to deploy into this one (its other objects are left alone)"
        % (deploy_ns, APP)]
    assert hers() == before

    allowed = {"cluster_namespace": deploy_ns, "cluster_allow_existing_namespace": True}
    run = run_playbook("deploy.yml", "local", allowed)
    assert run.failed and run.changed == 0
    (message,) = run.failure_messages()
    assert message.startswith(
        "deploy.yml would change objects that this deployment (cluster_app_name={app} in namespace {ns}) did not "
        "create: ConfigMap {ns}/{app}-pod-runtime (no app.kubernetes.io labels); ServiceAccount {ns}/{app} (no "
        "app.kubernetes.io labels); PersistentVolumeClaim {ns}/workspace-{app}-0 (app.kubernetes.io/name={app}); "
        .format(ns=deploy_ns, app=APP)), message
    assert message.endswith("Nothing was changed. Fix: give the deployment names of its own (another "
                            "cluster_app_name or cluster_namespace), or have their owner remove them")
    assert hers() == before

    # A purging teardown deletes only what the deployment made: none of hers.
    down = run_playbook("teardown.yml", "local", dict(allowed, purge_workspaces=True))
    assert not down.failed, down.failure_messages()
    (left,) = down.results("Say which objects of the deployment's names were left to their owner")
    assert left["msg"].strip() == (
        "left 2 object(s) of the deployment's names that it did not create (they lack "
        "app.kubernetes.io/managed-by=mlinfra.multinode and app.kubernetes.io/instance=%s): "
        "ConfigMap %s-pod-runtime, ServiceAccount %s" % (APP, APP, APP))
    assert hers() == before


# What the variables alone refuse (replicas out of range or more than the
# nodes, a mode or a quantity that is not one) is tested case by case in
# tests/unit/plugins/module_utils/test_inventory_settings.py and through the
# playbooks in test_hostile_input.py; these need the cluster.
@pytest.mark.parametrize("extra,words", [
    ({"replicas": 6}, "only 5 of the 6 cluster_gpu_nodes can take a pod: moc-r4pcc04u36-nairr is cordoned"),
    ({"cluster_gpu_nodes": ["moc-r4pcc04u09-nairr", "no-such-node"]}, "no-such-node"),
    # By label: the cordoned node is left out, and the refusal says so.
    ({"cluster_gpu_nodes": [], "cluster_gpu_node_selector": "nvidia.com/gpu.present=true", "replicas": 6},
     "replicas=6 but only 5 of the 5 nodes cluster_gpu_node_selector 'nvidia.com/gpu.present=true' chose can take a "
     "pod: the selector left out moc-r4pcc04u36-nairr (cordoned (unschedulable)); nothing was changed; fix: lower "
     "replicas (-e replicas=5), or see to the nodes it left out"),
    ({"cluster_gpu_nodes": [], "cluster_gpu_node_selector": "example.com/pool in (none)"},
     "cluster_gpu_node_selector 'example.com/pool in (none)' matches no node; nothing was changed; fix: label the GPU "
     "nodes"),
    # One problem for the five nodes that lack the same, naming the variable.
    ({"cluster_gpus_per_node": 8}, "named nodes cannot host a pod (nothing was changed): nodes %s: nvidia.com/gpu "
                                   "(wants 8, has 4); fix: lower cluster_gpus_per_node to what the nodes can "
                                   "allocate, or take the nodes out of cluster_gpu_nodes" % ", ".join(GPU_NODES[:5])),
    # Checked up front like the GPUs, not 166 s later as the scheduler's "Insufficient memory".
    ({"cluster_pod_memory": "1Ei"}, "memory (wants 1Ei, has 1055315188Ki); fix: lower cluster_pod_memory to what "
                                    "the nodes can allocate"),
    # macvlan: no operator makes these resources, so they must be there already.
    ({"cluster_rdma_network_type": "macvlan", "cluster_rdma_nics": [
        {"name": "rdma-a", "resource": "example.com/not-offered", "pf": "eno5np0", "netdev": "net1"}]},
     "example.com/not-offered (wants 1, has 0)"),
])
def test_bad_input_fails_before_anything_is_created(api_client, deploy_ns, extra, words):
    run = run_playbook("deploy.yml", "local", dict(extra, cluster_namespace=deploy_ns))
    assert run.failed
    (message,) = run.failure_messages()
    assert words in message, message
    assert not namespace_exists(api_client, deploy_ns)
