"""deploy.yml of the local inventory from nothing, and the tests that only
read that one deployment: the second run that changes nothing, status.yml
before and after, and pods_exec in its pods. A file of their own, so that
the deployment, which holds two GPU nodes, is removed before
test_deploy.py's tests that need every node (a module fixture lives until
its file ends)."""

import types
import uuid

import pytest
from ansible_cli import REPO, remove_namespace, run_module, run_playbook
from kubernetes import client
from test_deploy import APP, GPU_NODES, exec_json, pods

from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_commands import SUBCOMMANDS
from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_runtime import shipped_module_utils

pytestmark = pytest.mark.integration


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


def test_every_subcommand_starts_from_what_the_pods_mount(api_client, deployed):
    """The pod-runtime ConfigMap's keys back at their paths (the volume's
    items), the program beside them, as the pods mount them: the files are
    those the program imports, and every subcommand starts from them."""
    from kubernetes.stream import stream
    assert not deployed.first.failed
    script = ('cd "$MLINFRA_PLUGINS_DIR/module_utils" && find . -name "*.py" && for command in %s; do '
              'python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra" "$command" --help > /dev/null && echo "started $command"; '
              'done' % " ".join(sorted(SUBCOMMANDS)))
    out = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, APP + "-1", deployed.namespace,
                 container="trainer", command=["sh", "-c", script], stdout=True, stderr=True, stdin=False, tty=False)
    lines = out.splitlines()
    files = sorted(line[2:] for line in lines if line.startswith("./"))
    assert files == sorted(name.replace(".", "/") + ".py" for name in shipped_module_utils(REPO)), out
    assert [line for line in lines if line.startswith("started ")] == ["started " + name for name in sorted(SUBCOMMANDS)], out


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
    # Below the table, what the user reads last: its first line, where the
    # pods differ (the table's GPUDIRECT column: a recorded node without
    # nvidia_peermem may take one) and what stays behind, on one line.
    gpudirect = set(line.split()[7] for line in lines[2:4])
    assert status.last_words() == "StatefulSet %s/%s: 2 of 2 pod(s) Ready%s; 0 privileged probe pod(s) left" % (
        deploy_ns, APP, "; the pods differ in gpudirect" if len(gpudirect) > 1 else "")
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


def test_settings_the_deployed_statefulset_cannot_take_are_refused_before_any_change(api_client, deployed):
    """Shared workspaces asked of a deployment with a claim per pod: refused
    before the sriov role runs, naming the variable both ways, and nothing
    was made (the shared claim among it) or changed."""
    deploy_ns = deployed.namespace
    assert not deployed.first.failed
    apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
    generation = apps.read_namespaced_stateful_set(APP, deploy_ns).metadata.generation
    run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns, "cluster_storage_mode": "shared",
                                               "cluster_storage_size": "1Ti"})
    assert run.failed
    (message,) = run.failure_messages()
    assert message == (
        "cluster_storage_mode='shared', but the StatefulSet %s/%s was deployed with cluster_storage_mode='per-pod', "
        "and Kubernetes does not change the workspace claims of a live StatefulSet; fix: deploy with "
        "cluster_storage_mode='per-pod', or run teardown.yml (it keeps the workspace claims) and then deploy.yml"
        % (deploy_ns, APP))
    assert run.changed == 0 and not run.results("mlinfra.multinode.sriov")
    assert sorted(claim.metadata.name for claim in core.list_namespaced_persistent_volume_claim(deploy_ns).items) == \
        ["workspace-%s-0" % APP, "workspace-%s-1" % APP]
    assert apps.read_namespaced_stateful_set(APP, deploy_ns).metadata.generation == generation
