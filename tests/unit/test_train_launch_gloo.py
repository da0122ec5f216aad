"""files/bin/mlinfra train run for real: detached torchrun launches of
files/train/tiny_lm.py (gloo on the CPU, torch from .work/venv-workload),
two processes of this machine playing pods demo-0 and demo-1, everything on
127.0.0.1. Each launch returns at once; the tests poll `status` as the train
role does.
"""

import json
import os
import signal
import subprocess
import time

from ansible_collections.mlinfra.multinode.plugins.module_utils.train import launch as tl
from test_collective_bench_gloo import PYTHON, REPO
from test_pod_bench import free_port

LAUNCHER = [os.path.join(REPO, "files", "bin", "mlinfra"), "train"]
TINY_LM = os.path.join(REPO, "files", "train", "tiny_lm.py")
# Two torchrun nodes of one tiny_lm process each take about 10 s here; the
# rendezvous and the ranks' start-up are most of it.
DEADLINE = 180


def environment(pod, more=None):
    env = dict(os.environ, POD_NAME=pod, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", GLOO_SOCKET_IFNAME="lo")
    for name in ("MLINFRA_PLUGINS_DIR", "MLINFRA_RUN_DIR", "MASTER_ADDR", "MASTER_PORT", "MLINFRA_HOST_ROOT"):
        env.pop(name, None)
    for name in [name for name in env if name.startswith("NCCL_")]:
        env.pop(name)
    env.update(more or {})
    return env


def launcher(arguments, pod="demo-0", more_env=None):
    result = subprocess.run([PYTHON, *LAUNCHER] + arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, env=environment(pod, more_env), timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def start(pod, run_dir, run_id, port, nnodes, nproc, script_args, more_env=None):
    started = time.monotonic()
    result = launcher(["start", "--run-dir", str(run_dir), "--run-id", run_id, "--nnodes", str(nnodes),
                       "--nproc-per-node", str(nproc), "--rdzv-host", "127.0.0.1", "--rdzv-port", str(port),
                       "--local-addr", "127.0.0.1", "--script", TINY_LM, "--"] + script_args, pod=pod,
                      more_env=more_env)
    assert result["state"] == "running" and result["started"], result
    # Detached: it returns while torchrun is still meeting the other node.
    assert time.monotonic() - started < 30
    return result


def status(run_dir):
    return launcher(["status", "--run-dir", str(run_dir)])


def ended(result):
    """Over, with nothing left. The supervisor writes the exit status and
    then exits: on a busy machine a status read between the two still lists
    it, so "no process left" is waited for (and fails at the deadline if a
    worker outlives its launch) rather than read once."""
    return result["state"] != "running" and result["processes"] == []


def wait(run_dirs, until=ended):
    deadline = time.monotonic() + DEADLINE
    while True:
        results = [status(run_dir) for run_dir in run_dirs]
        if all(until(result) for result in results):
            return results
        assert time.monotonic() < deadline, json.dumps(results, indent=1)[-6000:]
        time.sleep(1)


def processes_of(run_dir):
    """Live processes carrying the launch's token or in its process group,
    read from /proc here rather than through the launcher."""
    with open(os.path.join(str(run_dir), "launch.json")) as handle:
        launch = json.load(handle)
    needle = ("%s=%s" % (tl.TOKEN_VARIABLE, launch["token"])).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/environ" % name, "rb") as handle:
                environ = handle.read().split(b"\0")
        except (IOError, OSError):
            continue
        if fields[0] != "Z" and (int(fields[2]) == launch["pgid"] or needle in environ):
            found.append(int(name))
    return found


def test_two_nodes_train_detached_and_report_their_metrics(workload_python, tmp_path):
    port = free_port()
    began = time.monotonic()
    dirs = [tmp_path / "demo-0", tmp_path / "demo-1"]
    # Node 0 reads a built node's root (RDMA ports with counters); node 1
    # this machine's, which has none.
    roots = [{"MLINFRA_HOST_ROOT": os.path.join(REPO, "tests", "fixtures", "nodes", "roce-counters")}, {}]
    for rank, run_dir in enumerate(dirs):
        start("demo-%d" % rank, run_dir, "demo-run", port, 2, 1, ["--steps", "30", "--log-freq", "10"],
              more_env=roots[rank])
    results = wait(dirs)
    seconds = time.monotonic() - began
    for rank, (run_dir, result) in enumerate(zip(dirs, results)):
        assert result["state"] == "succeeded" and result["exit_code"] == 0, result["log_tail"]
        assert result["node_rank"] == rank and result["run_id"] == "demo-run" and result["processes"] == []
        # Every node's local rank 0 prints TorchTitan's metrics line.
        metrics = result["metrics"]
        assert metrics["step"] == 30 and metrics["tps"] > 0 and metrics["tflops"] is not None
        assert result["steps_logged"] == 4
        assert result["first_loss"] > 5.0 and result["latest_loss"] < result["first_loss"] - 1.0, result
        assert any("Training completed: 30 steps" in line for line in result["log_tail"])
        with open(str(run_dir / "launch.json")) as handle:
            launch = json.load(handle)
        assert launch["node_rank"] == rank and launch["pid"] == launch["pgid"] == result["pid"]
        assert launch["command"][launch["command"].index("--rdzv-endpoint") + 1] == "127.0.0.1:%d" % port
        with open(str(run_dir / ("node-%d.log" % rank))) as handle:
            log = handle.read()
        assert "[INFO] RDMA Configuration:" in log and "[INFO]   Memlock: " in log
        assert (run_dir / "exit_code").read_text() == "0\n"
        assert processes_of(run_dir) == []
    # What the ports moved while torchrun ran, read by the supervisor before
    # and after it (the recorded counters stand still).
    assert sorted(results[0]["port_counters"]) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
    assert all(port["bytes"] == 0 and port["errors"] == {} for port in results[0]["port_counters"].values())
    assert results[1]["port_counters"] == {}
    # The loss is the mean over all ranks: both nodes print the same one.
    assert results[0]["latest_loss"] == results[1]["latest_loss"]
    print("two-node demo: %.1f s from the first start to both succeeded (node 0 reports %.1f s)"
          % (seconds, results[0]["seconds"]))
    assert seconds < 60


def environ_of(pid):
    with open("/proc/%d/environ" % pid, "rb") as handle:
        return dict(item.split("=", 1) for item in handle.read().decode().split("\0") if "=" in item)


def test_stop_leaves_no_process_of_the_launch(workload_python, tmp_path):
    run_dir = tmp_path / "run"
    # What the autodetect init container leaves in $MLINFRA_RUN_DIR; the
    # environment's own NCCL_DEBUG wins over the file's.
    (tmp_path / "nccl.env").write_text("# detected\nexport NCCL_SOCKET_IFNAME='=lo'\nexport NCCL_DEBUG='WARN'\n")
    started = start("demo-0", run_dir, "long-run", free_port(), 1, 2, ["--steps", "1000000", "--log-freq", "50", "--step-pause", "0.2"],
                    more_env={"MLINFRA_RUN_DIR": str(tmp_path), "NCCL_DEBUG": "INFO"})
    assert started["nccl_env"]["kept_from_environment"] == {"NCCL_DEBUG": {"environment": "INFO",
                                                                           "nccl_env": "WARN"}}
    assert started["rdma"]["nccl"] == {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "=lo"}
    running = wait([run_dir], until=lambda result: result["steps_logged"] > 0 or result["state"] != "running")[0]
    assert running["state"] == "running" and running["metrics"]["tps"] > 0
    # Supervisor, torchrun and its two workers (in sessions of their own).
    assert len(running["processes"]) >= 4 and started["pid"] in running["processes"]
    assert sorted(processes_of(run_dir)) == running["processes"]
    workers = [pid for pid in running["processes"] if "LOCAL_RANK" in environ_of(pid)]
    assert len(workers) == 2
    for pid in workers:
        environ = environ_of(pid)
        assert environ["NCCL_SOCKET_IFNAME"] == "=lo" and environ["NCCL_DEBUG"] == "INFO"
        with open("/proc/%d/limits" % pid) as handle:
            memlock = [line.split()[3] for line in handle if line.startswith("Max locked memory")][0]
        soft = started["memlock"]["soft"]
        assert memlock == (soft if soft == "unlimited" else str(soft))
    # Starting the same run again changes nothing; another run is refused.
    again = launcher(["start", "--run-dir", str(run_dir), "--run-id", "long-run", "--nnodes", "1",
                      "--nproc-per-node", "2", "--rdzv-host", "127.0.0.1", "--script", TINY_LM])
    assert again["already_running"] and again["pid"] == started["pid"]
    other = launcher(["start", "--run-dir", str(run_dir), "--run-id", "other", "--nnodes", "1",
                      "--nproc-per-node", "2", "--rdzv-host", "127.0.0.1", "--script", TINY_LM])
    assert other["state"] == "failed-to-start" and "holds the running launch of run long-run" in other["error"]

    stopped = launcher(["stop", "--run-dir", str(run_dir), "--grace", "15"])
    assert stopped["state"] == "stopped" and stopped["stopped"] and stopped["left"] == []
    assert set(running["processes"]) <= set(stopped["terminated"])
    assert processes_of(run_dir) == []
    after = status(run_dir)
    assert after["state"] == "stopped" and after["processes"] == [] and after["stop_requested"]


def test_a_failing_rank_fails_both_nodes_with_the_log_tail(workload_python, tmp_path):
    port = free_port()
    dirs = [tmp_path / "demo-0", tmp_path / "demo-1"]
    for rank, run_dir in enumerate(dirs):
        start("demo-%d" % rank, run_dir, "failing-run", port, 2, 1, ["--steps", "30", "--fail-on-rank", "1"])
    results = wait(dirs)
    for result in results:
        assert result["state"] == "failed" and result["exit_code"] not in (0, None), result["log_tail"]
        assert "torchrun exited with" in result["error"]
        assert any("FAILED" in line for line in result["log_tail"]) and result["processes"] == []
    logs = []
    for rank, run_dir in enumerate(dirs):
        with open(str(run_dir / ("node-%d.log" % rank))) as handle:
            logs.append(handle.read())
    # Global rank 1 is on whichever node the rendezvous ordered second: each
    # node's status says which it got, and the one holding rank 1 names it
    # as the first failure.
    assert sum("rank 1 fails on purpose at step 3" in log for log in logs) == 1
    assert sorted(result["assigned_node_rank"] for result in results) == [0, 1]
    holder = [result for result in results if result["assigned_node_rank"] == 1][0]
    assert "rank 1 fails on purpose at step 3" in logs[results.index(holder)]
    assert "; first failure: rank 1 (local rank 0) exited with 1" in holder["error"], holder["error"]


FAKE_TORCHTITAN = '''import json, os, sys
print("argv " + json.dumps(sys.argv[1:]))
print("cwd " + os.getcwd())
print("[titan] 2026-01-01 00:00:00,000 - root - INFO - step:  1  loss:  9.5000  grad_norm:  1.0000  "
      "memory:  1.00GiB(1.00%)  tps: 1,000  tflops: 1.00  mfu: 0.10%")
print("[titan] 2026-01-01 00:00:01,000 - root - INFO - step:  5  loss:  7.2500  grad_norm:  1.0000  "
      "memory:  1.00GiB(1.00%)  tps: 2,345  tflops: 2.00  mfu: 0.20%")
'''


def test_torchtitan_workload_gets_its_config_and_overrides(workload_python, tmp_path):
    """TorchTitan is not installed here: a stand-in torchtitan.train prints
    the arguments it got and two metrics lines in TorchTitan's format."""
    package = tmp_path / "site" / "torchtitan"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(FAKE_TORCHTITAN)
    (tmp_path / "job.toml").write_text("[training]\nsteps = 100\n")
    run_dir = tmp_path / "run"
    result = launcher(["start", "--run-dir", str(run_dir), "--run-id", "titan", "--nnodes", "1", "--nproc-per-node",
                       "1", "--rdzv-host", "127.0.0.1", "--rdzv-port", str(free_port()), "--local-addr", "127.0.0.1",
                       "--workdir", str(tmp_path), "--config", "job.toml", "--override", "training.steps=5",
                       "--override", "checkpoint.enable=false", "--", "--metrics.log_freq", "1"],
                      more_env={"PYTHONPATH": str(tmp_path / "site")})
    assert result["state"] == "running", result
    done = wait([run_dir])[0]
    assert done["state"] == "succeeded", done["log_tail"]
    assert "[rank0]:argv " + json.dumps(["--job.config_file", str(tmp_path / "job.toml"), "--training.steps", "5",
                                         "--checkpoint.no-enable", "--metrics.log_freq", "1"]) in done["log_tail"]
    assert "[rank0]:cwd %s" % tmp_path in done["log_tail"]
    assert done["metrics"] == {"step": 5, "loss": 7.25, "tps": 2345.0, "tflops": 2.0, "mfu": 0.002, "memory_gib": 1.0}
    assert (done["first_loss"], done["latest_loss"], done["steps_logged"]) == (9.5, 7.25, 2)


def foreground(pod, run_dir, run_id, port, script_args, extra=()):
    """start --wait, as a Job's container runs it: stays until torchrun ends."""
    return subprocess.Popen([PYTHON, *LAUNCHER, "start", "--wait", "--run-dir", str(run_dir), "--run-id", run_id,
                             "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-host", "127.0.0.1", "--rdzv-port",
                             str(port), "--local-addr", "127.0.0.1", "--workload", "demo"] + list(extra)
                            + ["--"] + script_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, env=environment(pod, {"MLINFRA_PLUGINS_DIR": os.path.join(
                                REPO, "plugins")}))


def test_foreground_nodes_print_their_log_and_exit_with_the_runs_status(workload_python, tmp_path):
    """The Job start modes' container: the node's log on standard output,
    then the status line; the exit status says how the run ended."""
    port = free_port()
    ok = [foreground("job-%d" % rank, tmp_path / ("ok-%d" % rank), "fg-ok", port, ["--steps", "10"])
          for rank in range(2)]
    for rank, process in enumerate(ok):
        out, err = process.communicate(timeout=DEADLINE)
        assert process.returncode == 0, out[-3000:] + err[-2000:]
        lines = out.splitlines()
        assert lines[1] == "mlinfra train: run fg-ok, node %d of 2" % rank
        assert "Training completed: 10 steps" in out and "torchrun exited with 0" in out
        final = json.loads(lines[-1])
        assert final["state"] == "succeeded" and final["exit_code"] == 0 and "log_tail" not in final
        # The demo workload is the collection's tiny_lm.py.
        with open(str(tmp_path / ("ok-%d" % rank) / "launch.json")) as handle:
            assert json.load(handle)["script"] == TINY_LM
    port = free_port()
    failing = [foreground("job-%d" % rank, tmp_path / ("bad-%d" % rank), "fg-bad", port,
                          ["--steps", "30", "--fail-on-rank", "1"]) for rank in range(2)]
    codes = [process.communicate(timeout=DEADLINE) and process.returncode for process in failing]
    assert all(code not in (0, None) for code in codes), codes


def test_sigterm_to_a_foreground_node_stops_its_run(workload_python, tmp_path):
    """Kubernetes deleting a Job's pod sends SIGTERM to its container."""
    run_dir = tmp_path / "run"
    process = foreground("job-0", run_dir, "fg-term", free_port(), ["--steps", "1000000", "--log-freq", "50", "--step-pause", "0.2"],
                         extra=["--nnodes", "1"])
    deadline = time.monotonic() + DEADLINE
    while not (run_dir / "launch.json").exists() or not any(
            "step:" in line for line in status(run_dir)["log_tail"]):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(1)
    # A single-node job: the rendezvous needs no one else.
    process.send_signal(signal.SIGTERM)
    out, _err = process.communicate(timeout=60)
    final = json.loads(out.splitlines()[-1])
    assert final["state"] == "stopped" and final["stop_requested"] and process.returncode != 0
    assert processes_of(run_dir) == []
