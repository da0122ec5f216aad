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
