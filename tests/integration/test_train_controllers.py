"""train.yml's operator start modes through the operators' own controllers
and admission webhooks, started on the local cluster for this file
(tools/localcluster/operators.py; built from their pinned Go modules): the
controller makes the run's Jobs and pods, the real kube-controller-manager
their pods, and the local cluster runs each pod's command on this machine,
so the launchers rendezvous on 127.0.0.1 and train the collection's tiny
model over gloo, as in the job start mode (test_train_jobs.py)."""

import json

import pytest
from ansible_cli import deployment, run_playbook
from kubernetes import client, dynamic
from test_train import assert_summary_line, launched_processes

pytestmark = pytest.mark.integration

OPERATORS = ("jobset",)
HEALTHY = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]


@pytest.fixture(scope="module")
def deployed(api_client, operator_controllers):
    """What deploy.yml creates, on a shared workspace, scaled to 0: the
    runs' pods need the GPUs the StatefulSet's pods would hold."""
    with deployment(api_client, "ctl", HEALTHY, {"cluster_storage_mode": "shared", "replicas": 0}) as settings:
        yield dict(settings, replicas=2)


def jobsets(api_client):
    return dynamic.DynamicClient(api_client).resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")


def test_a_jobset_trains_through_the_jobset_controller(api_client, deployed, tmp_path):
    namespace = deployed["cluster_namespace"]
    run = run_playbook("train.yml", "local", dict(deployed, train_start_mode="jobset", train_run_id="JobSet-OK",
                                                  train_logs_dir=str(tmp_path)))
    assert not run.failed, run.failure_messages()
    (said,) = run.results("Report the run")
    assert run.last_words() == said["msg"]
    assert_summary_line(said["msg"], "JobSet-OK", tmp_path / "JobSet-OK")
    summary = json.loads((tmp_path / "JobSet-OK" / "summary.json").read_text())
    assert summary["start_mode"] == "jobset"
    for status in summary["status"]:
        assert status["state"] == "succeeded" and status["first_loss"] > status["latest_loss"]
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
