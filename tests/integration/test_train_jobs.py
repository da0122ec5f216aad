"""train.yml's Job start modes against the local cluster: the run's objects
are made from the StatefulSet's pods, the real kube-controller-manager's Job
controller makes the indexed Job's pods, and the local cluster runs each
pod's container command on this machine (tools/localcluster/localcluster.py,
as it runs exec'd commands), so the pods' launchers rendezvous on 127.0.0.1
and train the collection's tiny model over gloo, as in the exec start mode.

No operator runs on this file's cluster (their CRDs are installed, so the
objects are stored and validated, but nothing makes their pods): the
operator modes are tested here up to the object and its deletion, as a
cluster without the operator meets them, and their pods' script with the
operators' variables in tests/unit/plugins/module_utils/test_train_jobs.py;
test_train_controllers.py trains through the operators that run here."""

import concurrent.futures
import json
import time

import pytest
from ansible_cli import deployment, run_playbook
from kubernetes import client, dynamic
from test_train import assert_summary_line, launched_processes

pytestmark = pytest.mark.integration

HEALTHY = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]
APP = "h-kim"


@pytest.fixture(scope="module")
def deployed(api_client):
    """What deploy.yml creates, on a shared workspace, scaled to 0: the Job
    modes' pods need the GPUs the StatefulSet's pods would hold."""
    with deployment(api_client, "trainjob", HEALTHY, {"cluster_storage_mode": "shared", "replicas": 0}) as settings:
        yield dict(settings, train_start_mode="job", replicas=2)


def objects(api_client, namespace, api_version, kind, run):
    resource = dynamic.DynamicClient(api_client).resources.get(api_version=api_version, kind=kind)
    found = resource.get(namespace=namespace, label_selector="mlinfra.io/train-run=%s" % run)
    return [item.metadata.name for item in found.items]


def running_pods(api_client, namespace, run):
    found = client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector="mlinfra.io/train-run=" + run)
    return [pod.metadata.name for pod in found.items if pod.status.phase == "Running"]


def test_an_indexed_job_trains_across_two_pods_and_is_summed_up(api_client, deployed, tmp_path):
    namespace = deployed["cluster_namespace"]
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="Job-OK", train_logs_dir=str(tmp_path)))
    assert not run.failed, run.failure_messages()
    (created,) = run.results("Create run Job-OK")
    kinds = [(item["result"]["kind"], item["result"]["metadata"]["name"]) for item in created["results"]]
    assert kinds == [("Service", "job-ok"), ("Job", "job-ok")]
    job = created["results"][1]["result"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    assert job["metadata"]["annotations"]["mlinfra.io/run-id"] == "Job-OK"
    (said,) = run.results("Report the run")
    assert run.last_words() == said["msg"]
    assert_summary_line(said["msg"], "Job-OK", tmp_path / "Job-OK")
    summary = json.loads((tmp_path / "Job-OK" / "summary.json").read_text())
    assert summary["start_mode"] == "job" and summary["throughput"]["throughput"] > 0
    # One pod per index, each its node of the job, both trained to the end.
    assert [pod.rsplit("-", 1)[0] for pod in summary["pods"]] == ["job-ok-0", "job-ok-1"]
    for pod, status in zip(summary["pods"], summary["status"]):
        assert status["state"] == "succeeded" and status["exit_code"] == 0 and status["error"] is None
        assert status["metrics"]["step"] == 30 and status["first_loss"] > status["latest_loss"] + 1.0
        # From the launcher's status line at the end of the container's log,
        # with what the pod's RDMA ports moved while torchrun ran (nothing:
        # the nodes' snapshots hold still), for a soak's attribution.
        assert status["seconds"] > 0 and status["run_dir"].endswith("/mlinfra-runs/Job-OK/" + pod)
        assert sorted(status["port_counters"]) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
        assert all(port["bytes"] == 0 and port["errors"] == {} for port in status["port_counters"].values())
    for pod in summary["pods"]:
        log = (tmp_path / "Job-OK" / (pod + ".log")).read_text()
        assert "mlinfra train: run Job-OK, node" in log and "step: 30" in log
    # A finished run's Job stays (train_job_ttl) with its pods and their logs.
    assert objects(api_client, namespace, "batch/v1", "Job", "job-ok") == ["job-ok"]
    assert launched_processes("Job-OK") == []


def test_a_soak_of_job_runs_keeps_the_job_pods_and_their_counters(deployed, tmp_path):
    # One run, judged against a baseline (tokens/s) rather than other runs.
    run = run_playbook("soak.yml", "local", dict(deployed, soak_workload="train", soak_runs=1, soak_baseline=1,
                                                 soak_report_dir=str(tmp_path),
                                                 train_args=["--steps", "10", "--log-freq", "2"]))
    assert not run.failed, run.failure_messages()
    (soak_dir,) = tmp_path.glob("soak-*")
    (entry,) = json.loads((soak_dir / "soak.json").read_text())["runs"]
    assert entry["throughput"] > 0 and entry["degraded"] is False
    # The Job's own pods (the StatefulSet has none), pod 0's log named after
    # it, and beside it the facts the attribution reads.
    pods = sorted(entry["pods"], key=lambda pod: pod["pod"])
    assert sorted(pod["node"] for pod in pods) == HEALTHY and len({pod["uid"] for pod in pods}) == 2
    assert entry["file"].endswith("/%s.log" % pods[0]["pod"]) and "step: 10" in open(entry["file"]).read()
    facts = json.loads(open(entry["file"][:-len(".log")] + ".facts.json").read())
    assert [(pod["pod"], pod["uid"]) for pod in facts["pods"]] == [(pod["pod"], pod["uid"]) for pod in pods]
    for pod in facts["pods"]:
        assert sorted(pod["port_counters"]) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
    # And what the probes read of the run's nodes' whole ports around it.
    assert [node["node"] for node in facts["nodes"]] == HEALTHY
    assert all(sorted(node["port_counters"]) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
               for node in facts["nodes"])


def test_a_failing_rank_fails_the_run_with_its_log_and_ends_the_job(api_client, deployed, tmp_path):
    namespace = deployed["cluster_namespace"]
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="batch-fail", train_logs_dir=str(tmp_path),
                                                  train_args=["--steps", "30", "--fail-on-rank", "1"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "run batch-fail failed:" in message and "rank 1 fails on purpose at step 3" in message, message
    assert objects(api_client, namespace, "batch/v1", "Job", "batch-fail") == []
    assert launched_processes("batch-fail") == []


def test_a_run_past_its_timeout_is_deleted_with_every_rank(api_client, deployed, tmp_path):
    namespace = deployed["cluster_namespace"]
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="batch-slow", train_logs_dir=str(tmp_path),
                                                  train_timeout=25, train_progress_interval=5,
                                                  train_args=["--steps", "1000000", "--step-pause", "0.2"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "run batch-slow timed-out: every rank was stopped after train_timeout=25 s (its Job deleted)" in message
    progress = [said["msg"] for said in run.results("Say how far the run is")]
    assert any("2 of 2 pod(s)" in line and line.count(" Running") == 2 for line in progress), progress
    assert objects(api_client, namespace, "batch/v1", "Job", "batch-slow") == []
    assert objects(api_client, namespace, "v1", "Service", "batch-slow") == []
    deadline = time.monotonic() + 30
    while launched_processes("batch-slow") and time.monotonic() < deadline:
        time.sleep(1)
    assert launched_processes("batch-slow") == []


def test_stop_deletes_the_current_runs(api_client, deployed, tmp_path):
    namespace = deployed["cluster_namespace"]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        following = pool.submit(run_playbook, "train.yml", "local", dict(
            deployed, train_run_id="batch-stopped", train_logs_dir=str(tmp_path), train_timeout=120,
            train_progress_interval=2, train_poll_interval=1))
        deadline = time.monotonic() + 60
        while not objects(api_client, namespace, "batch/v1", "Job", "batch-stopped"):
            assert time.monotonic() < deadline and not following.done(), "the run's Job never appeared"
            time.sleep(1)
        # Teardown would kill it: refused, naming the run and its pods, once
        # they run (runs_in_progress reads the runs' pods).
        while len(running_pods(api_client, namespace, "batch-stopped")) < 2:
            assert time.monotonic() < deadline and not following.done(), "the run's pods never ran"
            time.sleep(1)
        refused = run_playbook("teardown.yml", "local", dict(deployed, cluster_lock_wait=30))
        assert refused.failed
        (message,) = refused.failure_messages()
        assert message.startswith("run batch-stopped is in progress (job start mode, pod(s) batch-stopped-0-"), message
        assert "teardown.yml deletes the pods, which would kill it" in message
        assert objects(api_client, namespace, "batch/v1", "Job", "batch-stopped") == ["batch-stopped"]
        stopped = run_playbook("train.yml", "local", dict(deployed, stop=True))
        assert not stopped.failed, stopped.failure_messages()
        (said,) = stopped.results("Say what was stopped")
        assert said["msg"].startswith("deleted batch-stopped (Job)")
        assert objects(api_client, namespace, "batch/v1", "Job", "batch-stopped") == []
        # The run being followed sees its pods go and ends at once, not at
        # its train_timeout (120 s), saying why.
        run = following.result(timeout=90)
    assert run.failed
    # Whether it saw its pods fail as they were stopped or only saw them gone
    # depends on when it looked.
    said = run.last_words()
    assert said.startswith("run batch-stopped failed: ") or \
        said.startswith("run batch-stopped stopped: its pods were deleted while it ran"), said


# One operator kind: the message is one template over roles/train/vars'
# train_job_kinds (each mode's run through its real operator is in
# test_train_controllers.py).
@pytest.mark.parametrize("mode, api_version, kind, operator", [
    ("trainjob", "trainer.kubeflow.org/v1alpha1", "TrainJob", "Kubeflow Trainer (and JobSet)"),
])
def test_an_operator_kind_without_its_operator_times_out_with_the_reason(
        api_client, deployed, tmp_path, mode, api_version, kind, operator):
    namespace, run_id = deployed["cluster_namespace"], mode + "-run"
    run = run_playbook("train.yml", "local", dict(deployed, train_start_mode=mode, train_run_id=run_id,
                                                  train_logs_dir=str(tmp_path), train_timeout=4,
                                                  train_progress_interval=2, train_poll_interval=1))
    assert run.failed
    message = " ".join(" ".join(run.failure_messages()).split())
    assert "run %s had no pod after train_timeout=4 s; its %s was deleted" % (run_id, kind) in message
    assert "Does the cluster run %s, and do the nodes have room?" % operator in message
    (created,) = run.results("Create run " + run_id)
    workload = created["results"][-1]["result"]
    assert (workload["kind"], workload["metadata"]["name"]) == (kind, run_id)
    assert objects(api_client, namespace, api_version, kind, run_id) == []
    if mode == "trainjob":
        # The deployment's runtime stays for the next run; it is the
        # StatefulSet's pod with the container Trainer sets up.
        runtime = created["results"][0]["result"]
        assert (runtime["kind"], runtime["metadata"]["name"]) == ("TrainingRuntime", APP)
        resource = dynamic.DynamicClient(api_client).resources.get(api_version=api_version, kind="TrainingRuntime")
        pod = resource.get(namespace=namespace, name=APP).spec.template.spec.replicatedJobs[0].template.spec.template
        assert [c.name for c in pod.spec.containers] == ["node"]
        assert [c.name for c in pod.spec.initContainers] == ["autodetect"]
        assert workload["spec"]["trainer"]["numNodes"] == 2


@pytest.mark.parametrize("extra, expected", [
    ({"replicas": 0}, "replicas is 0: a run needs at least one node"),
    ({"cluster_storage_mode": "per-pod"}, "cluster_storage_mode is per-pod"),
], ids=["no-replicas", "per-pod-storage"])
def test_a_run_that_cannot_start_is_refused_before_anything_is_created(
        api_client, deployed, tmp_path, extra, expected):
    namespace = deployed["cluster_namespace"]
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="refused", train_logs_dir=str(tmp_path),
                                                  **extra))
    assert run.failed
    assert expected in " ".join(run.failure_messages())
    assert objects(api_client, namespace, "batch/v1", "Job", "refused") == []
    assert objects(api_client, namespace, "v1", "Service", "refused") == []


def test_a_run_id_naming_another_service_is_refused_and_the_service_kept(api_client, deployed, tmp_path):
    # A job run's Service is named after the run: run id H-KIM-headless
    # would have made one over the StatefulSet's headless Service.
    namespace = deployed["cluster_namespace"]
    headless = APP + "-headless"
    services = dynamic.DynamicClient(api_client).resources.get(api_version="v1", kind="Service")
    before = services.get(namespace=namespace, name=headless)
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="H-KIM-headless",
                                                  train_logs_dir=str(tmp_path)))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert ("Service %s/%s exists and run H-KIM-headless would make a Service of that name" % (namespace, headless)
            in message)
    after = services.get(namespace=namespace, name=headless)
    assert after.metadata.resourceVersion == before.metadata.resourceVersion
    assert after.spec.selector == before.spec.selector
    assert objects(api_client, namespace, "batch/v1", "Job", headless) == []


def test_the_statefulset_holding_the_gpus_is_refused(api_client, deployed, tmp_path):
    # The StatefulSet scaled up as scale.yml would (its own tests run it):
    # the refusal reads the replicas it asks for.
    apps = client.AppsV1Api(api_client)
    apps.patch_namespaced_stateful_set_scale(APP, deployed["cluster_namespace"], {"spec": {"replicas": 2}})
    try:
        run = run_playbook("train.yml", "local", dict(deployed, train_run_id="busy", train_logs_dir=str(tmp_path)))
        assert run.failed
        message = " ".join(run.failure_messages())
        assert "the StatefulSet h-kim runs 2 pod(s), which hold the GPUs of their nodes" in message
        assert "-e replicas=0 (the workspaces are kept)" in message
        assert objects(api_client, deployed["cluster_namespace"], "batch/v1", "Job", "busy") == []
    finally:
        apps.patch_namespaced_stateful_set_scale(APP, deployed["cluster_namespace"], {"spec": {"replicas": 0}})
        deadline = time.monotonic() + 60
        selector = "app.kubernetes.io/name=" + APP
        while client.CoreV1Api(api_client).list_namespaced_pod(deployed["cluster_namespace"],
                                                               label_selector=selector).items:
            assert time.monotonic() < deadline, "the StatefulSet's pods were not gone within 60 s"
            time.sleep(0.5)
