"""train.yml's operator start modes through the operators' own controllers
and admission webhooks, started on the local cluster for this file
(tools/localcluster/operators.py; built from their pinned Go modules): the
controller makes the run's Jobs and pods, the real kube-controller-manager
their pods, and the local cluster runs each pod's command on this machine,
so the launchers rendezvous on 127.0.0.1 and train the collection's tiny
model over gloo, as in the job start mode (test_train_jobs.py)."""

import concurrent.futures
import json
import time

import pytest
from ansible_cli import LOCAL_PORTS, deployment, run_playbook
from kubernetes import client, dynamic
from test_train import assert_summary_line, launched_processes
from test_train_jobs import APP, objects, running_pods

pytestmark = pytest.mark.integration

OPERATORS = ("jobset", "trainer", "training-operator", "volcano")
# Started for its own test only: its webhooks see every pod and StatefulSet
# of the cluster while it runs, which the other tests' runs need not pay for.
QUEUEING = "kueue"
HEALTHY = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]


@pytest.fixture(scope="module")
def deployed(api_client, operator_controllers):
    """What deploy.yml creates, on a shared workspace, scaled to 0: the
    runs' pods need the GPUs the StatefulSet's pods would hold."""
    with deployment(api_client, "ctl", HEALTHY, {"cluster_storage_mode": "shared", "replicas": 0}) as settings:
        yield dict(settings, replicas=2)


def trained(deployed, mode, run_id, tmp_path):
    """train.yml's demo run in a start mode, which must have succeeded: its
    last words the summary line, every rank's loss falling, the summary of
    that start mode."""
    run = run_playbook("train.yml", "local", dict(deployed, train_start_mode=mode, train_run_id=run_id,
                                                  train_logs_dir=str(tmp_path)))
    assert not run.failed, run.failure_messages()
    (said,) = run.results("Report the run")
    assert run.last_words() == said["msg"]
    assert_summary_line(said["msg"], run_id, tmp_path / run_id)
    summary = json.loads((tmp_path / run_id / "summary.json").read_text())
    assert summary["start_mode"] == mode
    for status in summary["status"]:
        assert status["state"] == "succeeded" and status["first_loss"] > status["latest_loss"]
    return run


def jobsets(api_client):
    return dynamic.DynamicClient(api_client).resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")


def test_a_jobset_trains_through_the_jobset_controller(api_client, deployed, tmp_path):
    namespace = deployed["cluster_namespace"]
    trained(deployed, "jobset", "JobSet-OK", tmp_path)
    # The controller's own work: its status says the run completed, its
    # webhook defaulted what the rendered JobSet leaves out, and the pods
    # are those of the Job it made.
    jobset = jobsets(api_client).get(namespace=namespace, name="jobset-ok")
    conditions = {c["type"]: c["status"] for c in jobset.status.conditions}
    assert conditions.get("Completed") == "True", conditions
    assert jobset.spec.startupPolicy.startupPolicyOrder == "AnyOrder"
    pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector="mlinfra.io/train-run=jobset-ok")
    names = sorted(pod.metadata.name.rsplit("-", 1)[0] for pod in pods.items)
    assert names == ["jobset-ok-node-0-0", "jobset-ok-node-0-1"]
    for pod in pods.items:
        (owner,) = pod.metadata.owner_references
        assert (owner.kind, owner.name) == ("Job", "jobset-ok-node-0")
        assert pod.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == "jobset-ok"
    assert launched_processes("JobSet-OK") == []


def test_a_pytorchjob_trains_through_the_training_operator(api_client, deployed, tmp_path):
    """The Training Operator makes the pods, their Services and their PET_*
    variables; the launcher's rendezvous agrees with them."""
    namespace = deployed["cluster_namespace"]
    run = trained(deployed, "pytorchjob", "PyTorchJob-OK", tmp_path)
    # The progress lines say what the operator says.
    progress = [said["msg"] for said in run.results("Say how far the run is")]
    assert any("PyTorchJob Running: PyTorchJob " in line or "PyTorchJob Succeeded: PyTorchJob " in line
               for line in progress), progress
    job = dynamic.DynamicClient(api_client).resources.get(api_version="kubeflow.org/v1", kind="PyTorchJob").get(
        namespace=namespace, name="pytorchjob-ok")
    conditions = {c["type"]: c["status"] for c in job.status.conditions}
    assert conditions.get("Succeeded") == "True", conditions
    pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace,
                                                            label_selector="mlinfra.io/train-run=pytorchjob-ok")
    assert sorted(pod.metadata.name for pod in pods.items) == ["pytorchjob-ok-worker-0", "pytorchjob-ok-worker-1"]
    for pod in pods.items:
        (owner,) = pod.metadata.owner_references
        assert (owner.kind, owner.name) == ("PyTorchJob", "pytorchjob-ok")
        env = {item.name: item.value for item in pod.spec.containers[0].env or []}
        # The operator's elastic variables, from the rendered elasticPolicy.
        assert env.get("PET_NNODES") == "2:2" and env.get("PET_RDZV_BACKEND") == "c10d", env
        port = LOCAL_PORTS.get("train_rdzv_port", 29500)
        assert env.get("PET_RDZV_ENDPOINT") == "pytorchjob-ok-worker-0:%s" % port, env
    services = client.CoreV1Api(api_client).list_namespaced_service(
        namespace, label_selector="training.kubeflow.org/job-name=pytorchjob-ok")
    assert sorted(service.metadata.name for service in services.items) == [
        "pytorchjob-ok-worker-0", "pytorchjob-ok-worker-1"]
    assert launched_processes("PyTorchJob-OK") == []


def test_a_volcano_job_trains_through_volcanos_scheduler_and_controllers(api_client, deployed, tmp_path):
    """Volcano's controller makes the PodGroup and the pods, its scheduler
    binds them as a gang, its env plugin gives each pod VC_TASK_INDEX (the
    node rank the launcher reads) and its svc plugin VC_WORKER_HOSTS from
    its ConfigMap, which the pod sync resolves as a kubelet does. (The
    hosts' names resolve nowhere on this machine: the local inventory gives
    the rendezvous as 127.0.0.1; test_train_job_manifests.py runs the
    launch script's reading of the hosts.)"""
    namespace = deployed["cluster_namespace"]
    trained(deployed, "volcano", "Volcano-OK", tmp_path)
    resources = dynamic.DynamicClient(api_client).resources
    volcano_jobs = resources.get(api_version="batch.volcano.sh/v1alpha1", kind="Job")
    job = volcano_jobs.get(namespace=namespace, name="volcano-ok")
    assert job.status.state.phase == "Completed", job.status
    pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector="mlinfra.io/train-run=volcano-ok")
    assert sorted(pod.metadata.name for pod in pods.items) == ["volcano-ok-worker-0", "volcano-ok-worker-1"]
    for pod in pods.items:
        assert pod.spec.scheduler_name == "volcano" and pod.spec.node_name in HEALTHY
        # The gang: one PodGroup of the Job's (gone with the Job's end).
        assert pod.metadata.annotations["scheduling.k8s.io/group-name"].startswith("volcano-ok-")
        env = {item.name: item for item in pod.spec.containers[0].env or []}
        assert env["VC_TASK_INDEX"].value == pod.metadata.name[-1], env
        # The svc plugin's hosts, from its ConfigMap, as the pod's command
        # saw them (its launch script splits them and takes the first).
        assert env["VC_WORKER_HOSTS"].value_from.config_map_key_ref.name == "volcano-ok-svc"
    assert launched_processes("Volcano-OK") == []


def assert_trained_through_trainer(api_client, namespace, run_id):
    """Trainer v2 made the JobSet from the deployment's TrainingRuntime and
    the run's TrainJob, the JobSet controller its Jobs, and Trainer's torch
    plugin gave each node its PET_* variables."""
    name = run_id.lower()
    resources = dynamic.DynamicClient(api_client).resources
    trainjob = resources.get(api_version="trainer.kubeflow.org/v1alpha1", kind="TrainJob").get(
        namespace=namespace, name=name)
    conditions = {c["type"]: c["status"] for c in trainjob.status.conditions}
    assert conditions.get("Complete") == "True", conditions
    # Trainer's defaulting webhook stamps the time of each runtime patch.
    assert trainjob.spec.runtimePatches[0].time
    jobset = jobsets(api_client).get(namespace=namespace, name=name)
    (owner,) = jobset.metadata.ownerReferences
    assert (owner.kind, owner.name) == ("TrainJob", name)
    pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector="mlinfra.io/train-run=" + name)
    assert sorted(pod.metadata.name.rsplit("-", 1)[0] for pod in pods.items) == [
        name + "-node-0-0", name + "-node-0-1"]
    for pod in pods.items:
        env = {item.name: item.value for item in pod.spec.containers[0].env or []}
        assert env.get("PET_NNODES") == "2", env


def test_the_jobset_webhook_refuses_what_its_controller_could_not_name(api_client, deployed):
    """A JobSet whose Jobs' pods would get names longer than a DNS label:
    the CRD's schema cannot see it, the operator's validating webhook
    refuses it, in its own words."""
    namespace = deployed["cluster_namespace"]
    name = "x" * 60
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}]}}
    with pytest.raises(client.ApiException) as refused:
        jobsets(api_client).create(body=body, namespace=namespace)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert message.startswith('admission webhook "vjobset.kb.io" denied the request: '), message
    assert message.endswith("JobSet name is too long, job names generated for this JobSet will exceed 63 characters")


def jobset_variant(name, completions=2, replicas=1, job="node", subdomain=None, success=None, rules=None):
    spec = {"replicatedJobs": [{"name": job, "replicas": replicas, "template": {"spec": {
        "completionMode": "Indexed", "completions": completions, "parallelism": completions,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}]}
    if subdomain:
        spec["network"] = {"subdomain": subdomain}
    if success:
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": success}
    if rules:
        spec["failurePolicy"] = {"maxRestarts": 0, "rules": rules}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name}, "spec": spec}


# Variations of each JobSet rule of admission_rules.py: names around the
# length limits of the Jobs and pods the controller will name, the headless
# Service's subdomain, the success and failure policies' targets and rules.
JOBSET_VARIANTS = (
    [jobset_variant("j" * length) for length in (40, 50, 52, 53, 54, 55, 56, 57, 58)]
    + [jobset_variant("j" * 48, completions=count) for count in (9, 10, 11, 99, 100)]
    + [jobset_variant("j" * 52, replicas=count, completions=1) for count in (9, 10, 11)]
    + [jobset_variant("j" * 40, job="n" * length) for length in (10, 15, 16, 17)]
    + [jobset_variant("sub", subdomain="s" * length) for length in (62, 63, 64)]
    + [jobset_variant("sub", subdomain="Upper")]
    + [jobset_variant("ok", success=["node"]), jobset_variant("bad", success=["nodes"])]
    + [jobset_variant("rule", rules=[{"action": "FailJobSet", "targetReplicatedJobs": target}])
       for target in (["node"], ["other"])]
    + [jobset_variant("rule", rules=[{"action": "FailJobSet", "name": name}]) for name in ("ok", "Bad_name", "x" * 129)]
    + [jobset_variant("rule", rules=[{"action": "FailJobSet", "name": "same"}, {"action": "FailJobSet", "name": "same"}])]
    + [jobset_variant("rule", rules=[{"action": "FailJobSet", "onJobFailureReasons": [reason]}])
       for reason in ("BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy", "MaxFailedIndexesExceeded",
                      "NoSuchReason")]
)


def test_admission_rules_agree_with_the_jobset_webhook(api_client, deployed):
    """Every variation, judged by admission_rules.py and by the JobSet
    operator's own webhooks (a server-side dry run calls them and stores
    nothing): refused by both or accepted by both. Where they disagree, the
    webhook is right."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.admission_rules import (
        admission_problems)
    namespace = deployed["cluster_namespace"]
    resource = jobsets(api_client)
    disagreements, refusals, accepted = [], [], 0
    for variant in JOBSET_VARIANTS:
        ours = [problem["message"] for problem in admission_problems(variant)]
        try:
            resource.create(body=variant, namespace=namespace, dry_run="All")
            theirs = None
            accepted += 1
        except client.ApiException as refused:
            assert refused.status == 422, refused.body
            theirs = json.loads(refused.body)["message"]
            assert theirs.startswith('admission webhook "vjobset.kb.io" denied the request'), theirs
            refusals.append(theirs)
        if bool(ours) != (theirs is not None):
            disagreements.append((variant["metadata"]["name"][:12], variant["spec"], ours, theirs))
    assert disagreements == []
    # The variations reach every rule (the webhook's own words), and some
    # are accepted; the dry run stored none of them.
    for words in ("pod names generated for this JobSet will exceed 63 characters",
                  ".spec.network.subdomain is too long", "'nodes' does not appear in .spec.ReplicatedJobs",
                  "'other' in failure policy does not appear", "at most 128 characters long",
                  "rule names are not unique", "is not a recognized job failure reason"):
        assert any(words in refusal for refusal in refusals), words
    assert accepted >= 10
    stored = {item.metadata.name for item in resource.get(namespace=namespace).items}
    assert not stored & {variant["metadata"]["name"] for variant in JOBSET_VARIANTS}


TRAINER = "trainer.kubeflow.org/v1alpha1"


def trainer_resource(api_client, kind):
    return dynamic.DynamicClient(api_client).resources.get(api_version=TRAINER, kind=kind)


def runtime_variant(name, kind="TrainingRuntime", replicas=1, ancestor="trainer", container="node"):
    labels = {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor} if ancestor else {}
    return {"apiVersion": TRAINER, "kind": kind, "metadata": {"name": name}, "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [{
            "name": "node", "replicas": replicas, "template": {"metadata": {"labels": labels}, "spec": {"template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": container, "image": "busybox"}]}}}}}]}}}}


def trainjob_variant(name, runtime, env=(), manager="mlinfra.io/train-run", nodes=2, suspend=False):
    trainer = {"numNodes": nodes, "command": ["true"]}
    if env:
        trainer["env"] = [{"name": variable, "value": "1"} for variable in env]
    spec = {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": runtime},
            "trainer": trainer, "runtimePatches": [{"manager": manager}]}
    if suspend:
        spec["suspend"] = True
    return {"apiVersion": TRAINER, "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


# Variations of each Kubeflow Trainer rule of admission_rules.py: the
# ancestor steps' replicas and containers, the torch runtime's reserved
# variables, the runtime patches' managers.
RUNTIME_VARIANTS = (
    [runtime_variant("rt", replicas=count) for count in (1, 2)]
    + [runtime_variant("rt", ancestor=ancestor, container=container)
       for ancestor in ("trainer", "model-initializer", "dataset-initializer")
       for container in ("node", "model-initializer", "dataset-initializer")]
    + [runtime_variant("rt", ancestor=None, replicas=3), runtime_variant("rt", ancestor="other", container="x")]
    + [runtime_variant("crt", kind="ClusterTrainingRuntime", replicas=count) for count in (1, 2)]
    + [runtime_variant("crt", kind="ClusterTrainingRuntime", container="trainer")]
)
TRAINJOB_VARIANTS = (
    [trainjob_variant("env", "agree", env=[variable]) for variable in (
        "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_OTHER",
        "NCCL_DEBUG")]
    + [trainjob_variant("patch", "agree", manager=manager) for manager in (
        "mlinfra.io/train-run", "a.b.c/d/e", "train-run", "mlinfra.io/", "Mlinfra.io/x", "mlinfra.io/x y")]
)


def judged_by_webhook(resource, variant, namespace, webhook_names):
    """None if a dry run is admitted, else the refusal: a webhook's, or the
    CRD schema's (which the API server applies before the validating
    webhooks; a refusal all the same)."""
    try:
        resource.create(body=variant, namespace=namespace, dry_run="All")
        return None
    except client.ApiException as refused:
        assert refused.status in (400, 403, 422), refused.body
        message = json.loads(refused.body)["message"]
        by_webhook = message.startswith(tuple('admission webhook "%s" denied the request' % name
                                              for name in webhook_names))
        by_schema = '%s.%s "%s" is invalid: ' % (variant["kind"], variant["apiVersion"].split("/")[0],
                                                 variant["metadata"]["name"]) in message
        assert by_webhook or by_schema, message
        return message


def test_admission_rules_agree_with_kubeflow_trainers_webhooks(api_client, deployed):
    """TrainingRuntimes, ClusterTrainingRuntimes and TrainJobs (against a
    runtime that exists, as the TrainJob webhook reads it), judged by
    admission_rules.py and by Kubeflow Trainer's own webhooks."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.admission_rules import (
        admission_problems)
    namespace = deployed["cluster_namespace"]
    trainer_resource(api_client, "TrainingRuntime").create(body=runtime_variant("agree"), namespace=namespace)
    disagreements, refusals = [], []
    for variant in RUNTIME_VARIANTS + TRAINJOB_VARIANTS:
        ours = [problem["message"] for problem in admission_problems(variant)]
        webhooks = ["validator.%s.trainer.kubeflow.org" % variant["kind"].lower()]
        theirs = judged_by_webhook(trainer_resource(api_client, variant["kind"]), variant,
                                   None if variant["kind"].startswith("Cluster") else namespace, webhooks)
        refusals += [theirs] if theirs else []
        if bool(ours) != (theirs is not None):
            disagreements.append((variant["kind"], variant["spec"], ours, theirs))
    assert disagreements == []
    for words in ("always must be 1", "must contain the required container for the ancestor: dataset-initializer",
                  "must not have reserved envs", "PET_MASTER_PORT", "domain-prefixed path"):
        assert any(words in refusal for refusal in refusals), words
    assert len(refusals) < len(RUNTIME_VARIANTS + TRAINJOB_VARIANTS) - 6


def test_a_trainjob_whose_pods_could_not_be_named_is_refused_by_the_jobset_webhook_later(api_client, deployed):
    """The length of the pod names a TrainJob's JobSet will have is judged
    by no webhook of Trainer's: its controller makes the JobSet, and the
    JobSet webhook refuses it after the TrainJob was accepted (an event on
    the TrainJob). admission_rules.py says so before anything is applied;
    on each side of the limit it agrees with what the two webhooks do."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.admission_rules import (
        admission_problems)
    namespace = deployed["cluster_namespace"]
    runtimes = trainer_resource(api_client, "TrainingRuntime")
    if not runtimes.get(namespace=namespace, field_selector="metadata.name=agree").items:
        runtimes.create(body=runtime_variant("agree"), namespace=namespace)
    events = client.CoreV1Api(api_client)
    # <name>-node-0-<last index>-abcde: 63 characters for a 48-character name and 2 nodes.
    outcomes = {}
    for length in (48, 49):
        variant = trainjob_variant("t" * length, "agree", suspend=True)
        ours = admission_problems(variant)
        trainer_resource(api_client, "TrainJob").create(body=variant, namespace=namespace)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            made = jobsets(api_client).get(namespace=namespace, field_selector="metadata.name=" + "t" * length).items
            failed = [event.message for event in events.list_namespaced_event(
                namespace, field_selector="involvedObject.name=%s,reason=TrainJobResourcesCreationFailed"
                % ("t" * length)).items]
            if made or failed:
                break
            time.sleep(0.2)
        outcomes[length] = (bool(ours), bool(made), failed)
        assert bool(ours) == bool(failed) != bool(made), (length, ours, failed)
    (message,) = set(outcomes[49][2])
    assert 'admission webhook "vjobset.kb.io" denied the request' in message
    assert "pod names generated for this JobSet will exceed 63 characters" in message


def pytorchjob_variant(name="ptj", replicas=None, elastic=True, container="pytorch", image="busybox",
                       manager=None, nproc=None):
    replicas = {"Worker": 2} if replicas is None else replicas
    pod = {"containers": [dict({"name": container}, **({"image": image} if image else {}))]}
    spec = {"pytorchReplicaSpecs": {replica_type: {"replicas": count, "restartPolicy": "Never",
                                                   "template": {"spec": pod}}
                                    for replica_type, count in replicas.items()}}
    if elastic:
        spec["elasticPolicy"] = {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 2}
    if manager:
        spec["runPolicy"] = {"managedBy": manager}
    if nproc:
        spec["elasticPolicy"]["nProcPerNode"] = nproc
        spec["nprocPerNode"] = str(nproc)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


# Variations of each PyTorchJob rule of admission_rules.py: the name, the
# replica types and counts, the pytorch container and its image, the elastic
# policy's Worker, the manager.
PYTORCHJOB_VARIANTS = (
    [pytorchjob_variant(name) for name in ("ok", "a" * 63, "a" * 64, "1abc", "a.b")]
    + [pytorchjob_variant(replicas=replicas, elastic=False) for replicas in (
        {"Master": 1}, {"Master": 2}, {"Master": 1, "Worker": 3}, {"Worker": 0}, {"Chief": 1})]
    + [pytorchjob_variant(replicas={"Master": 1}), pytorchjob_variant(replicas={"Worker": 1})]
    + [pytorchjob_variant(container="trainer"), pytorchjob_variant(image="")]
    + [pytorchjob_variant(manager=manager) for manager in (
        "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue", "example.com/other")]
    + [pytorchjob_variant(nproc=2)]
)


def test_admission_rules_agree_with_the_training_operators_webhook(api_client, deployed):
    """Every variation, judged by admission_rules.py and by the Training
    Operator's own webhook (a dry run): refused by both or by neither."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.admission_rules import (
        admission_problems)
    namespace = deployed["cluster_namespace"]
    resource = dynamic.DynamicClient(api_client).resources.get(api_version="kubeflow.org/v1", kind="PyTorchJob")
    disagreements, refusals = [], []
    for variant in PYTORCHJOB_VARIANTS:
        ours = [problem["message"] for problem in admission_problems(variant)]
        theirs = judged_by_webhook(resource, variant, namespace,
                                   ["validator.pytorchjob.training-operator.kubeflow.org"])
        refusals += [theirs] if theirs else []
        if bool(ours) != (theirs is not None):
            disagreements.append((variant["metadata"]["name"], variant["spec"], ours, theirs))
    assert disagreements == []
    for words in ("should match", "must be 1", "must be at least 1", "Unsupported value", "with name pytorch",
                  "must be configured if elastic policy is used", "must not be used with"):
        assert any(words in refusal for refusal in refusals), words


def volcano_variant(name="vj", tasks=None, minimum=None, policies=None, plugins=None, **spec_values):
    tasks = tasks if tasks is not None else [{"name": "worker", "replicas": 2}]
    spec = {"schedulerName": "volcano", "queue": "default", "tasks": [
        dict(task, template={"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}})
        for task in tasks]}
    if minimum is not None:
        spec["minAvailable"] = minimum
    if policies is not None:
        spec["policies"] = policies
    if plugins is not None:
        spec["plugins"] = plugins
    spec.update(spec_values)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


# Variations of each Volcano Job rule of admission_rules.py: counts, task
# names and their pods' names, policies, plugins.
VOLCANO_VARIANTS = (
    [volcano_variant(minimum=count) for count in (0, 2, 3)]
    + [volcano_variant(maxRetry=-1), volcano_variant(ttlSecondsAfterFinished=-1), volcano_variant(tasks=[])]
    + [volcano_variant(tasks=[{"name": "worker", "replicas": 2, "minAvailable": count}]) for count in (2, 3)]
    + [volcano_variant(tasks=[{"name": name, "replicas": 1}]) for name in ("Worker", "w_1", "w" * 63, "w" * 64)]
    + [volcano_variant(tasks=[{"name": "worker", "replicas": 1}, {"name": "worker", "replicas": 1}])]
    + [volcano_variant(name="v" * length, tasks=[{"name": "w" * 50, "replicas": 1}]) for length in (10, 11, 12)]
    + [volcano_variant(policies=[{"event": event, "action": "TerminateJob"}]) for event in (
        "PodFailed", "PodEvicted", "PodPending", "TaskFailed", "TaskCompleted", "NoSuchEvent")]
    + [volcano_variant(policies=[{"event": "PodFailed", "action": action}]) for action in (
        "AbortJob", "RestartPod", "RestartPartition", "CompleteJob", "Explode")]
    + [volcano_variant(policies=[{"event": "PodFailed", "action": "AbortJob"},
                                 {"event": "PodFailed", "action": "RestartJob"}])]
    + [volcano_variant(policies=[{"exitCode": code, "action": "AbortJob"}]) for code in (0, 3)]
    + [volcano_variant(policies=[{"event": "PodFailed", "exitCode": 3, "action": "AbortJob"}])]
    + [volcano_variant(policies=[{"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "AbortJob"}])]
    + [volcano_variant(plugins=plugins) for plugins in ({"svc": [], "env": []}, {"ssh": []}, {"nosuch": []})]
)


def test_admission_rules_agree_with_volcanos_webhook(api_client, deployed):
    """Every variation, judged by admission_rules.py and by Volcano's own
    mutating and validating webhooks (a dry run; the queue exists, as the
    webhook also checks): refused by both or by neither."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.admission_rules import (
        admission_problems)
    namespace = deployed["cluster_namespace"]
    resource = dynamic.DynamicClient(api_client).resources.get(api_version="batch.volcano.sh/v1alpha1", kind="Job")
    disagreements, refusals = [], []
    for variant in VOLCANO_VARIANTS:
        ours = [problem["message"] for problem in admission_problems(variant)]
        theirs = judged_by_webhook(resource, variant, namespace, ["validatejob.volcano.sh", "mutatejob.volcano.sh"])
        refusals += [theirs] if theirs else []
        if bool(ours) != (theirs is not None):
            disagreements.append((variant["metadata"]["name"], variant["spec"].get("tasks"), ours, theirs))
    assert disagreements == []
    for words in ("should not be greater than total replicas", "duplicated task name", "validate failed",
                  "invalid policy action", "duplicate event", "not a valid error code", "simultaneously",
                  "no other policy", "unable to find job plugin"):
        assert any(words in refusal and "admission webhook" in refusal for refusal in refusals), words


@pytest.fixture
def queueing(localcluster, operator_controllers):
    localcluster.ensure_binaries((QUEUEING,))
    operator_controllers.start(QUEUEING)
    try:
        yield
    finally:
        operator_controllers.stop(QUEUEING)


def test_admission_rules_agree_with_kueues_webhooks_on_the_queue_name(api_client, deployed, queueing):
    """The queue-name label of each kind Kueue manages here, judged by
    admission_rules.py and by Kueue's own webhooks (a dry run)."""
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.admission_rules import (
        QUEUE_LABEL, admission_problems)
    namespace = deployed["cluster_namespace"]
    resources = dynamic.DynamicClient(api_client).resources
    batch_job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "q"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    disagreements, refusals = [], []
    for base, webhooks in ((jobset_variant("q"), ["vjobset.kb.io", "mjobset.kb.io"]),
                           (pytorchjob_variant("q"), ["vpytorchjob.kb.io", "mpytorchjob.kb.io"]),
                           (batch_job, ["vjob.kb.io", "mjob.kb.io"])):
        resource = resources.get(api_version=base["apiVersion"], kind=base["kind"])
        # Accepted; refused by Kueue (label values, not lowercase subdomains);
        # refused by the API server (not label values).
        for queue in ("team-a", "team.a", "q" * 63, "team_a", "Team-A", "team..a", "Team A", "q" * 64, "-team"):
            variant = json.loads(json.dumps(base))
            variant["metadata"]["labels"] = {QUEUE_LABEL: queue}
            ours = [problem["message"] for problem in admission_problems(variant)]
            theirs = judged_by_webhook(resource, variant, namespace, webhooks)
            refusals += [theirs] if theirs else []
            if bool(ours) != (theirs is not None):
                disagreements.append((base["kind"], queue[:20], ours, theirs))
    assert disagreements == []
    assert len(refusals) == 3 * 6, refusals
    assert sum("admission webhook" in refusal and QUEUE_LABEL in refusal for refusal in refusals) == 3 * 3, refusals


KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE, CLUSTER_QUEUE, FLAVOR = "team-a", "mlinfra-gpus", "mlinfra-any-node"


def kueue_resource(api_client, kind):
    return dynamic.DynamicClient(api_client).resources.get(api_version=KUEUE, kind=kind)


@pytest.fixture
def gpu_queue(api_client, deployed, queueing):
    """LocalQueue team-a of the runs' namespace on a ClusterQueue whose GPU
    quota holds one run of two pods, the RDMA NICs' VFs, CPU and memory
    ample: a second run waits for the GPUs."""
    namespace = deployed["cluster_namespace"]
    # What each run's pod asks for: the StatefulSet's pod's (deploy.yml's).
    template = client.AppsV1Api(api_client).read_namespaced_stateful_set(
        APP, namespace).spec.template.spec
    requests = [container.resources.requests or {} for container in template.containers + (
        template.init_containers or [])]
    quotas = dict((name, 100) for asked in requests for name in asked)
    quotas.update(cpu=1000, memory="100Ti")
    quotas["nvidia.com/gpu"] = 2 * max(int(asked.get("nvidia.com/gpu", 0)) for asked in requests)
    queue_objects = [
        ("ResourceFlavor", None, {"metadata": {"name": FLAVOR}}),
        ("ClusterQueue", None, {"metadata": {"name": CLUSTER_QUEUE}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": sorted(quotas),
                "flavors": [{"name": FLAVOR, "resources": [
                    {"name": name, "nominalQuota": quotas[name]} for name in sorted(quotas)]}]}]}}),
        ("LocalQueue", namespace, {"metadata": {"name": QUEUE}, "spec": {"clusterQueue": CLUSTER_QUEUE}}),
    ]
    for kind, namespace, body in queue_objects:
        kueue_resource(api_client, kind).create(body=dict(body, apiVersion=KUEUE, kind=kind), namespace=namespace)
    try:
        yield QUEUE
    finally:
        for kind, namespace, body in reversed(queue_objects):
            kueue_resource(api_client, kind).delete(name=body["metadata"]["name"], namespace=namespace)


def workloads(api_client, namespace, run):
    """The Workloads Kueue made for the run's object, named after its kind
    and the run."""
    found = kueue_resource(api_client, "Workload").get(namespace=namespace)
    return [item for item in found.items if any(
        owner.name == run for owner in item.metadata.ownerReferences or ())]


def admitted(workload):
    return any(condition.type == "Admitted" and condition.status == "True"
               for condition in workload.status.conditions or ()) if workload.status else False


def waiting_for(what, done, deadline, following=()):
    while not done():
        assert time.monotonic() < deadline, what
        assert not any(run.done() for run in following), "a run ended before " + what
        time.sleep(0.5)


def refused_by_the_queue(queued, mode, run_id, pod_set):
    """A run that waits past train_queue_timeout=3 s while the quota is
    taken: the play fails with Kueue's reason; returns its message."""
    refused = run_playbook("train.yml", "local", dict(queued, train_start_mode=mode, train_run_id=run_id,
                                                      train_queue_timeout=3))
    assert refused.failed
    (message,) = refused.failure_messages()
    assert message.startswith("run %s was not admitted within train_queue_timeout=3 s (LocalQueue team-a: not "
                              "admitted: couldn't assign flavors to pod set %s: insufficient unused quota for "
                              "nvidia.com/gpu in flavor %s" % (run_id, pod_set, FLAVOR)), message
    return message


def test_runs_on_a_kueue_localqueue_wait_for_its_gpu_quota(api_client, deployed, gpu_queue, tmp_path):
    """Four runs on one LocalQueue whose GPUs hold one run: a JobSet takes
    them; a PyTorchJob and a batch Job wait, not admitted, past their
    train_queue_timeout and are deleted, the play saying which quota is
    short in Kueue's words; a TrainJob waits until the JobSet's run is stopped (-e stop=true), then
    trains through Trainer v2 and the JobSet controller. Kueue's webhooks
    suspended each object, its controllers made their Workloads and
    admitted them; train.yml follows the Workloads."""
    namespace = deployed["cluster_namespace"]
    queued = dict(deployed, train_queue_name=gpu_queue, train_logs_dir=str(tmp_path), train_poll_interval=1,
                  train_progress_interval=4)
    stop = dict(deployed, train_start_mode="jobset", stop=True)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        # Held until the stop below, looked at every 3 s and said every 60 s:
        # each look is a module run, and this run lasts the whole test.
        first = pool.submit(run_playbook, "train.yml", "local", dict(
            queued, train_start_mode="jobset", train_run_id="queued-first", train_poll_interval=3,
            train_progress_interval=60, train_args=["--steps", "1000000", "--step-pause", "0.2"]))
        try:
            deadline = time.monotonic() + 120
            # The JobSet's pods train: its Workload holds the GPU quota.
            waiting_for("the first run's pods ran",
                        lambda: len(running_pods(api_client, namespace, "queued-first")) == 2, deadline, [first])
            (workload,) = workloads(api_client, namespace, "queued-first")
            assert admitted(workload) and workload.status.admission.clusterQueue == CLUSTER_QUEUE

            message = refused_by_the_queue(queued, "pytorchjob", "queued-refused", "worker")
            assert message.endswith(
                "its PyTorchJob was deleted. Fix: raise train_queue_timeout, ask for fewer replicas, or wait until the "
                "quota of its ClusterQueue is free (kubectl get clusterqueues shows what each holds)"), message
            assert not workloads(api_client, namespace, "queued-refused")
            # A batch Job the same (Kueue's pod set "main"), its Service gone with it.
            message = refused_by_the_queue(queued, "job", "queued-job", "main")
            assert "its Job was deleted." in message, message
            assert not workloads(api_client, namespace, "queued-job")
            assert objects(api_client, namespace, "v1", "Service", "queued-job") == []

            last = pool.submit(run_playbook, "train.yml", "local", dict(
                queued, train_start_mode="trainjob", train_run_id="queued-last"))
            # Kueue has looked at it and keeps it waiting.
            waiting_for("the last run waited", lambda: any(
                condition.type == "QuotaReserved" and condition.status == "False"
                for workload in workloads(api_client, namespace, "queued-last")
                for condition in (workload.status and workload.status.conditions) or ()), deadline, [first, last])
            assert not running_pods(api_client, namespace, "queued-last")
            stopped = run_playbook("train.yml", "local", stop)
            assert not stopped.failed, stopped.failure_messages()
            (said,) = stopped.results("Say what was stopped")
            assert said["msg"].startswith("deleted queued-first (JobSet)"), said
        finally:
            if not first.done():
                run_playbook("train.yml", "local", stop)
        ended = first.result(timeout=60)
        run = last.result(timeout=180)
    assert ended.failed and ended.last_words().startswith(("run queued-first failed: ", "run queued-first stopped: "))
    assert not run.failed, run.failure_messages()
    lines = [said["msg"] for said in run.results("Say where the run waits")]
    assert all(line.startswith("run queued-last queued after ") for line in lines[:-1]), lines
    assert any(line.endswith("LocalQueue team-a: not admitted: couldn't assign flavors to pod set node: "
                             "insufficient unused quota for nvidia.com/gpu in flavor %s, 8 more needed" % FLAVOR)
               for line in lines), lines
    assert lines[-1].startswith("run queued-last admitted after ") and lines[-1].endswith(
        "LocalQueue team-a: admitted by ClusterQueue %s" % CLUSTER_QUEUE), lines
    (said,) = run.results("Report the run")
    assert run.last_words() == said["msg"]
    assert_summary_line(said["msg"], "queued-last", tmp_path / "queued-last")
    summary = json.loads((tmp_path / "queued-last" / "summary.json").read_text())
    assert summary["start_mode"] == "trainjob"
    for status in summary["status"]:
        assert status["state"] == "succeeded" and status["first_loss"] > status["latest_loss"]
    (workload,) = workloads(api_client, namespace, "queued-last")
    assert admitted(workload)
    assert_trained_through_trainer(api_client, namespace, "queued-last")
    assert launched_processes("queued-first") == launched_processes("queued-last") == []


def test_a_run_on_a_localqueue_that_admits_nothing_is_refused_before_anything_is_made(
        api_client, deployed, queueing, tmp_path):
    namespace = deployed["cluster_namespace"]
    run = run_playbook("train.yml", "local", dict(deployed, train_start_mode="jobset", train_queue_name="nobodys",
                                                  train_run_id="unqueued", train_logs_dir=str(tmp_path)))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert ("train_queue_name: LocalQueue %s/nobodys does not exist, and Kueue would hold the run until it does; fix: "
            % namespace) in message, message
    assert not jobsets(api_client).get(namespace=namespace, field_selector="metadata.name=unqueued").items
