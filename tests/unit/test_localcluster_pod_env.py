"""tools/localcluster/localcluster.py: what a pod's command is given, as a
kubelet would give it, and which pods' commands the pod sync runs (the
batch pods of a Job, Volcano's Job or a PyTorchJob that start the
collection's launcher)."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1].parent
SPEC = importlib.util.spec_from_file_location("mlinfra_localcluster", ROOT / "tools" / "localcluster" / "localcluster.py")
localcluster = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = localcluster
SPEC.loader.exec_module(localcluster)


def pod(owner_kind="Job", env=(), command=("bash", "-c", 'exec "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra"')):
    container = {"name": "trainer", "command": list(command), "env": list(env)}
    return {"metadata": {"name": "run-worker-1", "namespace": "ns", "uid": "u-1", "labels": {"app": "x"},
                         "ownerReferences": [{"kind": owner_kind, "name": "run"}]},
            "spec": {"restartPolicy": "Never", "nodeName": "node-a", "containers": [container]}}


def test_env_takes_values_fields_and_config_map_keys():
    env = [{"name": "PLAIN", "value": 7},
           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           # Volcano's svc plugin hands the task's hosts over so.
           {"name": "VC_WORKER_HOSTS", "valueFrom": {"configMapKeyRef": {"name": "run-svc", "key": "VC_WORKER_HOSTS"}}},
           {"name": "MISSING_KEY", "valueFrom": {"configMapKeyRef": {"name": "run-svc", "key": "nope"}}},
           {"name": "MISSING_MAP", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "x"}}},
           {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    maps = {"run-svc": {"VC_WORKER_HOSTS": "run-worker-0.run,run-worker-1.run"}}
    subject = pod(env=env)
    got = localcluster.container_env(subject, subject["spec"]["containers"][0], maps.get)
    assert got == [{"name": "PLAIN", "value": "7"}, {"name": "NODE", "value": "node-a"},
                   {"name": "VC_WORKER_HOSTS", "value": "run-worker-0.run,run-worker-1.run"}]
    # Without a way to read config maps, their keys are left out.
    assert [var["name"] for var in localcluster.container_env(subject, subject["spec"]["containers"][0])] == [
        "PLAIN", "NODE"]


def test_the_pod_sync_runs_the_launcher_of_batch_pods_only():
    for kind, runs in (("Job", True), ("PyTorchJob", True), ("StatefulSet", False), ("ReplicaSet", False)):
        subject = pod(owner_kind=kind)
        assert localcluster.runs_collection_command(subject, subject["spec"]["containers"][0]) is runs, kind
    other = pod(command=("python3", "-c", "print(1)"))
    assert localcluster.runs_collection_command(other, other["spec"]["containers"][0]) is False
