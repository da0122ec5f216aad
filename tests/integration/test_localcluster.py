"""The local cluster behaves like a real one where the collection relies on it.

Everything here goes through the real kube-apiserver with the python
`kubernetes` client: the scheduler places pods by node affinity, taints and
extended resources; kwok (the fake kubelet) runs `exec` as a local command in
the environment of the pod's node and serves `logs`; custom resources are
validated by the API server against the operators' own CRDs
(tools/localcluster/upstream_crds.py), and the served ones are those files.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

pytestmark = pytest.mark.integration

GPU_NODES = {
    "moc-r4pcc04u09-nairr": "healthy-roce-h100",
    "moc-r4pcc04u11-nairr": "healthy-roce-h100",
    "moc-r4pcc04u12-nairr": "healthy-roce-h100",
    "moc-r4pcc04u16-nairr": "no-peermem",
    "moc-r4pcc04u25-nairr": "iommu-off",
    "moc-r4pcc04u36-nairr": "port-down",
}
INFRA_NODE = "moc-infra-worker-1"
# Cordoned in the inventory (a port down).
CORDONED_NODE = "moc-r4pcc04u36-nairr"
FIRST_TWO = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
TIMEOUT = 60
SNAPSHOTS = Path(__file__).resolve().parents[1] / "fixtures" / "nodes"


def wait_for(what: str, check, timeout: float = TIMEOUT, interval: float = 0.2):
    """Polls check() until it returns something truthy; returns that."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def is_ready(pod) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def exec_in(api_client, pod, namespace, command, container=None):
    """Runs command in the pod through the API server's pods/exec.

    Returns (stdout, stderr, status): status is the v1 Status the server sends
    on the websocket's error channel when the command ends.
    """
    kwargs = {"container": container} if container else {}
    # kwok's server finds a pod's exec through its own watch of Exec objects,
    # which can lag a moment behind the pod's readiness on a busy machine
    # (localcluster.py, PodSync.configure): that answer is asked again.
    deadline = time.monotonic() + 10
    while True:
        ws = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, pod, namespace,
                    command=command, stdout=True, stderr=True, stdin=False, tty=False,
                    _preload_content=False, **kwargs)
        ws.run_forever(timeout=30)
        out, err, status = ws.read_stdout(), ws.read_stderr(), ws.read_channel(3)
        ws.close()
        status = yaml.safe_load(status) if status else None
        if not (status and "no exec found for container" in status.get("message", "")) or time.monotonic() > deadline:
            return out, err, status
        time.sleep(0.2)


def statefulset(name: str, replicas: int, node_terms: list[dict]) -> dict:
    """GPU pods (all four GPUs of a node each) with required node affinity."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            # Changing the template does not touch running pods: only pods
            # created afterwards (scale-up) get the new one.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": node_terms}]}}},
                    "tolerations": [GPU_TOLERATION],
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "trainer",
                        "image": "registry.example/mlinfra/trainer:test",
                        "command": ["sleep", "infinity"],
                        "env": [{"name": "RUN_ID", "value": "it-42"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "resources": {"limits": {"nvidia.com/gpu": "4", "openshift.io/eno5np0rdma": "1"},
                                      "requests": {"nvidia.com/gpu": "4", "openshift.io/eno5np0rdma": "1"}},
                    }],
                },
            },
        },
    }


def sts_pods(core, namespace, name):
    return core.list_namespaced_pod(namespace, label_selector=f"app={name}").items


def wait_statefulset(core, apps, namespace, name, replicas):
    """Waits until exactly `replicas` pods exist and all are Running and Ready."""
    def done():
        sts = apps.read_namespaced_stateful_set(name, namespace)
        pods = sts_pods(core, namespace, name)
        if (sts.status.ready_replicas or 0) == replicas and len(pods) == replicas and all(map(is_ready, pods)):
            return sorted(pods, key=lambda p: p.metadata.name)
        return None
    return wait_for(f"{replicas} ready pods of statefulset {name}", done)


# ---------------------------------------------------------------------------


def test_nodes_come_from_the_inventory(api_client):
    nodes = {n.metadata.name: n for n in client.CoreV1Api(api_client).list_node().items}
    assert set(nodes) == set(GPU_NODES) | {INFRA_NODE}
    for name, node in nodes.items():
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions), name
        assert [a.address for a in node.status.addresses] == ["127.0.0.1"]
        assert node.metadata.labels["kubernetes.io/hostname"] == name
    for name, snapshot in GPU_NODES.items():
        node = nodes[name]
        labels, alloc = node.metadata.labels, node.status.allocatable
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["feature.node.kubernetes.io/rdma.capable"] == "true"
        assert alloc["nvidia.com/gpu"] == "4"
        assert {alloc[f"openshift.io/eno{i}np0rdma"] for i in (5, 6, 7, 8)} == {"8"}
        taints = [(t.key, t.value, t.effect) for t in node.spec.taints]
        if name == CORDONED_NODE:
            assert node.spec.unschedulable is True
            assert sorted(taints) == [("node.kubernetes.io/unschedulable", None, "NoSchedule"),
                                      ("nvidia.com/gpu", "present", "NoSchedule")]
        else:
            assert not node.spec.unschedulable
            assert taints == [("nvidia.com/gpu", "present", "NoSchedule")]
        assert node.metadata.annotations["localcluster.mlinfra.io/snapshot"] == snapshot
    infra = nodes[INFRA_NODE]
    assert "nvidia.com/gpu" not in infra.status.allocatable
    assert not infra.spec.taints


def test_scheduler_honours_taints(api_client, namespace):
    core = client.CoreV1Api(api_client)
    container = {"name": "c", "image": "registry.example/busybox:test"}
    # No toleration: only the untainted (non-GPU) node will do.
    core.create_namespaced_pod(namespace, {"metadata": {"name": "plain"}, "spec": {"containers": [container]}})
    # Pinned to a GPU node without tolerating its taint: never scheduled.
    core.create_namespaced_pod(namespace, {"metadata": {"name": "untolerated"}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": FIRST_TWO[0]}, "containers": [container]}})
    plain = wait_for("pod plain ready", lambda: (p := core.read_namespaced_pod("plain", namespace)) and is_ready(p) and p)
    assert plain.spec.node_name == INFRA_NODE

    def unschedulable():
        pod = core.read_namespaced_pod("untolerated", namespace)
        cond = [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]
        return cond and cond[0].status == "False" and cond[0].reason == "Unschedulable" and cond[0]
    cond = wait_for("pod untolerated to be found unschedulable", unschedulable)
    assert "untolerated taint" in cond.message
    assert core.read_namespaced_pod("untolerated", namespace).spec.node_name is None
    for name in ("plain", "untolerated"):
        core.delete_namespaced_pod(name, namespace)


@pytest.fixture(scope="module")
def trainer(api_client, namespace):
    """A StatefulSet of 2 GPU pods pinned to u09 and u11, Running and Ready."""
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    pinned = [{"key": "kubernetes.io/hostname", "operator": "In", "values": FIRST_TWO}]
    apps.create_namespaced_stateful_set(namespace, statefulset("trainer", 2, pinned))
    pods = wait_statefulset(core, apps, namespace, "trainer", 2)
    yield pods
    apps.delete_namespaced_stateful_set("trainer", namespace)


def test_statefulset_pods_run_on_the_named_nodes(trainer):
    assert sorted(p.spec.node_name for p in trainer) == FIRST_TWO
    for pod in trainer:
        status = pod.status.container_statuses[0]
        assert status.ready and status.state.running is not None
        assert pod.status.host_ip == "127.0.0.1" and pod.status.pod_ip


@pytest.fixture
def all_gpu_nodes_schedulable(api_client):
    core = client.CoreV1Api(api_client)
    core.patch_node(CORDONED_NODE, {"spec": {"unschedulable": False}})
    yield
    core.patch_node(CORDONED_NODE, {"spec": {"unschedulable": True}})


def test_scale_up_lands_on_the_other_gpu_nodes_then_back(api_client, namespace, trainer, all_gpu_nodes_schedulable):
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    before = {p.metadata.name: p.spec.node_name for p in trainer}
    # New pods may go to any GPU node; the two running ones stay where they are.
    any_gpu = [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]
    apps.patch_namespaced_stateful_set("trainer", namespace, {"spec": {"replicas": 6, "template": {"spec": {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": any_gpu}]}}}}}}})
    pods = wait_statefulset(core, apps, namespace, "trainer", 6)
    placement = {p.metadata.name: p.spec.node_name for p in pods}
    assert {name: placement[name] for name in before} == before
    # Each pod takes all four GPUs of a node: one pod per GPU node, and none
    # on the node without GPUs.
    assert sorted(placement.values()) == sorted(GPU_NODES)
    assert INFRA_NODE not in placement.values()

    # Every pod's exec environment is its own node's.
    for pod in pods:
        out, err, status = exec_in(api_client, pod.metadata.name, namespace,
                                   ["sh", "-c", 'echo "$MLINFRA_NODE_NAME $MLINFRA_HOST_ROOT"'])
        assert status["status"] == "Success", (out, err, status)
        node, root = out.split()
        assert node == pod.spec.node_name
        assert root == str(SNAPSHOTS / GPU_NODES[node])

    apps.patch_namespaced_stateful_set("trainer", namespace, {"spec": {"replicas": 2}})
    pods = wait_statefulset(core, apps, namespace, "trainer", 2)
    assert {p.metadata.name: p.spec.node_name for p in pods} == before


def test_exec_runs_in_the_environment_of_the_pods_node(api_client, namespace, trainer, localcluster):
    root = localcluster.ROOT
    for pod in trainer:
        name = pod.metadata.name
        out, err, status = exec_in(api_client, name, namespace, [
            "sh", "-c", 'printf "%s\\n" "$MLINFRA_NODE_NAME" "$MLINFRA_HOST_ROOT" "$PWD" "$RUN_ID" "$POD_NAME" '
                        '"$(command -v nvidia-smi)" "$(command -v mlinfra)"'])
        assert status == {"metadata": {}, "status": "Success"}, (out, err)
        node, host_root, pwd, run_id, pod_name, nvidia_smi, program = out.splitlines()
        snapshot = root / "tests" / "fixtures" / "nodes" / GPU_NODES[pod.spec.node_name]
        assert node == pod.spec.node_name
        assert host_root == str(snapshot)
        assert pwd == str(localcluster.PODS_DIR / namespace / name / "workspace")
        # The container's own env (literal and downward API) is there too.
        assert (run_id, pod_name) == ("it-42", name)
        assert nvidia_smi == str(snapshot / "usr" / "bin" / "nvidia-smi")
        assert program == str(root / "files" / "bin" / "mlinfra")


def test_exec_of_a_bare_command_uses_the_nodes_path(api_client, namespace, trainer):
    """`kubectl exec pod -- nvidia-smi`: the node snapshot's nvidia-smi runs,
    exactly as if it were run on this machine with that node's environment."""
    pod = trainer[0]
    out, err, status = exec_in(api_client, pod.metadata.name, namespace, ["nvidia-smi"])
    snapshot = SNAPSHOTS / GPU_NODES[pod.spec.node_name]
    direct = subprocess.run([str(snapshot / "usr" / "bin" / "nvidia-smi")], capture_output=True, text=True,
                            env={**os.environ, "MLINFRA_HOST_ROOT": str(snapshot),
                                 "MLINFRA_NODE_NAME": pod.spec.node_name}, check=False)
    assert (out, err) == (direct.stdout, direct.stderr)
    expected = 0 if direct.returncode == 0 else direct.returncode
    got = 0 if status["status"] == "Success" else int(status["details"]["causes"][0]["message"])
    assert got == expected


def test_exec_non_zero_exit_code_comes_back_through_the_api(api_client, namespace, trainer):
    pod = trainer[1].metadata.name
    # What the API server sends on the error channel (channel 3) when the
    # command fails: a Failure Status, reason NonZeroExitCode, the code in
    # details.causes -- where kubernetes.core.k8s_exec reads its `rc`.
    out, err, status = exec_in(api_client, pod, namespace, ["sh", "-c", "echo partial; echo oops >&2; exit 3"])
    assert (out, err) == ("partial\n", "oops\n")
    assert status["status"] == "Failure"
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    # The python client's own reading of it.
    ws = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, pod, namespace,
                command=["sh", "-c", "exit 7"], stdout=True, stderr=True, stdin=False, tty=False,
                _preload_content=False)
    ws.run_forever(timeout=30)
    assert ws.returncode == 7
    ws.close()
    # A command killed by a signal reports 128 + signal, as container runtimes do.
    status = exec_in(api_client, pod, namespace, ["sh", "-c", "kill -9 $$"])[2]
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "137"}]
    # And success is a plain Success.
    status = exec_in(api_client, pod, namespace, ["true"])[2]
    assert status["status"] == "Success"


SHIPPED_SCRIPT = """
import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as handle:
    json.dump({"node": os.environ["MLINFRA_NODE_NAME"], "root": os.environ["MLINFRA_HOST_ROOT"],
               "out": out}, handle)
print("wrote", out)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
"""


def pod_with_shipped_init(name, config_map, exit_code=0):
    """A pod whose init container runs a script from a ConfigMap volume and
    writes into an emptyDir the main container also mounts, as the
    statefulset role's autodetect init container does."""
    mounts = [{"name": "run", "mountPath": "/run/demo"}, {"name": "code", "mountPath": "/opt/demo/bin"}]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "nodeName": FIRST_TWO[0],
            "tolerations": [GPU_TOLERATION],
            "terminationGracePeriodSeconds": 1,
            "initContainers": [{"name": "detect", "image": "registry.example/demo:1",
                                "command": ["python3", "/opt/demo/bin/detect.py"],
                                "args": ["--out", "/run/demo/result.json"],
                                "env": [{"name": "EXIT_CODE", "value": str(exit_code)}],
                                "volumeMounts": mounts}],
            "containers": [{"name": "main", "image": "registry.example/demo:1", "command": ["sleep", "infinity"],
                            "env": [{"name": "RESULT_DIR", "value": "/run/demo"}], "volumeMounts": mounts}],
            "volumes": [{"name": "run", "emptyDir": {}},
                        {"name": "code", "configMap": {"name": config_map, "defaultMode": 0o755}}],
        },
    }


def warnings_of(core, namespace, pod):
    return [e for e in core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
            if e.type == "Warning"]


def test_an_init_container_shipped_in_a_config_map_runs_on_the_pods_node(api_client, namespace):
    core = client.CoreV1Api(api_client)
    # The pod comes first: its ConfigMap is missing, and is retried as a
    # kubelet would once it exists.
    core.create_namespaced_pod(namespace, pod_with_shipped_init("shipped", "demo-code"))
    event = wait_for("a FailedMount warning", lambda: [e for e in warnings_of(core, namespace, "shipped")
                                                       if e.reason == "FailedMount"])
    assert 'configmap "demo-code" not found' in event[0].message
    assert not is_ready(core.read_namespaced_pod("shipped", namespace))
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "demo-code"},
                                                  "data": {"detect.py": SHIPPED_SCRIPT}})
    wait_for("the pod to be Ready", lambda: is_ready(core.read_namespaced_pod("shipped", namespace)))
    # What the init container wrote is in the emptyDir the main container
    # sees; its paths are mapped there in the main container's environment.
    out, err, status = exec_in(api_client, "shipped", namespace, ["sh", "-c", 'cat "$RESULT_DIR/result.json"'])
    assert status["status"] == "Success", (out, err)
    result = json.loads(out)
    assert result["node"] == FIRST_TWO[0]
    assert result["root"] == str(SNAPSHOTS / GPU_NODES[FIRST_TWO[0]])
    log = core.read_namespaced_pod_log("shipped", namespace, container="detect")
    assert log.strip().startswith("wrote ") and log.strip().endswith("/run/demo/result.json")


def test_a_failing_shipped_init_container_leaves_the_pod_not_ready(api_client, namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "demo-fail"},
                                                  "data": {"detect.py": SHIPPED_SCRIPT}})
    core.create_namespaced_pod(namespace, pod_with_shipped_init("failing", "demo-fail", exit_code=3))
    event = wait_for("a BackOff warning", lambda: [e for e in warnings_of(core, namespace, "failing")
                                                   if e.reason == "BackOff"])
    assert "init container detect exited with 3" in event[0].message
    time.sleep(1)
    assert not is_ready(core.read_namespaced_pod("failing", namespace))


def test_a_deleted_pods_detached_processes_end_with_it(api_client, namespace):
    """A command exec'd into a fake pod is a process of this machine; one
    that detached itself (as a training launch does) must not outlive the
    pod, as it would not outlive a real pod's containers."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "demo-bg"},
                                                  "data": {"detect.py": SHIPPED_SCRIPT}})
    core.create_namespaced_pod(namespace, pod_with_shipped_init("detached", "demo-bg"))
    wait_for("the pod to be Ready", lambda: is_ready(core.read_namespaced_pod("detached", namespace)))
    out, err, status = exec_in(api_client, "detached", namespace, [
        "sh", "-c", "setsid sleep 1234 </dev/null >/dev/null 2>&1 & echo $!"])
    assert status["status"] == "Success", (out, err)
    pid = int(out.strip())
    assert os.path.exists("/proc/%d" % pid)
    core.delete_namespaced_pod("detached", namespace, grace_period_seconds=0)

    def ended():
        try:
            with open("/proc/%d/stat" % pid) as handle:
                return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True
    wait_for("the detached process to end", ended)


def test_pod_logs_come_through_the_api(api_client, namespace, trainer):
    core = client.CoreV1Api(api_client)
    pod = trainer[0]
    name = pod.metadata.name
    log = core.read_namespaced_pod_log(name, namespace, container="trainer")
    assert f"container trainer of pod {namespace}/{name} started on node {pod.spec.node_name}" in log
    # A command in the pod can write to its container's log (CRI log format),
    # and the line is then served by pods/log like any container output.
    line = "step 10: loss 0.125"
    status = exec_in(api_client, name, namespace, [
        "sh", "-c", f'printf "%s stdout F %s\\n" "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" "{line}" >> "$MLINFRA_POD_LOG"'])[2]
    assert status["status"] == "Success"
    log = core.read_namespaced_pod_log(name, namespace, container="trainer")
    assert log.splitlines()[-1] == line
    assert core.read_namespaced_pod_log(name, namespace, container="trainer", tail_lines=1) == line + "\n"


SRIOV_POLICY = {
    "apiVersion": "sriovnetwork.openshift.io/v1",
    "kind": "SriovNetworkNodePolicy",
    "metadata": {"name": "eno5np0-rdma"},
    "spec": {
        "resourceName": "eno5np0rdma",
        "nodeSelector": {"feature.node.kubernetes.io/network-sriov.capable": "true"},
        "priority": 99,
        "numVfs": 8,
        "nicSelector": {"pfNames": ["eno5np0"], "vendor": "15b3"},
        "deviceType": "netdevice",
        "isRdma": True,
        "linkType": "ETH",
    },
}


def misspelled(manifest: dict) -> dict:
    bad = json.loads(json.dumps(manifest))
    bad["spec"]["numVf"] = bad["spec"].pop("numVfs")
    bad["metadata"]["name"] += "-typo"
    return bad


def test_misspelled_crd_field_is_rejected_with_strict_validation(api_client, namespace):
    custom = client.CustomObjectsApi(api_client)
    group, version, plural = "sriovnetwork.openshift.io", "v1", "sriovnetworknodepolicies"
    with pytest.raises(ApiException) as failure:
        custom.create_namespaced_custom_object(group, version, namespace, plural, misspelled(SRIOV_POLICY),
                                               field_validation="Strict")
    assert failure.value.status == 400
    assert 'unknown field "spec.numVf"' in json.loads(failure.value.body)["message"]

    created = custom.create_namespaced_custom_object(group, version, namespace, plural, SRIOV_POLICY,
                                                     field_validation="Strict")
    assert created["spec"]["numVfs"] == 8

    # Without strict validation an unknown field alone does not fail the
    # request: the API server drops it (and sends a warning header). Here the
    # typo is still caught, because numVfs is required...
    with pytest.raises(ApiException) as failure:
        custom.create_namespaced_custom_object(group, version, namespace, plural, misspelled(SRIOV_POLICY))
    assert failure.value.status == 422
    assert json.loads(failure.value.body)["details"]["causes"][0]["field"] == "spec.numVfs"
    # ...but a misspelled optional field silently vanishes.
    lax = json.loads(json.dumps(SRIOV_POLICY))
    lax["metadata"]["name"] = "lax"
    lax["spec"]["isRDMA"] = lax["spec"].pop("isRdma")
    stored = custom.create_namespaced_custom_object(group, version, namespace, plural, lax)
    assert "isRDMA" not in stored["spec"] and "isRdma" not in stored["spec"]

    # The schema's enums hold too.
    wrong_type = json.loads(json.dumps(SRIOV_POLICY))
    wrong_type["metadata"]["name"] = "bad-device-type"
    wrong_type["spec"]["deviceType"] = "netdev"
    with pytest.raises(ApiException) as failure:
        custom.create_namespaced_custom_object(group, version, namespace, plural, wrong_type)
    assert failure.value.status == 422


def test_kubectl_apply_rejects_a_misspelled_field(localcluster, api_client, namespace):
    """kubectl apply validates strictly by default (--validate=strict)."""
    def kubectl_apply(manifest):
        return subprocess.run([str(localcluster.BIN / "kubectl"), "--kubeconfig", str(localcluster.KUBECONFIG),
                               "apply", "-n", namespace, "-f", "-"],
                              input=yaml.safe_dump(manifest), capture_output=True, text=True, check=False)
    scc = {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": f"{namespace}-rdma"},
        # The fields OpenShift's schema requires.
        "priority": 0,
        "allowPrivilegedContainer": False,
        "allowedCapabilities": ["IPC_LOCK", "SYS_RESOURCE"],
        "defaultAddCapabilities": [],
        "requiredDropCapabilities": [],
        "allowHostDirVolumePlugin": True,
        "allowHostIPC": False,
        "allowHostNetwork": False,
        "allowHostPID": False,
        "allowHostPorts": False,
        "readOnlyRootFilesystem": False,
        "runAsUser": {"type": "RunAsAny"},
        "seLinuxContext": {"type": "RunAsAny"},
        "users": [f"system:serviceaccount:{namespace}:trainer"],
        "volumes": ["configMap", "emptyDir", "hostPath", "secret"],
    }
    bad = dict(scc, metadata={"name": f"{namespace}-typo"}, allowedCapabilites=scc["allowedCapabilities"])
    del bad["allowedCapabilities"]
    result = kubectl_apply(bad)
    assert result.returncode != 0
    assert 'unknown field "allowedCapabilites"' in result.stderr
    # OpenShift's schema requires priority; a client-side apply drops a null
    # one (null means "remove" there), so the collection's SCC says 0.
    for without in (dict((key, value) for key, value in scc.items() if key != "priority"), dict(scc, priority=None)):
        result = kubectl_apply(without)
        assert result.returncode != 0 and "priority: Required value" in result.stderr, result.stderr
    result = kubectl_apply(scc)
    assert result.returncode == 0, result.stderr
    # Cluster-scoped: no namespace, fields at the top level.
    custom = client.CustomObjectsApi(api_client)
    got = custom.get_cluster_custom_object("security.openshift.io", "v1", "securitycontextconstraints",
                                           scc["metadata"]["name"])
    assert got["allowedCapabilities"] == ["IPC_LOCK", "SYS_RESOURCE"] and "namespace" not in got["metadata"]
    custom.delete_cluster_custom_object("security.openshift.io", "v1", "securitycontextconstraints",
                                        scc["metadata"]["name"])


@pytest.mark.parametrize("kind, body, typo", [
    ("NetworkAttachmentDefinition",
     {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
      "spec": {"config": '{"cniVersion": "0.3.1", "type": "sriov"}'}}, ("spec", "configs")),
    ("SriovNetwork",
     {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork",
      "spec": {"resourceName": "eno5np0rdma", "networkNamespace": "default", "ipam": '{"type": "whereabouts"}',
               "spoofChk": "off", "trust": "on", "linkState": "enable", "capabilities": '{"mac": true}'}},
     ("spec", "spoofCheck")),
    ("PyTorchJob",
     {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
      "spec": {"runPolicy": {"cleanPodPolicy": "None"},
               "elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 2},
               "pytorchReplicaSpecs": {
                   "Master": {"replicas": 1, "restartPolicy": "OnFailure",
                              "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}},
                   "Worker": {"replicas": 1, "restartPolicy": "OnFailure",
                              "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}}}},
     ("spec", "runpolicy")),
    ("Job.batch.volcano.sh",
     {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
      "spec": {"minAvailable": 2, "schedulerName": "volcano", "plugins": {"pytorch": ["--master=master"]},
               "tasks": [{"name": "worker", "replicas": 2,
                          "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}]}},
     ("spec", "minAvailible")),
    ("BuildConfig",
     {"apiVersion": "build.openshift.io/v1", "kind": "BuildConfig",
      "spec": {"source": {"type": "Dockerfile", "dockerfile": "FROM x"},
               "strategy": {"type": "Docker", "dockerStrategy": {"buildArgs": [{"name": "A", "value": "1"}]}},
               "output": {"to": {"kind": "ImageStreamTag", "name": "trainer:latest"}}}},
     ("spec", "outputs")),
    ("ImageStream",
     {"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
      "spec": {"lookupPolicy": {"local": True}}}, ("spec", "lookupPolcy")),
])
def test_each_crd_accepts_real_fields_and_rejects_a_typo(api_client, namespace, kind, body, typo):
    group, version = body["apiVersion"].split("/")
    plural = {"NetworkAttachmentDefinition": "network-attachment-definitions", "SriovNetwork": "sriovnetworks",
              "PyTorchJob": "pytorchjobs", "Job.batch.volcano.sh": "jobs", "BuildConfig": "buildconfigs",
              "ImageStream": "imagestreams"}[kind]
    custom = client.CustomObjectsApi(api_client)
    good = dict(body, metadata={"name": "good"})
    custom.create_namespaced_custom_object(group, version, namespace, plural, good, field_validation="Strict")
    bad = json.loads(json.dumps(dict(body, metadata={"name": "bad"})))
    bad[typo[0]][typo[1]] = {} if typo[1] in ("runpolicy", "outputs", "lookupPolcy") else 1
    with pytest.raises(ApiException) as failure:
        custom.create_namespaced_custom_object(group, version, namespace, plural, bad, field_validation="Strict")
    assert f'unknown field "{typo[0]}.{typo[1]}"' in json.loads(failure.value.body)["message"]


def test_the_served_crds_are_the_operators_own_files(localcluster, api_client):
    """Each CRD that upstream_crds.py names is served as the file in its
    operator's Go module at the pinned version (go mod download checks the
    module against go.sum), or, for OpenShift's build and image kinds, as
    generated from that module's OpenAPI document: the same group, names,
    scope and versions, each version's schema, subresources and columns."""
    api = client.ApiextensionsV1Api(api_client)
    entries = localcluster.upstream_crds.fetch()
    assert {e["crd"]["metadata"]["name"] for e in entries} >= {
        "sriovnetworks.sriovnetwork.openshift.io", "network-attachment-definitions.k8s.cni.cncf.io",
        "pytorchjobs.kubeflow.org", "trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org",
        "jobsets.jobset.x-k8s.io", "securitycontextconstraints.security.openshift.io",
        "buildconfigs.build.openshift.io", "builds.build.openshift.io", "imagestreams.image.openshift.io"}
    for entry in entries:
        upstream = entry["crd"]
        served = api_client.sanitize_for_serialization(api.read_custom_resource_definition(
            upstream["metadata"]["name"]))["spec"]
        where = "%s@%s/%s" % (entry["module"], entry["version"], entry["path"])
        for key in ("group", "scope"):
            assert served[key] == upstream["spec"][key], where
        for key, value in upstream["spec"]["names"].items():
            assert served["names"][key] == value, (where, key)
        assert [v["name"] for v in served["versions"]] == [v["name"] for v in upstream["spec"]["versions"]], where
        for mine, theirs in zip(served["versions"], upstream["spec"]["versions"]):
            for key, value in theirs.items():
                assert mine.get(key) == value, (where, mine["name"], key)
