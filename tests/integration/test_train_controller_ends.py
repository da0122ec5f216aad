"""How runs of the operator start modes end through the operators' own
controllers (started on the local cluster for this file, as in
test_train_controllers.py, whose deployment fixture this file shares): a
failing rank fails the play naming its pod, its rank and the operator's
words; a run past its train_timeout, and one stopped with -e stop=true, is
deleted and its operator removes every rank. (The job start mode's:
test_train_jobs.py.) A file of its own so that the suite's two workers can
run it beside the rest of the operators' tests."""

import concurrent.futures
import re
import time

import pytest
from ansible_cli import run_playbook
from kubernetes import dynamic
from test_train import launched_processes
from test_train_controllers import OPERATORS as CONTROLLERS
from test_train_controllers import deployed as shared_deployment
from test_train_jobs import objects, running_pods

pytestmark = pytest.mark.integration

# The operators the operator_controllers fixture starts for this file, and
# the deployment fixture (one per file, like the operators).
OPERATORS = CONTROLLERS
deployed = shared_deployment


@pytest.mark.parametrize("mode, api_version, kind, said", [
    ("trainjob", "trainer.kubeflow.org/v1alpha1", "TrainJob",
     "its operator said TrainJob Failed: jobset failed due to reaching max number of restarts"),
    ("jobset", "jobset.x-k8s.io/v1alpha2", "JobSet",
     "its operator said JobSet Failed: jobset failed due to reaching max number of restarts"),
    ("pytorchjob", "kubeflow.org/v1", "PyTorchJob",
     "its operator said PyTorchJob Failed: Job pytorchjob-fail has failed because it has reached the specified "
     "backoff limit"),
    # Its policy (PodFailed: TerminateJob) deletes the pods still Running
    # when the first one fails, and keeps the failed one.
    ("volcano", "batch.volcano.sh/v1alpha1", "Job", "its operator said Volcano Job Terminated"),
])
def test_a_failing_rank_fails_the_play_with_its_pod_and_log_and_the_operators_words(
        api_client, deployed, tmp_path, mode, api_version, kind, said):
    namespace, run_id = deployed["cluster_namespace"], mode + "-fail"
    run = run_playbook("train.yml", "local", dict(deployed, train_start_mode=mode, train_run_id=run_id,
                                                  train_logs_dir=str(tmp_path),
                                                  train_args=["--steps", "30", "--fail-on-rank", "1"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    # The failed pod and its log's last lines; before them what the operator
    # said of the run, when it had said it by the run's last look (the pod's
    # end and the operator's race).
    assert message.startswith("run %s failed: " % run_id) and "; %s-" % run_id in message, message
    # The failing rank named with its pod (its ranks read from its log), and
    # its own last words.
    named = re.search(r"; %s-[-a-z0-9]+ \(rank 1\) failed \(exit status 1\)" % run_id, message) \
        and "rank 1 fails on purpose at step 3" in message
    if mode == "volcano" and not named:
        # When the other pod was seen Failed first, Volcano deleted the
        # failing rank's pod, its log with it: the message names that pod.
        assert re.search(r"pod volcano-fail-worker-[01] was deleted while the run ran and is not back", message), \
            message
    else:
        assert named, message
    assert "its operator said" not in message or message.startswith("run %s failed: %s" % (run_id, said)), message
    # Each pod's log is kept where the message says.
    assert "%s/%s" % (tmp_path, run_id) in message and list((tmp_path / run_id).glob("*.log"))
    # The run's object is deleted with what it made; no rank is left.
    assert not dynamic.DynamicClient(api_client).resources.get(api_version=api_version, kind=kind).get(
        namespace=namespace, field_selector="metadata.name=" + run_id).items
    assert launched_processes(run_id) == []


KINDS = {"pytorchjob": ("kubeflow.org/v1", "PyTorchJob"), "volcano": ("batch.volcano.sh/v1alpha1", "Job"),
         "jobset": ("jobset.x-k8s.io/v1alpha2", "JobSet"), "trainjob": ("trainer.kubeflow.org/v1alpha1", "TrainJob")}


def assert_cleaned_up(api_client, namespace, mode, run_id):
    """The run's object deleted, its operator's pods with it (the garbage
    collector through the owner references), and no rank left."""
    assert objects(api_client, namespace, *KINDS[mode], run_id) == []
    deadline = time.monotonic() + 30
    while (objects(api_client, namespace, "v1", "Pod", run_id) or launched_processes(run_id)) \
            and time.monotonic() < deadline:
        time.sleep(1)
    assert objects(api_client, namespace, "v1", "Pod", run_id) == []
    assert launched_processes(run_id) == []


# (job mode and trainjob's without Trainer: test_train_jobs.py)
@pytest.mark.parametrize("mode", ["pytorchjob", "volcano", "jobset"])
def test_a_run_past_its_timeout_is_deleted_and_its_operator_removes_every_rank(
        api_client, deployed, tmp_path, mode):
    namespace, run_id = deployed["cluster_namespace"], mode + "-slow"
    run = run_playbook("train.yml", "local", dict(deployed, train_start_mode=mode, train_run_id=run_id,
                                                  train_logs_dir=str(tmp_path), train_timeout=12,
                                                  train_progress_interval=6, train_poll_interval=2,
                                                  train_args=["--steps", "1000000", "--step-pause", "0.2"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert message.startswith("run %s timed-out: every rank was stopped after train_timeout=12 s (its %s deleted)"
                              % (run_id, KINDS[mode][1])), message
    progress = [said["msg"] for said in run.results("Say how far the run is")]
    assert any(re.search(r"2 of 2 pod\(s\): %s-\S+ Running; %s-\S+ Running;" % (run_id, run_id), line)
               for line in progress), progress
    assert_cleaned_up(api_client, namespace, mode, run_id)


# (job mode: test_train_jobs.py; jobset: the Kueue test below)
@pytest.mark.parametrize("mode", ["pytorchjob", "volcano", "trainjob"])
def test_stop_deletes_a_run_and_its_operator_removes_every_rank(api_client, deployed, tmp_path, mode):
    namespace, run_id = deployed["cluster_namespace"], mode + "-stopped"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        following = pool.submit(run_playbook, "train.yml", "local", dict(
            deployed, train_start_mode=mode, train_run_id=run_id, train_logs_dir=str(tmp_path), train_timeout=120,
            # A look at the pods every 2 s, at the run's object every 4 s
            # (it is read once a period: its deletion ends the run).
            train_progress_interval=4, train_poll_interval=2,
            train_args=["--steps", "1000000", "--step-pause", "0.2"]))
        deadline = time.monotonic() + 60
        while len(running_pods(api_client, namespace, run_id)) < 2:
            assert time.monotonic() < deadline and not following.done(), "the run's pods never ran"
            time.sleep(1)
        stopped = run_playbook("train.yml", "local", dict(deployed, train_start_mode=mode, stop=True))
        assert not stopped.failed, stopped.failure_messages()
        (said,) = stopped.results("Say what was stopped")
        assert said["msg"] == "deleted %s (%s): their pods stop" % (run_id, KINDS[mode][1])
        # The run being followed sees its pods go and ends at once, not at
        # its train_timeout (120 s).
        run = following.result(timeout=60)
    assert run.failed
    said = run.last_words()
    assert said.startswith("run %s failed: " % run_id) or \
        said.startswith("run %s stopped: its pods were deleted while it ran" % run_id), said
    assert_cleaned_up(api_client, namespace, mode, run_id)
