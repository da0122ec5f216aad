# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The train role's Job start modes: one object per run that Kubernetes (an
indexed Job) or an operator (Kubeflow's PyTorchJob, a Volcano Job, a JobSet,
a Kubeflow Trainer TrainJob) turns into one pod per node, each running
``mlinfra train start --wait``.

The pods are the StatefulSet's pods (the same image, init container, NICs,
devices, security context, node affinity and workspace claim, taken from the
StatefulSet the statefulset role renders, so the two never drift apart),
changed only where a run differs from an idle development pod: the trainer
container runs the launcher, nothing restarts, the pods carry the run's label
and keep off each other's nodes. What each mode adds follows the published OKE
host-network PyTorchJob and Volcano examples and the operators' own conventions: where the node rank, the
rendezvous host and the pod's own address come from.

=========== ========================== ============================== =========================
mode        node rank                  rendezvous host (pod 0)         this pod's address
=========== ========================== ============================== =========================
job         $JOB_COMPLETION_INDEX      <job>-0.<job> (headless         <job>-<index>.<job>
                                       Service made per run)
pytorchjob  replica-index label        <job>-worker-0 (the operator's  $POD_NAME (likewise)
                                       Service per replica)
volcano     $VC_TASK_INDEX             first of $VC_WORKER_HOSTS       its entry of
                                       (the svc plugin)                $VC_WORKER_HOSTS
jobset      $JOB_COMPLETION_INDEX      <job>-node-0-0.<job> (the       <job>-node-0-<index>.<job>
                                       JobSet's headless Service)
trainjob    $JOB_COMPLETION_INDEX      <job>-node-0-0.<job> (the       <job>-node-0-<index>.<job>
                                       JobSet Trainer makes of it)
=========== ========================== ============================== =========================

The trainjob mode splits the pod in two: a TrainingRuntime of the
deployment (named after the application, in its namespace) holds the
StatefulSet's pod, and the TrainJob of each run gives the node count, the
processes per node, the launcher's command and, through a runtime patch, the
run's label on its pods. Each mode's objects are checked against the
operators' admission rules (admission_rules.py) before they are returned.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re

from .admission_rules import QUEUE_LABEL, TRAINER_ANCESTOR_LABEL, AdmissionError, check_admission
from ..inventory_settings import DEMO_SHORTCUTS, to_bool
from ..train.run_status import text_metrics
from ..common.errors import MlinfraError

MODES = ("job", "pytorchjob", "volcano", "jobset", "trainjob")
RUN_LABEL = "mlinfra.io/train-run"
RUN_ID_ANNOTATION = "mlinfra.io/run-id"
# Kubeflow's training operator sets up the container of this name, Kubeflow
# Trainer the container "node" of its replicated job "node".
PYTORCHJOB_CONTAINER = "pytorch"
TRAINJOB_CONTAINER = "node"
TRAINER_CONTAINER = "trainer"
# The replicated job of the jobset and trainjob modes: Trainer names pod 0's
# address after it (<trainjob>-node-0-0.<trainjob>).
REPLICATED_JOB = "node"
# Who patches a TrainJob's runtime (a domain-prefixed path, as Trainer asks).
RUNTIME_PATCH_MANAGER = "mlinfra.io/train"
# Pod host names are <job>-<index> (Job) or <job>-worker-<index> (operators),
# at most 63 characters; the job's name is also a Service's (a DNS-1035 label).
_NAME_LIMIT = 40

# JobSet's pods (and so Trainer's): <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>.
_JOBSET_RANK_ADDRESS = ('rank=$JOB_COMPLETION_INDEX rdzv={job}-node-0-0.{job} '
                        'local={job}-node-0-$JOB_COMPLETION_INDEX.{job}')
_RANK_ADDRESS = {
    "job": 'rank=$JOB_COMPLETION_INDEX rdzv={job}-0.{job} local={job}-$JOB_COMPLETION_INDEX.{job}',
    "pytorchjob": 'rank=$REPLICA_INDEX rdzv={job}-worker-0 local=$POD_NAME',
    "volcano": 'IFS=, read -ra hosts <<< "$VC_WORKER_HOSTS"; rank=$VC_TASK_INDEX rdzv=${{hosts[0]}} '
               'local=${{hosts[$VC_TASK_INDEX]}}',
    "jobset": _JOBSET_RANK_ADDRESS,
    "trainjob": _JOBSET_RANK_ADDRESS,
}
# Fixed text: everything from the inventory arrives as "$@" after the run
# directory and the run id, as in the exec start mode.
_LAUNCH = ('base=$1 id=$2; shift 2; {rank_address}; '
           'mkdir -p "$base/$id" && exec python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra" train start --wait '
           '--run-dir "$base/$id/$POD_NAME" --run-id "$id" --node-rank "$rank" --rdzv-host "$rdzv" '
           '--local-addr "$local" --resolve-timeout {resolve_timeout} "$@"')


class TrainJobError(MlinfraError):
    """A run that cannot be rendered; the message says why."""


def runtime_name(statefulset):
    """The TrainingRuntime of a deployment: the application's name."""
    return statefulset["metadata"]["name"]


def job_name(run_id):
    """The Kubernetes name of a run's objects: the run id in lower case,
    other characters as '-', starting with a letter, short enough for the
    pods' host names."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = "run-" + name
    return name[:_NAME_LIMIT].rstrip("-")


def container_name(mode):
    return {"pytorchjob": PYTORCHJOB_CONTAINER, "trainjob": TRAINJOB_CONTAINER}.get(mode, TRAINER_CONTAINER)


def launch_command(mode, job, run_dir, run_id, launch_args, resolve_timeout):
    """The trainer container's command: bash works out the node rank and the
    addresses from what the controller of the mode provides, then runs the
    launcher in the foreground."""
    script = _LAUNCH.format(rank_address=_RANK_ADDRESS[mode].format(job=job), resolve_timeout=int(resolve_timeout))
    return ["/bin/bash", "-c", script, "mlinfra train", run_dir, run_id] + [str(arg) for arg in launch_args]


def pod_template(statefulset, mode, job, labels, command, port):
    """The StatefulSet's pod template, made a run's pod (in trainjob mode, any
    run's: job and command are None and the TrainJob gives them)."""
    # A plain copy: copy.deepcopy of the lazy containers a filter gets from
    # Ansible copies their templar (and ansible-core warns).
    template = json.loads(json.dumps(statefulset["spec"]["template"]))
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
        # One pod of the run per node, whatever else runs there; the
        # runtime of the trainjob mode serves every run: one training pod
        # of the application per node.
        selector = {RUN_LABEL: job} if job else {"app.kubernetes.io/name": labels["app.kubernetes.io/name"]}
        for term in anti:
            term["labelSelector"] = {"matchLabels": selector}
    trainers = [c for c in spec["containers"] if c["name"] == TRAINER_CONTAINER]
    if not trainers:
        raise TrainJobError("the StatefulSet's pod template has no %r container" % TRAINER_CONTAINER)
    trainer = trainers[0]
    trainer["name"] = container_name(mode)
    if command:
        trainer["command"] = command
    else:
        trainer.pop("command", None)
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


def _launch_nproc(launch_args):
    """The processes per node the launcher is given (--nproc-per-node)."""
    args = [str(arg) for arg in launch_args]
    if "--nproc-per-node" in args[:-1]:
        value = args[args.index("--nproc-per-node") + 1]
        return int(value) if value.isdigit() else None
    return None


def manifests(statefulset, mode, run_id, replicas, launch_args, run_dir, port, resolve_timeout=600,
              ttl_seconds=86400, volcano_queue="default", queue_name=""):
    """The objects of one run in the given start mode, in the order to
    apply them; queue_name puts the run on that Kueue LocalQueue."""
    if mode not in MODES:
        raise TrainJobError("start mode %r has no manifests: use one of %s" % (mode, ", ".join(MODES)))
    replicas = int(replicas)
    if replicas < 1:
        raise TrainJobError("a run needs at least one pod, replicas is %d" % replicas)
    if queue_name and mode == "volcano":
        raise TrainJobError("train_queue_name puts a run on a Kueue LocalQueue; Volcano queues its Jobs itself: "
                            "give the Volcano queue as train_volcano_queue, or use another train_start_mode")
    meta = statefulset["metadata"]
    app, namespace = meta["name"], meta["namespace"]
    job = job_name(run_id)
    labels = dict((key, value) for key, value in meta.get("labels", {}).items()
                  if key != "app.kubernetes.io/name")
    # Not the StatefulSet's name label: its Service and the roles that list
    # its pods by that label leave a run's pods alone.
    labels.update({"app.kubernetes.io/name": app + "-train", "app.kubernetes.io/component": "train"})
    run = {
        "statefulset": statefulset, "mode": mode, "job": job, "replicas": replicas, "port": int(port),
        "ttl": int(ttl_seconds), "volcano_queue": volcano_queue, "nproc": _launch_nproc(launch_args),
        "labels": labels,
        "metadata": {"name": job, "namespace": namespace, "labels": dict(labels, **{RUN_LABEL: job}),
                     "annotations": {RUN_ID_ANNOTATION: run_id}},
        "command": launch_command(mode, job, run_dir, run_id, launch_args, resolve_timeout),
    }
    objects = _BUILDERS[mode](run)
    if queue_name:
        # The workload itself: Kueue suspends it until the queue admits it.
        objects[-1]["metadata"]["labels"][QUEUE_LABEL] = queue_name
    try:
        check_admission(objects)
    except AdmissionError as exc:
        raise TrainJobError(str(exc))
    return objects


def _run_template(run):
    return pod_template(run["statefulset"], run["mode"], run["job"], run["metadata"]["labels"], run["command"],
                        run["port"])


def _job_objects(run):
    """A headless Service for the pods' names and an indexed Job."""
    job, replicas = run["job"], run["replicas"]
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(run["metadata"]),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {RUN_LABEL: job},
                 "ports": [{"name": "rendezvous", "port": run["port"], "protocol": "TCP"}]},
    }
    batch = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": run["metadata"],
        "spec": {"completionMode": "Indexed", "completions": replicas, "parallelism": replicas,
                 # A failed rank fails the run; a retry would meet no one.
                 "backoffLimit": 0, "ttlSecondsAfterFinished": run["ttl"], "template": _run_template(run)},
    }
    return [service, batch]


def _pytorchjob_objects(run):
    replicas = run["replicas"]
    return [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": run["metadata"],
        "spec": {
            # The elastic c10d set-up of the OKE PyTorchJob example; the launcher passes torchrun
            # its settings itself.
            "elasticPolicy": {"rdzvBackend": "c10d", "rdzvPort": run["port"], "minReplicas": replicas,
                              "maxReplicas": replicas, "maxRestarts": 0},
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0, "ttlSecondsAfterFinished": run["ttl"]},
            "pytorchReplicaSpecs": {"Worker": {"replicas": replicas, "restartPolicy": "Never",
                                               "template": _run_template(run)}},
        },
    }]


def _volcano_objects(run):
    replicas = run["replicas"]
    return [{
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": run["metadata"],
        "spec": {
            "schedulerName": "volcano", "queue": run["volcano_queue"],
            # All the nodes or none: a gang.
            "minAvailable": replicas, "maxRetry": 0, "ttlSecondsAfterFinished": run["ttl"],
            "plugins": {"svc": ["--publish-not-ready-addresses=true"], "env": []},
            "policies": [{"event": "PodFailed", "action": "TerminateJob"}],
            "tasks": [{"name": "worker", "replicas": replicas, "template": _run_template(run)}],
        },
    }]


def _indexed_nodes(replicas, template):
    """The one replicated job of the jobset and trainjob modes."""
    return {"completionMode": "Indexed", "completions": replicas, "parallelism": replicas,
            # A failed rank fails the run; a retry would meet no one.
            "backoffLimit": 0, "template": template}


def _jobset_spec(run, replicas, template, job_labels=None):
    return {
        # Pod host names <job>-node-0-<index>.<job>, before they are Ready
        # (rank 0 resolves the others' names while they start).
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        # A failed pod fails its Job (backoffLimit 0) and the Job the run.
        "failurePolicy": {"maxRestarts": 0},
        "successPolicy": {"operator": "All"},
        "ttlSecondsAfterFinished": run["ttl"],
        "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1, "template": {
            "metadata": {"labels": dict(job_labels or {})}, "spec": _indexed_nodes(replicas, template)}}],
    }


def _jobset_objects(run):
    """One JobSet: one replicated job of replicas pods, the JobSet's
    headless Service for their names."""
    return [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": run["metadata"],
             "spec": _jobset_spec(run, run["replicas"], _run_template(run))}]


def _training_runtime(run):
    """The deployment's TrainingRuntime: the StatefulSet's pod as Kubeflow
    Trainer's torch node, for every run; a TrainJob gives the rest."""
    meta = run["statefulset"]["metadata"]
    template = pod_template(run["statefulset"], "trainjob", None, run["labels"], None, run["port"])
    # Trainer finds the trainer's job by this label.
    spec = _jobset_spec(run, 1, template, job_labels={TRAINER_ANCESTOR_LABEL: "trainer"})
    for replicated in spec["replicatedJobs"]:
        # Trainer sets the node count from the TrainJob (numNodes).
        for key in ("completions", "parallelism"):
            replicated["template"]["spec"].pop(key)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
        "metadata": {"name": runtime_name(run["statefulset"]), "namespace": meta["namespace"],
                     "labels": dict(run["labels"])},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": spec}},
    }


def _trainjob_objects(run):
    """The deployment's TrainingRuntime (applied again: it follows the
    inventory) and the run's TrainJob."""
    runtime = _training_runtime(run)
    trainer = {"numNodes": run["replicas"], "command": run["command"]}
    if run["nproc"]:
        trainer["numProcPerNode"] = run["nproc"]
    # The run's label on its pods, through a runtime patch: the runtime
    # serves every run.
    pod_labels = {"metadata": {"labels": {RUN_LABEL: run["job"]}}}
    patch = {"manager": RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": REPLICATED_JOB, "template": {"spec": {"template": pod_labels}}}]}}}}
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": run["metadata"],
        "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime",
                                "name": runtime["metadata"]["name"]},
                 "trainer": trainer, "runtimePatches": [patch]},
    }
    return [runtime, trainjob]


_BUILDERS = {"job": _job_objects, "pytorchjob": _pytorchjob_objects, "volcano": _volcano_objects,
             "jobset": _jobset_objects, "trainjob": _trainjob_objects}


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
    """The run's pods by node index: name, uid, node (None before it is
    scheduled), index, phase, the trainer's exit code and reason once it
    ended, and the state mlinfra train status would give (running,
    succeeded, failed)."""
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
        states.append({"pod": pod["metadata"]["name"], "uid": pod["metadata"].get("uid"),
                       "node": (pod.get("spec") or {}).get("nodeName"), "index": pod_index(pod), "phase": phase,
                       "state": state, "exit_code": terminated.get("exitCode"), "reason": reason, "message": message})
    states.sort(key=lambda item: (item["index"] is None, item["index"], item["pod"]))
    return states


def pod_endings(pods, logs):
    """How each pod of an ended run ended, in the shape mlinfra train status
    gives in the exec start mode (``{pod, json}``), so that one summary
    reads both: ``pods`` from pod_states, ``logs`` each pod's log text by
    name (a pod that never started has none). The launcher's own last line,
    a JSON status, gives the node rank, its seconds, run directory and port
    counters; the pod's state, exit code and reason come from the API; the
    metrics from TorchTitan's lines in the log."""
    endings = []
    for pod in pods:
        text = (logs or {}).get(pod["pod"]) or ""
        lines = text.strip().splitlines()
        launcher = {}
        if lines and lines[-1].startswith("{"):
            try:
                launcher = json.loads(lines[-1])
            except ValueError:
                launcher = {}
            launcher = launcher if isinstance(launcher, dict) else {}
        error = None
        if pod.get("reason") and pod["state"] != "succeeded":
            error = pod["reason"] + (": " + pod["message"] if pod.get("message") else "")
        status = {"node_rank": launcher.get("node_rank", pod.get("index")), "seconds": launcher.get("seconds"),
                  "run_dir": launcher.get("run_dir"), "port_counters": launcher.get("port_counters"),
                  "state": pod["state"], "exit_code": pod.get("exit_code"), "error": error,
                  "log_tail": text.splitlines()[-20:]}
        status.update(text_metrics(text))
        endings.append({"pod": pod["pod"], "json": status})
    return endings


# -- what the launcher is given -----------------------------------------------

# The TorchTitan settings the train role's shortcuts stand for, in TorchTitan
# 0.2's JobConfig names; train_overrides (any setting) win over them.
TORCHTITAN_SHORTCUTS = (
    ("train_steps", "training.steps"), ("train_local_batch_size", "training.local_batch_size"),
    ("train_seq_len", "training.seq_len"), ("train_compile", "compile.enable"),
    ("train_dp_shard", "parallelism.data_parallel_shard_degree"),
    ("train_dp_replicate", "parallelism.data_parallel_replicate_degree"),
    ("train_tp", "parallelism.tensor_parallel_degree"), ("train_pp", "parallelism.pipeline_parallel_degree"),
    ("train_cp", "parallelism.context_parallel_degree"), ("train_hf_assets_path", "model.hf_assets_path"),
    ("train_dataset", "training.dataset"), ("train_dataset_path", "training.dataset_path"))
FLOAT8_OVERRIDES = (("model.converters", "quantize.linear.float8"),
                    ("quantize.linear.float8.enable_fsdp_float8_all_gather", True),
                    ("quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", True))
# The shortcuts the demo (files/train/tiny_lm.py) reads, as its own arguments.
DEMO_OPTIONS = dict(zip(DEMO_SHORTCUTS, ("--steps", "--batch-size", "--seq-len")))


def torchtitan_overrides(settings):
    """SECTION.KEY to value: the shortcuts that are set, float8's converters
    when train_float8, then train_overrides, which win."""
    found = {}
    for name, key in TORCHTITAN_SHORTCUTS:
        value = settings.get(name)
        if value is not None:
            found[key] = to_bool(value) if name == "train_compile" else value
    if to_bool(settings.get("train_float8") or False):
        found.update(FLOAT8_OVERRIDES)
    found.update(settings.get("train_overrides") or {})
    return found


def _override_value(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def launch_args(settings, pods=(), pod0_node=""):
    """The arguments of mlinfra train start (train_launch.build_parser):
    the rendezvous, the workload and its settings, then after -- train_args
    and, for the demo, the shortcuts it reads as its own arguments (last, so
    that -e train_steps=N wins over an inventory's train_args).
    ``settings``: the train_* variables, replicas, cluster_host_network.
    In the exec start mode the job's nodes are the StatefulSet's ``pods``
    (a Job mode makes ``replicas``), and with host networking the
    rendezvous is on pod 0's node (``pod0_node``), whose host name is its
    address there, unless train_rdzv_host names one."""
    exec_mode = settings["train_start_mode"] == "exec"
    nnodes = len(pods) if exec_mode else int(settings["replicas"])
    rdzv_host = settings.get("train_rdzv_host") or (
        pod0_node if exec_mode and to_bool(settings.get("cluster_host_network") or False) else "")
    args = ["--nnodes", str(nnodes), "--nproc-per-node", str(settings["train_nproc_per_pod"]),
            "--rdzv-port", str(settings["train_rdzv_port"])]
    if rdzv_host:
        args += ["--rdzv-host", rdzv_host]
    if settings.get("train_local_addr"):
        args += ["--local-addr", settings["train_local_addr"]]
    workload = settings["train_workload"]
    if workload == "torchtitan":
        args += ["--workload", "torchtitan", "--config", settings.get("train_config") or settings["train_default_config"]]
        args += ["--override=%s=%s" % (key, _override_value(value))
                 for key, value in torchtitan_overrides(settings).items()]
    elif workload == "script":
        args += ["--workload", "script", "--script", settings["train_script"]]
    elif workload == "demo":
        args += ["--workload", "demo"]
    after = [str(argument) for argument in settings.get("train_args") or ()]
    if workload == "demo":
        for name in DEMO_SHORTCUTS:
            if settings.get(name) is not None:
                after += [DEMO_OPTIONS[name], str(settings[name])]
    return args + (["--"] + after if after else [])
