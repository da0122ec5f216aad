# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The train role's Job start modes: one object per run that Kubernetes (an
indexed Job) or an operator (Kubeflow's PyTorchJob, a Volcano Job) turns into
one pod per node, each running ``mlinfra-train start --wait``.

The pods are the StatefulSet's pods (the same image, init container, NICs,
devices, security context, node affinity and workspace claim, taken from the
StatefulSet the statefulset role renders, so the two never drift apart),
changed only where a run differs from an idle development pod: the trainer
container runs the launcher, nothing restarts, the pods carry the run's label
and keep off each other's nodes. What each mode adds follows the seeds' OKE
examples: where the node rank, the rendezvous host and the pod's own address
come from.

=========== ========================== ============================== =========================
mode        node rank                  rendezvous host (pod 0)         this pod's address
=========== ========================== ============================== =========================
job         $JOB_COMPLETION_INDEX      <job>-0.<job> (headless         <job>-<index>.<job>
                                       Service made per run)
pytorchjob  replica-index label        <job>-worker-0 (the operator's  $POD_NAME (likewise)
                                       Service per replica)
volcano     $VC_TASK_INDEX             first of $VC_WORKER_HOSTS       its entry of
                                       (the svc plugin)                $VC_WORKER_HOSTS
=========== ========================== ============================== =========================

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

MODES = ("job", "pytorchjob", "volcano")
RUN_LABEL = "mlinfra.io/train-run"
RUN_ID_ANNOTATION = "mlinfra.io/run-id"
# Kubeflow's training operator sets up the container of this name.
PYTORCHJOB_CONTAINER = "pytorch"
TRAINER_CONTAINER = "trainer"
# Pod host names are <job>-<index> (Job) or <job>-worker-<index> (operators),
# at most 63 characters; the job's name is also a Service's (a DNS-1035 label).
_NAME_LIMIT = 40

_RANK_ADDRESS = {
    "job": 'rank=$JOB_COMPLETION_INDEX rdzv={job}-0.{job} local={job}-$JOB_COMPLETION_INDEX.{job}',
    "pytorchjob": 'rank=$REPLICA_INDEX rdzv={job}-worker-0 local=$POD_NAME',
    "volcano": 'IFS=, read -ra hosts <<< "$VC_WORKER_HOSTS"; rank=$VC_TASK_INDEX rdzv=${{hosts[0]}} '
               'local=${{hosts[$VC_TASK_INDEX]}}',
}
# Fixed text: everything from the inventory arrives as "$@" after the run
# directory and the run id, as in the exec start mode.
_LAUNCH = ('base=$1 id=$2; shift 2; {rank_address}; '
           'mkdir -p "$base/$id" && exec python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra-train" start --wait '
           '--run-dir "$base/$id/$POD_NAME" --run-id "$id" --node-rank "$rank" --rdzv-host "$rdzv" '
           '--local-addr "$local" --resolve-timeout {resolve_timeout} "$@"')


class TrainJobError(Exception):
    """A run that cannot be rendered; the message says why."""


def job_name(run_id):
    """The Kubernetes name of a run's objects: the run id in lower case,
    other characters as '-', starting with a letter, short enough for the
    pods' host names."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = "run-" + name
    return name[:_NAME_LIMIT].rstrip("-")


def container_name(mode):
    return PYTORCHJOB_CONTAINER if mode == "pytorchjob" else TRAINER_CONTAINER


def launch_command(mode, job, run_dir, run_id, launch_args, resolve_timeout):
    """The trainer container's command: bash works out the node rank and the
    addresses from what the controller of the mode provides, then runs the
    launcher in the foreground."""
    script = _LAUNCH.format(rank_address=_RANK_ADDRESS[mode].format(job=job), resolve_timeout=int(resolve_timeout))
    return ["/bin/bash", "-c", script, "mlinfra-train", run_dir, run_id] + [str(arg) for arg in launch_args]


def pod_template(statefulset, mode, job, labels, command, port):
    """The StatefulSet's pod template, made a run's pod."""
    template = copy.deepcopy(statefulset["spec"]["template"])
    spec = template["spec"]
    if "workspace" not in [volume.get("name") for volume in spec.get("volumes", [])]:
        raise TrainJobError("the pods' workspace is a claim per StatefulSet pod (cluster_storage_mode: per-pod), "
                            "which a Job's pods cannot mount by index; the Job start modes need "
                            "cluster_storage_mode: shared, or use train_start_mode: exec")
    template.setdefault("metadata", {})["labels"] = dict(labels)
    spec["restartPolicy"] = "Never"
    spec.pop("hostname", None)
    if mode == "job":
        # Host names <job>-<index>.<job> through the run's headless Service.
        spec["subdomain"] = job
    anti = spec.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if anti:
        # One pod of the run per node, whatever else runs there.
        for term in anti:
            term["labelSelector"] = {"matchLabels": {RUN_LABEL: job}}
    trainers = [c for c in spec["containers"] if c["name"] == TRAINER_CONTAINER]
    if not trainers:
        raise TrainJobError("the StatefulSet's pod template has no %r container" % TRAINER_CONTAINER)
    trainer = trainers[0]
    trainer["name"] = container_name(mode)
    trainer["command"] = command
    trainer.pop("args", None)
    # Ready means the autodetect init container wrote nccl.env; a run's pod
    # has it before the trainer starts.
    trainer.pop("readinessProbe", None)
    env = [var for var in trainer.get("env", []) if var["name"] not in ("MASTER_ADDR", "MASTER_PORT")]
    if mode == "pytorchjob":
        env.append({"name": "REPLICA_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['training.kubeflow.org/replica-index']"}}})
        # The Training Operator takes the rendezvous port from the container
        # port of this name (else it adds port 23456 and points
        # PET_RDZV_ENDPOINT there).
        trainer["ports"] = [{"name": "pytorchjob-port", "containerPort": int(port), "protocol": "TCP"}]
    trainer["env"] = env
    return template


def manifests(statefulset, mode, run_id, replicas, launch_args, run_dir, port, resolve_timeout=600,
              ttl_seconds=86400, volcano_queue="default"):
    """The objects of one run in the given start mode, in the order to
    apply them."""
    if mode not in MODES:
        raise TrainJobError("start mode %r has no manifests: use one of %s" % (mode, ", ".join(MODES)))
    replicas = int(replicas)
    if replicas < 1:
        raise TrainJobError("a run needs at least one pod, replicas is %d" % replicas)
    meta = statefulset["metadata"]
    app, namespace = meta["name"], meta["namespace"]
    job = job_name(run_id)
    labels = dict((key, value) for key, value in meta.get("labels", {}).items()
                  if key != "app.kubernetes.io/name")
    # Not the StatefulSet's name label: its Service and the roles that list
    # its pods by that label leave a run's pods alone.
    labels.update({"app.kubernetes.io/name": app + "-train", "app.kubernetes.io/component": "train",
                   RUN_LABEL: job})
    metadata = {"name": job, "namespace": namespace, "labels": labels, "annotations": {RUN_ID_ANNOTATION: run_id}}
    command = launch_command(mode, job, run_dir, run_id, launch_args, resolve_timeout)
    template = pod_template(statefulset, mode, job, labels, command, port)
    if mode == "job":
        service = {
            "apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(metadata),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {RUN_LABEL: job},
                     "ports": [{"name": "rendezvous", "port": int(port), "protocol": "TCP"}]},
        }
        batch = {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"completionMode": "Indexed", "completions": replicas, "parallelism": replicas,
                     # A failed rank fails the run; a retry would meet no one.
                     "backoffLimit": 0, "ttlSecondsAfterFinished": int(ttl_seconds), "template": template},
        }
        return [service, batch]
    if mode == "pytorchjob":
        return [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata,
            "spec": {
                # The seed's elastic c10d set-up; the launcher passes torchrun
                # its settings itself.
                "elasticPolicy": {"rdzvBackend": "c10d", "rdzvPort": int(port), "minReplicas": replicas,
                                  "maxReplicas": replicas, "maxRestarts": 0},
                "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0, "ttlSecondsAfterFinished": int(ttl_seconds)},
                "pytorchReplicaSpecs": {"Worker": {"replicas": replicas, "restartPolicy": "Never",
                                                   "template": template}},
            },
        }]
    return [{
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": metadata,
        "spec": {
            "schedulerName": "volcano", "queue": volcano_queue,
            # All the nodes or none: a gang.
            "minAvailable": replicas, "maxRetry": 0, "ttlSecondsAfterFinished": int(ttl_seconds),
            "plugins": {"svc": ["--publish-not-ready-addresses=true"], "env": []},
            "policies": [{"event": "PodFailed", "action": "TerminateJob"}],
            "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
        },
    }]


_INDEX_LABELS = ("batch.kubernetes.io/job-completion-index", "training.kubeflow.org/replica-index",
                 "volcano.sh/task-index")


def pod_index(pod):
    """A run's pod's node index: its controller's index label, else the
    number its name ends in (<job>-worker-<i>, <job>-<i>-<suffix>)."""
    meta = pod.get("metadata", {})
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    for key in _INDEX_LABELS:
        value = labels.get(key, annotations.get(key))
        if value is not None and str(value).isdigit():
            return int(value)
    found = re.search(r"-([0-9]+)(?:-[a-z0-9]{5})?$", meta.get("name", ""))
    return int(found.group(1)) if found else None


def pod_states(pods, mode):
    """The run's pods by node index: name, index, phase, the trainer's exit
    code and reason once it ended, and the state mlinfra-train status would
    give (running, succeeded, failed)."""
    name = container_name(mode)
    states = []
    for pod in pods:
        status = pod.get("status") or {}
        phase = status.get("phase", "Pending")
        terminated = {}
        for container in status.get("containerStatuses") or []:
            if container.get("name") == name:
                terminated = (container.get("state") or {}).get("terminated") or {}
        if phase == "Succeeded":
            state = "succeeded"
        elif phase == "Failed":
            state = "failed"
        else:
            state = "running"
        reason = terminated.get("reason") or status.get("reason")
        message = terminated.get("message") or status.get("message")
        states.append({"pod": pod["metadata"]["name"], "index": pod_index(pod), "phase": phase, "state": state,
                       "exit_code": terminated.get("exitCode"), "reason": reason, "message": message})
    states.sort(key=lambda item: (item["index"] is None, item["index"], item["pod"]))
    return states
