"""train.yml run by ansible-playbook against the local cluster: each fake
pod's exec runs mlinfra train on this machine, so two "nodes" rendezvous on
127.0.0.1 and train the collection's tiny language model over gloo on the CPU
(inventories/local/group_vars/all/train.yml)."""

import json
import os
import re
import time

import pytest
from ansible_cli import (deployment, doc_command_in_background, playbook_in_background, run_doc_command, run_module,
                         run_playbook)
from kubernetes import client

pytestmark = pytest.mark.integration

HEALTHY = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]
APP = "h-kim"


@pytest.fixture(scope="module")
def deployed(api_client):
    """Two training pods on two healthy nodes, shared by the tests here."""
    with deployment(api_client, "train", HEALTHY) as settings:
        yield settings


def processes():
    """(pid, environment entries, command line) of this machine's processes."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                environ = handle.read().split(b"\0")
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        yield pid, environ, cmdline


def launched_processes(token_prefix):
    """Processes of this machine whose environment holds a launch token of
    a run (every process of a launch carries MLINFRA_TRAIN_TOKEN)."""
    return [(pid, cmdline) for pid, environ, cmdline in processes()
            if any(item.startswith(b"MLINFRA_TRAIN_TOKEN=") for item in environ) and token_prefix in cmdline]


def assert_summary_line(said, run_id, logs_dir, steps=30):
    """The closing line of a successful run of the local inventory's demo
    (two pods, 30 steps unless train_steps says): its throughput, and the loss falling on rank 0,
    as numbers. The tiny model's throughput on the shared cores of this
    machine can fall mid-run when other work starts: the verdict may then
    be DEGRADED, with its figures, and the line is the same otherwise."""
    match = re.match(r"run %s succeeded on 2 pod\(s\) x 1 process\(es\): ([0-9.]+) tokens/s[^;]*; "
                     r"loss ([0-9.]+) -> ([0-9.]+) over %d steps; "
                     r"(?:not degraded|DEGRADED: fell [0-9.]+%% from step [0-9]+ on \([0-9.]+ to [0-9.]+ [^)]+\))"
                     # One run and no train_baseline: nothing to compare with, and it says so.
                     r" within the run; no other run to compare it with \(train_baseline\); logs and summary: (.*)$"
                     % (re.escape(run_id), steps), said)
    assert match, said
    throughput, first_loss, latest_loss, logs = match.groups()
    # The tiny model learns: bytes are far from uniform (ln 256 = 5.55).
    assert float(throughput) > 0 and float(first_loss) > float(latest_loss) + 1.0, said
    assert logs == "%s/" % logs_dir


def looks_at_the_pods_started(run_id):
    """Whether train.yml has begun to follow the run: its look at the pods
    runs `mlinfra train status` in each pod, here a process of this machine."""
    return any(" status --run-dir " in cmdline and run_id in cmdline for _pid, _environ, cmdline in processes())


def test_training_runs_across_two_pods_and_is_summed_up(deployed, tmp_path, localcluster):
    """The demo, while the API server stops answering for a moment once the
    run is followed (the run's own kubeconfig points at a closed port
    meanwhile): the look that fails is tried again within its period, and
    the run is followed to its end and summed up as if nothing had happened."""
    kubeconfig, logs_dir = tmp_path / "kubeconfig", tmp_path / "logs"
    working = localcluster.KUBECONFIG.read_text()
    kubeconfig.write_text(working)
    # README's command, with the demo workload of the local inventory.
    settings = dict(deployed, train_logs_dir=str(logs_dir), cluster_kubeconfig=str(kubeconfig),
                    train_progress_interval=6, train_poll_interval=1)
    with doc_command_in_background("ansible-playbook playbooks/train.yml -i inventories/<cluster> [-e train_run_id=ID] "
                                   "[-e train_steps=N]", inventory_values=settings, train_run_id="demo-ok",
                                   train_steps=24) as finish:
        deadline = time.monotonic() + 120
        while not looks_at_the_pods_started("demo-ok") and time.monotonic() < deadline:
            time.sleep(0.1)
        # The first look holds its connection; the API is gone for the next
        # one, until a module has read the broken kubeconfig (its access
        # time passes the write) and a second more.
        kubeconfig.write_text(re.sub(r"server: https://127\.0\.0\.1:[0-9]+", "server: https://127.0.0.1:1", working))
        written = kubeconfig.stat().st_mtime
        while kubeconfig.stat().st_atime <= written and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        kubeconfig.write_text(working)
        run = finish()
    assert time.monotonic() < deadline, "no look at the pods began while the API was gone"
    assert not run.failed, run.failure_messages()
    # That look failed and was tried again within its period.
    assert max(look.get("attempts", 1) for look in run.results("Look at the pods")) > 1
    (said,) = run.results("Report the run")
    assert run.last_words() == said["msg"]
    assert_summary_line(said["msg"], "demo-ok", logs_dir / "demo-ok", steps=24)
    summary = json.loads((logs_dir / "demo-ok" / "summary.json").read_text())
    assert summary["throughput"]["throughput"] > 0 and summary["throughput"]["format"] == "torchtitan"
    states = [status["state"] for status in summary["status"]]
    assert states == ["succeeded", "succeeded"]
    for status in summary["status"]:
        # The tiny model learns: bytes are far from uniform (ln 256 = 5.55).
        assert status["first_loss"] > status["latest_loss"] + 1.0 and status["metrics"]["step"] == 24
    for pod in (APP + "-0", APP + "-1"):
        log = (logs_dir / "demo-ok" / (pod + ".log")).read_text()
        assert "NCCL" in log and "step: 24" in log and "step: 25" not in log
    assert launched_processes("demo-ok") == []


def test_a_run_in_progress_is_not_killed_by_deploy_scale_or_teardown_unless_asked(deployed, tmp_path):
    """A long run in the pods: deploy.yml with a changed pod setting (which
    would replace the pods), scale.yml and teardown.yml each refuse before
    changing anything, naming the run, its pods and the fix; deploy.yml
    with -e stop_running=true stops the run first and goes on."""
    # Only held in progress until it is stopped: a look every 5 s (each
    # starts a program in every pod).
    settings = dict(deployed, train_run_id="long-run-3", train_logs_dir=str(tmp_path), train_timeout=600,
                    train_poll_interval=5, train_args=["--steps", "1000000", "--step-pause", "0.2"])
    with playbook_in_background("train.yml", "local", settings) as finish:
        deadline = time.monotonic() + 120
        while not looks_at_the_pods_started("long-run-3") and time.monotonic() < deadline:
            time.sleep(0.2)
        refusals = {
            "deploy.yml": run_playbook("deploy.yml", "local", dict(deployed, cluster_pod_cpu="2")),
            "scale.yml": run_playbook("scale.yml", "local", dict(deployed, replicas=1)),
            "teardown.yml": run_playbook("teardown.yml", "local", deployed),
        }
        for playbook, refused in refusals.items():
            assert refused.failed, playbook
            said = refused.last_words()
            assert said.startswith("run long-run-3 is in progress (exec start mode, pod(s) h-kim-0, h-kim-1); "), said
            assert "-e stop=true), or run this again with -e stop_running=true to stop it first" in said, said
            assert refused.changed == 0, playbook
        assert launched_processes("long-run-3"), "a refusal stopped the run"
        stopped = run_playbook("deploy.yml", "local", dict(deployed, stop_running=True))
        assert not stopped.failed, stopped.failure_messages()
        (said,) = stopped.results("Say what was stopped")
        assert said["msg"] == "stopped the run in h-kim-0 (run long-run-3), h-kim-1 (run long-run-3)", said["msg"]
        (said,) = stopped.results("Say which runs were stopped before going on")
        assert said["msg"].strip() == "stopped run long-run-3 (h-kim-0, h-kim-1) before going on (stop_running=true)"
        train = finish()
    assert train.failed and "run long-run-3 stopped: " in " ".join(train.failure_messages())
    assert launched_processes("long-run-3") == []


def test_a_pod_deleted_while_the_run_runs_is_named_as_the_cause(deployed, tmp_path, api_client):
    """A pod of a long run deleted by hand (as a drain, an eviction or a
    kubectl delete would): the other rank then fails on its lost peer, and
    the play's message leads with what happened to the pod, not with that
    echo; no process of the run is left."""
    core = client.CoreV1Api(api_client)
    namespace = deployed["cluster_namespace"]
    settings = dict(deployed, train_run_id="lost-pod", train_logs_dir=str(tmp_path), train_timeout=300,
                    train_poll_interval=1, train_args=["--steps", "1000000", "--step-pause", "0.2"])
    try:
        with playbook_in_background("train.yml", "local", settings) as finish:
            deadline = time.monotonic() + 120
            while not looks_at_the_pods_started("lost-pod") and time.monotonic() < deadline:
                time.sleep(0.2)
            core.delete_namespaced_pod(APP + "-1", namespace)
            run = finish()
        assert run.failed
        (message,) = run.failure_messages()
        assert re.match(r"run lost-pod failed: pod h-kim-1 was (replaced|deleted) while the run ran", message), message
        # Its peer failed on the lost pod, or was stopped after it: an echo, after the cause.
        assert re.search(r"; h-kim-0 (failed \(exit status|was still running and was stopped)", message), message
        assert message.endswith("logs: %s/lost-pod/" % tmp_path), message
        assert launched_processes("lost-pod") == []
    finally:
        # The StatefulSet's new pod, Running before the next test trains.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pods = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=" + APP).items
            if len(pods) == 2 and all(pod.status.phase == "Running" and not pod.metadata.deletion_timestamp
                                      for pod in pods):
                break
            time.sleep(0.5)


def test_a_script_that_logs_no_throughput_succeeds_and_says_it_was_not_measured(deployed, tmp_path, localcluster):
    """train_workload: script runs the user's own script, which need not
    log a trainer's throughput lines: its run succeeded, and the closing
    line says the throughput was not reported and not judged."""
    script = "import os\nprint('rank', os.environ['RANK'], 'done', flush=True)\n"
    written = run_module("pods_exec", {
        "kubeconfig": str(localcluster.KUBECONFIG), "namespace": deployed["cluster_namespace"],
        "pods": [APP + "-0", APP + "-1"], "container": "trainer",
        "command": ["bash", "-c", 'printf %s "$1" > quiet.py', "write", script]})
    assert not written.get("failed"), written
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="quiet-script", train_workload="script",
                                                  train_script="quiet.py", train_args=[],
                                                  train_logs_dir=str(tmp_path)))
    assert not run.failed, run.failure_messages()
    said = run.last_words()
    assert said.startswith("run quiet-script succeeded on 2 pod(s) x 1 process(es): throughput not reported (no "
                           "throughput lines of a known trainer in rank 0's log); "), said
    assert "; degradation not judged; logs and summary: %s/quiet-script/" % tmp_path in said
    # (torchrun's copy of a worker's last lines to its own output may miss
    # a worker that ends at once; the launcher's record of the exit does not)
    assert "torchrun exited with 0" in (tmp_path / "quiet-script" / (APP + "-0.log")).read_text()


def test_a_failing_rank_fails_the_play_with_its_log(deployed, tmp_path):
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="demo-fail", train_logs_dir=str(tmp_path),
                                                  train_args=["--steps", "30", "--fail-on-rank", "1"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "run demo-fail failed:" in message and "failed (exit status" in message
    # The failing worker's own words, not only torchrun's summary.
    assert "last lines of" in message and "rank 1 fails on purpose at step 3" in message, message
    assert launched_processes("demo-fail") == []
    # The same command again (as after a lost controller): the run is
    # reported as it ended, from the pods' run directories, not trained again.
    again = run_playbook("train.yml", "local", dict(deployed, train_run_id="demo-fail", train_logs_dir=str(tmp_path),
                                                    train_args=["--steps", "30", "--fail-on-rank", "1"]))
    assert again.failed
    (said,) = again.results("Say that the run had already ended, run demo-fail")
    assert said["msg"].startswith("run demo-fail had already ended in every pod; it is not trained again")
    assert [entry["json"]["already_finished"] for entry in again.results("Start the run in every pod")[0]["pods"]] \
        == [True, True]
    message = " ".join(again.failure_messages())
    assert "run demo-fail failed:" in message and "rank 1 fails on purpose at step 3" in message, message


def test_a_run_past_its_timeout_is_stopped_on_every_rank(deployed, tmp_path):
    run = run_playbook("train.yml", "local", dict(deployed, train_run_id="demo-slow", train_logs_dir=str(tmp_path),
                                                  train_timeout=20, train_args=["--steps", "1000000", "--step-pause", "0.2"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "run demo-slow was still running after train_timeout=20 s; every rank was stopped (0 pod(s) left" in message
    assert launched_processes("demo-slow") == []
    # Stopping it again: nothing to stop, and said so (it used to list the
    # ended run's state as if this had stopped it).
    again = run_doc_command("ansible-playbook playbooks/train.yml -i inventories/<cluster> -e stop=true",
                            inventory_values=deployed, stop=True)
    assert not again.failed, again.failure_messages()
    (said,) = again.results("Say what was stopped")
    assert re.match(r"nothing to stop: no run was going; already ended in h-kim-0 \(run demo-slow had \w+\), "
                    r"h-kim-1 \(run demo-slow had \w+\)$", said["msg"]), said["msg"]


def test_soak_repeats_a_short_training_run_and_judges_each(deployed, tmp_path):
    run = run_playbook("soak.yml", "local", dict(deployed, soak_workload="train", soak_runs=2,
                                                 soak_report_dir=str(tmp_path), soak_fail_on_degraded=False,
                                                 train_args=["--steps", "20", "--log-freq", "2"]))
    assert not run.failed, run.failure_messages()
    (soak_dir,) = tmp_path.glob("soak-*")
    report = json.loads((soak_dir / "soak.json").read_text())
    assert report["workload"] == "train" and report["not_measured"] == []
    assert [entry["run"] for entry in report["runs"]] == [1, 2]
    for entry in report["runs"]:
        assert entry["throughput"] > 0 and entry["unit"] == "tokens/s per device" and isinstance(entry["degraded"], bool)
        assert sorted(pod["node"] for pod in entry["pods"]) == HEALTHY
        assert os.path.isfile(entry["file"]) and "step: 20" in open(entry["file"]).read()
        # Its facts beside its log: the pods by uid and what their RDMA ports
        # moved while torchrun ran (the recorded nodes' counters stand still).
        facts = json.loads(open(entry["file"][:-len(".log")] + ".facts.json").read())
        assert facts["run"] == entry["run"] and sorted(pod["node"] for pod in facts["pods"]) == HEALTHY
        for pod in facts["pods"]:
            assert pod["uid"] and sorted(pod["port_counters"]) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
            assert all(port["bytes"] == 0 and port["errors"] == {} for port in pod["port_counters"].values())
    assert report["attribution"]["factors"] == []


def test_a_replica_count_that_differs_from_the_deployed_one_is_refused(deployed, tmp_path):
    # Three named nodes, so that replicas=3 passes the inventory's own checks.
    run = run_playbook("train.yml", "local", dict(deployed, replicas=3, train_logs_dir=str(tmp_path),
                                                  cluster_gpu_nodes=HEALTHY + ["moc-r4pcc04u12-nairr"]))
    assert run.failed
    message = " ".join(run.failure_messages())
    assert "the StatefulSet runs 2 replicas but replicas=3 here" in message
    assert "playbooks/scale.yml -i inventories/local -e replicas=3, or train with -e replicas=2" in message
    assert list(tmp_path.iterdir()) == []


def test_bad_settings_fail_before_anything_starts(deployed, tmp_path):
    run = run_playbook("train.yml", "local", dict(deployed, train_run_dir="/etc", train_logs_dir=str(tmp_path)))
    assert run.failed
    assert "train_run_dir is not a relative path inside the workspace (got '/etc')" in " ".join(run.failure_messages())
