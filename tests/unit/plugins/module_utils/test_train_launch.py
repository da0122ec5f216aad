"""mlinfra train's logic without torch: the torchrun and TorchTitan command
lines, nccl.env read back, the launches refused before anything starts, and
status read from a run directory. tests/unit/test_train_launch_gloo.py runs
real launches."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.train import launch as tl
from ansible_collections.mlinfra.multinode.plugins.module_utils.train import launch_cli
from ansible_collections.mlinfra.multinode.plugins.module_utils.train import run_dir
from ansible_collections.mlinfra.multinode.plugins.module_utils.train import run_status
from ansible_collections.mlinfra.multinode.plugins.module_utils.train import supervisor
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.nccl_env import compute_nccl_env, \
    parse_env_file, read_env_file, render_env_file
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_node_facts

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
TORCHTITAN_LOG = os.path.join(REPO, "tests", "fixtures", "logs", "torchtitan", "torchtitan-normal-1.log")
TINY_LM = os.path.join(REPO, "files", "train", "tiny_lm.py")


# ------------------------------------------------------------ command lines

@pytest.mark.parametrize("text, argv", [
    ("training.steps=30", ["--training.steps", "30"]),
    ("--metrics.log_freq=10", ["--metrics.log_freq", "10"]),
    ("parallelism.data_parallel_shard_degree=-1", ["--parallelism.data_parallel_shard_degree", "-1"]),
    ("model.converters=float8,mx", ["--model.converters", "float8,mx"]),
    ("job.dump_folder=/workspace/out=1", ["--job.dump_folder", "/workspace/out=1"]),
    ("training.dataset_path=", ["--training.dataset_path", ""]),
    # tyro's booleans: a flag for true, --section.no-key for false.
    ("compile.enable=true", ["--compile.enable"]),
    ("checkpoint.enable=False", ["--checkpoint.no-enable"]),
    ("profiler.enable_profiling=false", ["--profiler.no-enable-profiling"]),
])
def test_overrides_are_torchtitan_options(text, argv):
    assert tl.format_override(text) == argv


@pytest.mark.parametrize("text", ["steps=30", "training.steps", "=3", "training..steps=3", "training.steps x=1"])
def test_malformed_overrides_are_refused(text):
    with pytest.raises(tl.LaunchError, match="SECTION.KEY=VALUE"):
        tl.format_override(text)


def test_torchtitan_entry_has_the_config_then_overrides_then_extra_arguments():
    entry = tl.torchtitan_entry("/w/llama3_8b.toml", ["training.steps=50", "checkpoint.enable=false"],
                                ["--metrics.log_freq", "5"])
    assert entry == ["-m", "torchtitan.train", "--job.config_file", "/w/llama3_8b.toml", "--training.steps", "50",
                     "--checkpoint.no-enable", "--metrics.log_freq", "5"]
    assert tl.torchtitan_entry() == ["-m", "torchtitan.train"]


def test_torchrun_command_uses_c10d_on_pod_0_which_hosts_the_store():
    entry = ["-m", "torchtitan.train", "--job.config_file", "c.toml"]
    head = ["/venv/bin/python", "-m", "torch.distributed.run", "--nnodes", "4", "--nproc-per-node", "8"]
    node0 = tl.torchrun_command("/venv/bin/python", 4, 8, 0, "h-kim-0.h-kim-headless.ns.svc.cluster.local", 29500,
                                "run-7", entry)
    assert node0 == head + ["--node-rank", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                            "h-kim-0.h-kim-headless.ns.svc.cluster.local:29500", "--rdzv-id", "run-7",
                            "--rdzv-conf", "is_host=1,join_timeout=600", "--max-restarts", "0"] + entry
    node3 = tl.torchrun_command("/venv/bin/python", 4, 8, 3, "fd00::5", 29500, "run-7", ["t.py"], local_addr="h-3",
                                join_timeout=60, log_dir="/run/x/ranks")
    assert node3[node3.index("--rdzv-endpoint") + 1] == "[fd00::5]:29500"
    assert node3[node3.index("--rdzv-conf") + 1] == "is_host=0,join_timeout=60"
    assert node3[-7:] == ["--local-addr", "h-3", "--log-dir", "/run/x/ranks", "--tee", "3", "t.py"]


# ------------------------------------------------------------------ nccl.env

def test_nccl_env_reads_back_what_autodetect_wrote(tmp_path, snapshot):
    result = compute_nccl_env(gather_node_facts(snapshot("port-down"), topology=False),
                              overrides={"NCCL_DEBUG": "it's INFO", "NCCL_ALGO": "Ring Tree"})
    path = tmp_path / "nccl.env"
    path.write_text(render_env_file(result))
    expected = dict(result["env"], DETECTED_TRANSPORT=result["transport"])
    assert read_env_file(str(path)) == expected
    assert expected["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_11:1" and expected["NCCL_DEBUG"] == "it's INFO"
    # The same values a shell sourcing it gets.
    names = sorted(expected)
    out = subprocess.run(["sh", "-c", '. "$1" && for n in %s; do eval "printf \'%%s\\n\' \\"\\$$n\\""; done'
                          % " ".join(names), "sh", str(path)], stdout=subprocess.PIPE, universal_newlines=True,
                         check=True).stdout
    assert out.splitlines() == [expected[name] for name in names]


def test_nccl_env_parser_refuses_what_it_cannot_read_without_a_shell():
    assert parse_env_file("# c\n\nexport A='x y'\nB=plain\nexport C=''\n") == {"A": "x y", "B": "plain", "C": ""}
    assert parse_env_file("export A='it'\"'\"'s'\nB==mlx5_0:1,mlx5_1:1\n") == {"A": "it's", "B": "=mlx5_0:1,mlx5_1:1"}
    for text, line in (("export A=1\nsource other.env\n", 2), ("export A=$(id)\n", 1), ("A='open\n", 1),
                       ("A=x y\n", 1), ('A="$HOME"\n', 1), ("A=`id`\n", 1)):
        with pytest.raises(ValueError, match="line %d " % line):
            parse_env_file(text)


def test_explicit_environment_wins_over_nccl_env(tmp_path):
    path = tmp_path / "nccl.env"
    path.write_text("export NCCL_IB_HCA='=mlx5_0:1'\nexport NCCL_DEBUG='WARN'\nexport OMP_NUM_THREADS='8'\n")
    added, report = tl.load_nccl_env(str(path), {"NCCL_DEBUG": "TRACE", "OMP_NUM_THREADS": "8"})
    assert added == {"NCCL_IB_HCA": "=mlx5_0:1"}
    assert report["found"] and report["error"] is None
    assert report["kept_from_environment"] == {"NCCL_DEBUG": {"environment": "TRACE", "nccl_env": "WARN"}}
    assert report["variables"]["OMP_NUM_THREADS"] == "8"
    missing = tl.load_nccl_env(str(tmp_path / "none.env"), {})
    assert missing == ({}, dict(missing[1], found=False, error=None))
    path.write_text("rm -rf /\n")
    added, report = tl.load_nccl_env(str(path), {})
    assert added == {} and "line 1 is not NAME=VALUE" in report["error"]
    assert tl.load_nccl_env("", {})[1]["path"] == ""


def test_banner_prints_the_rdma_configuration_like_the_seed(tmp_path, snapshot, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA H100 80GB HBM3 "
                   "(UUID: GPU-2)'\n")
    smi.chmod(0o755)
    env = {"PATH": str(bindir), "NCCL_IB_HCA": "=mlx5_6:1", "NCCL_SOCKET_IFNAME": "=eth0", "HOME": "/root"}
    memlock = {"soft": "unlimited", "hard": "unlimited", "unlimited": True, "error": None}
    rdma = tl.rdma_configuration(env, memlock, snapshot("port-down"))
    assert rdma["nccl"] == {"NCCL_IB_HCA": "=mlx5_6:1", "NCCL_SOCKET_IFNAME": "=eth0"}
    assert [dev["name"] for dev in rdma["devices"]] == ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"]
    assert rdma["gpus"] == ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)", "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)"]
    launch = {"run_id": "r1", "node_rank": 1, "nnodes": 2, "nproc_per_node": 2, "pod": "h-kim-1",
              "rdzv_endpoint": "h-kim-0.h:29500", "workload": "torchtitan", "workdir": "/workspace",
              "nccl_env": {"found": True, "path": "/run/mlinfra/nccl.env", "variables": {"A": "1"},
                           "kept_from_environment": {}, "error": None},
              "rdma": rdma, "command": ["python", "-m", "torch.distributed.run", "x y"]}
    text = tl.banner(launch)
    for line in ("[INFO] node_rank=1", "[INFO] total_processes=4", "[INFO] RDMA Configuration:",
                 "[INFO]   NCCL_IB_HCA==mlx5_6:1", "[INFO]   Memlock: unlimited", "  GPU 1: NVIDIA H100 80GB HBM3",
                 "[INFO] command: python -m torch.distributed.run 'x y'", "[INFO] Starting torchrun..."):
        assert line in text
    assert "[INFO]   mlx5_10 port 1: DOWN, Ethernet" in text and "mlx5_6 port 1: ACTIVE, Ethernet" in text
    assert tl.rdma_configuration({"PATH": str(tmp_path / "nothing")}, memlock, str(tmp_path))["gpus"] is None


def test_memlock_is_raised_where_permitted_and_reported_either_way():
    memlock = tl.raise_memlock()
    assert memlock["unlimited"] == (memlock["soft"] == "unlimited")
    assert memlock["error"] is None if memlock["unlimited"] else "CAP_SYS_RESOURCE" in memlock["error"]
    assert memlock["soft"] == "unlimited" or memlock["soft"] == memlock["hard"] or memlock["hard"] == "unlimited"


# --------------------------------------------------------- refused launches

def run_main(capsys, argv, environ):
    code = launch_cli.main(argv, environ=environ)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return code, json.loads(out)


@pytest.fixture
def no_dns(monkeypatch):
    """Only numeric addresses resolve: the tests send nothing to a DNS server."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host in ("127.0.0.1", "::1"):
            return real(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(supervisor.socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(supervisor, "_missing_modules", lambda python, modules: [])


def start_args(run_dir, *more):
    return ["start", "--run-dir", str(run_dir), "--run-id", "r1", "--nnodes", "2", "--nproc-per-node", "1",
            "--script", TINY_LM] + list(more)


@pytest.mark.parametrize("more, environ, words", [
    (["--rdzv-host", "no-such-host.invalid"], {"POD_NAME": "demo-0"},
     "the rendezvous host no-such-host.invalid does not resolve"),
    ([], {"POD_NAME": "demo-0", "MASTER_ADDR": "demo-0.demo-headless.ns.svc.cluster.local"},
     "demo-0.demo-headless.ns.svc.cluster.local does not resolve"),
    (["--rdzv-host", "127.0.0.1"], {"POD_NAME": "demo-2"}, "node rank 2 is outside 0..1 (--nnodes 2)"),
    (["--rdzv-host", "127.0.0.1", "--node-rank", "-1"], {}, "node rank -1 is outside 0..1"),
    (["--rdzv-host", "127.0.0.1"], {"HOSTNAME": "gpu-node-a.example"}, "cannot tell this pod's node rank"),
    ([], {"POD_NAME": "demo-1"}, "no --rdzv-host and no MASTER_ADDR"),
    (["--rdzv-host", "127.0.0.1"], {"POD_NAME": "demo-1", "MASTER_PORT": "http"}, "MASTER_PORT='http'"),
    (["--rdzv-host", "127.0.0.1", "--script", "/nonexistent/t.py"], {"POD_NAME": "demo-1"},
     "the script /nonexistent/t.py does not exist"),
    (["--rdzv-host", "127.0.0.1", "--workdir", "/", "--script", "no/t.py"], {"POD_NAME": "demo-1"},
     "the script /no/t.py does not exist"),
    (["--rdzv-host", "127.0.0.1", "--workdir", "/nonexistent"], {"POD_NAME": "demo-1"},
     "--workdir /nonexistent is not a directory"),
    (["--rdzv-host", "127.0.0.1", "--override", "training.steps=3"], {"POD_NAME": "demo-1"},
     "--override is for --workload torchtitan"),
    (["--rdzv-host", "127.0.0.1", "--workload", "torchtitan", "--config", "/nonexistent.toml"],
     {"POD_NAME": "demo-1"}, "the TorchTitan config /nonexistent.toml does not exist"),
    (["--rdzv-host", "127.0.0.1", "--nproc-per-node", "0"], {"POD_NAME": "demo-1"}, "must be at least 1"),
])
def test_launches_that_would_hang_or_fail_are_refused_at_once(capsys, tmp_path, no_dns, more, environ, words):
    code, result = run_main(capsys, start_args(tmp_path / "run", *more), environ)
    assert code == 0
    assert result["state"] == "failed-to-start" and result["started"] is False
    assert words in result["error"]
    assert not os.path.exists(str(tmp_path / "run" / "launch.json"))


def test_an_unreadable_nccl_env_is_refused(capsys, tmp_path, no_dns):
    (tmp_path / "nccl.env").write_text("export NCCL_IB_HCA='=mlx5_0:1'\nif true; then\n")
    code, result = run_main(capsys, start_args(tmp_path / "run", "--rdzv-host", "127.0.0.1"),
                            {"POD_NAME": "demo-0", "MLINFRA_RUN_DIR": str(tmp_path)})
    assert code == 0 and result["state"] == "failed-to-start"
    assert "nccl.env: line 2 is not NAME=VALUE" in result["error"] and "--nccl-env ''" in result["error"]


def test_missing_torch_or_torchtitan_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor.socket, "getaddrinfo", lambda *args, **kwargs: [])
    # This python (the Ansible one) has neither.
    code, result = run_main(capsys, start_args(tmp_path, "--rdzv-host", "127.0.0.1", "--workload", "torchtitan",
                                               "--python", sys.executable), {"POD_NAME": "demo-0"})
    assert code == 0 and result["state"] == "failed-to-start"
    assert "cannot import torch, torchtitan" in result["error"]


@pytest.mark.parametrize("argv, words", [
    (["start", "--run-dir", "d", "--nnodes", "2", "--nproc-per-node", "1"], "--run-id"),
    (["start", "--run-dir", "d", "--run-id", "r", "--nnodes", "two", "--nproc-per-node", "1"], "invalid int"),
    (["restart", "--run-dir", "d"], "invalid choice"),
    (["status", "--run-dir", "d", "--", "x"], "takes no arguments after --"),
    (["stop", "--run-dir", "d", "--grace", "-1"], "--grace must be 0 or more"),
    ([], "required"),
])
def test_bad_usage_exits_2_with_a_json_error(capsys, argv, words):
    code, result = run_main(capsys, argv, {})
    assert code == 2 and result["state"] == "bad-usage" and words in result["error"]


# --------------------------------------------------------------------- status

def environment_of(pid):
    with open("/proc/%d/environ" % pid, "rb") as handle:
        return handle.read()


@pytest.fixture
def marked_process():
    """A process carrying a launch token in its environment, as every process
    of a launch does."""
    processes = []

    def make(token):
        process = subprocess.Popen(["sleep", "60"], env={tl.TOKEN_VARIABLE: token, "PATH": os.defpath},
                                   start_new_session=True)
        processes.append(process)
        # Popen returns before the child's environment is laid out in /proc
        # (see test_the_supervisor_counts_while_its_environment_is_not_laid_out_yet):
        # the token must be readable before the process stands for a launch.
        deadline = time.monotonic() + 10
        while not environment_of(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        return process

    yield make
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def write_launch(run_dir, token="0" * 24, pid=None, log=None, **more):
    os.makedirs(str(run_dir), exist_ok=True)
    launch = {"run_id": "r1", "node_rank": 0, "nnodes": 2, "pid": pid, "pgid": pid, "token": token,
              "started": 1000.0, "started_at": "1970-01-01T00:16:40Z", "log": log}
    launch.update(more)
    (run_dir / "launch.json").write_text(json.dumps(launch))
    return launch


def test_status_of_an_empty_directory_is_not_started(capsys, tmp_path):
    code, result = run_main(capsys, ["status", "--run-dir", str(tmp_path / "nothing")], {})
    assert code == 0 and result["state"] == "not-started" and result["metrics"] is None and result["log_tail"] == []


def test_status_reads_torchtitan_metrics_and_the_exit_code(tmp_path):
    log = tmp_path / "node-0.log"
    shutil.copyfile(TORCHTITAN_LOG, str(log))
    write_launch(tmp_path, log=str(log))
    (tmp_path / "exit_code").write_text("0\n")
    result = run_status.status(str(tmp_path))
    assert result["state"] == "succeeded" and result["exit_code"] == 0 and result["error"] is None
    assert result["first_loss"] == 8.09509 and result["latest_loss"] == 5.21878
    metrics = result["metrics"]
    assert metrics == {"step": 400, "loss": 5.21878, "tps": 380976.0, "tflops": 27.27, "mfu": 0.0276,
                       "memory_gib": 1.52}
    assert result["steps_logged"] == 41 and len(result["log_tail"]) == 20
    with open(TORCHTITAN_LOG) as handle:
        assert result["log_tail"] == [line for line in handle.read().splitlines() if line.strip()][-20:]
    (tmp_path / "exit_code").write_text("-9\n")
    result = run_status.status(str(tmp_path))
    assert result["state"] == "failed" and "killed by signal 9" in result["error"]


def test_status_names_the_node_rank_the_rendezvous_gave_and_the_rank_killed_first(tmp_path):
    """torchrun's own log (tests/fixtures/logs/torchrun): the pod launched as node
    0 was given node rank 1, and its rank 1 was killed by SIGKILL."""
    log = tmp_path / "node-0.log"
    shutil.copyfile(os.path.join(REPO, "tests", "fixtures", "logs", "torchrun", "sigkill-rank1-node0.log"), str(log))
    write_launch(tmp_path, log=str(log))
    (tmp_path / "exit_code").write_text("1\n")
    result = run_status.status(str(tmp_path))
    assert result["state"] == "failed" and result["node_rank"] == 0
    assert result["assigned_node_rank"] == 1 and result["global_ranks"] == [1]
    assert result["first_failure"]["signal"] == "SIGKILL"
    assert result["error"] == "torchrun exited with 1; see log_tail; first failure: rank 1 (local rank 0) was " \
                              "killed by signal 9 (SIGKILL)"


def test_status_without_exit_code_or_processes_is_failed_and_a_stop_makes_it_stopped(tmp_path):
    write_launch(tmp_path, pid=2 ** 22 + 7)
    result = run_status.status(str(tmp_path))
    assert result["state"] == "failed" and "none recorded an exit status" in result["error"]
    (tmp_path / "stop_requested").write_text(json.dumps({"requested": 1010.0, "stopped": 1012.5}))
    result = run_status.status(str(tmp_path))
    assert result["state"] == "stopped" and result["seconds"] == 12.5 and result["error"] is None


def test_a_live_process_with_the_token_is_a_running_launch(tmp_path, marked_process):
    process = marked_process("a" * 24)
    write_launch(tmp_path, token="a" * 24, pid=2 ** 22 + 7)
    result = run_status.status(str(tmp_path))
    assert result["state"] == "running" and result["processes"] == [process.pid]
    # One that has ended but not been reaped (a zombie) is not alive.
    os.kill(process.pid, signal.SIGKILL)
    for attempt in range(100):
        if run_dir._stat(process.pid) is None or run_dir._stat(process.pid)[0] == "Z":
            break
        time.sleep(0.05)
    assert run_status.status(str(tmp_path))["state"] == "failed"


def test_wait_returns_when_the_supervisor_exits_not_a_poll_later(tmp_path):
    """start --wait wakes on the supervisor's exit (Linux's pidfd): with a
    poll of 30 s, a supervisor that writes its exit status and exits after
    half a second is followed in about that long, its log copied whole."""
    import io
    log = tmp_path / "node-0.log"
    log.write_text("")
    token = "d" * 24
    script = "import time; time.sleep(0.5); open(%r, 'a').write('trained\\n'); open(%r, 'w').write('0\\n')" % (
        str(log), str(tmp_path / "exit_code"))
    process = subprocess.Popen([sys.executable, "-c", script], env={tl.TOKEN_VARIABLE: token, "PATH": os.defpath},
                               start_new_session=True)
    try:
        write_launch(tmp_path, token=token, pid=process.pid, log=str(log))
        out = io.StringIO()
        began = time.monotonic()
        result = supervisor.wait({"started": True, "run_dir": str(tmp_path)}, out, poll=30.0)
        assert time.monotonic() - began < 10
        assert result["state"] == "succeeded" and out.getvalue() == "trained\n"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_the_supervisor_counts_while_its_environment_is_not_laid_out_yet(tmp_path):
    """Right after start() spawned the supervisor, a status read on a busy
    machine can find it still inside execve, showing an empty environment:
    it is the launch's (its process group is the launch's), not a launch
    that is gone. A process started with no environment at all looks the
    same in /proc."""
    process = subprocess.Popen(["/bin/sleep", "60"], env={}, start_new_session=True)
    try:
        assert environment_of(process.pid) == b""
        write_launch(tmp_path, token="c" * 24, pid=process.pid)
        result = run_status.status(str(tmp_path))
        assert result["state"] == "running" and result["processes"] == [process.pid], result["error"]
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_run_dir_with_a_running_launch_refuses_another_run(capsys, tmp_path, no_dns, marked_process):
    process = marked_process("b" * 24)
    write_launch(tmp_path, token="b" * 24, pid=process.pid, run_id="other-run")
    code, result = run_main(capsys, start_args(tmp_path, "--rdzv-host", "127.0.0.1"), {"POD_NAME": "demo-0"})
    assert code == 0 and result["state"] == "failed-to-start"
    assert "holds the running launch of run other-run, node 0 (pid %d)" % process.pid in result["error"]
    # The same run and node again: it is running, nothing new starts.
    write_launch(tmp_path, token="b" * 24, pid=process.pid, run_id="r1")
    code, result = run_main(capsys, start_args(tmp_path, "--rdzv-host", "127.0.0.1"), {"POD_NAME": "demo-0"})
    assert code == 0 and result["state"] == "running" and result["already_running"] and not result["started"]


def test_a_finished_run_is_reported_as_it_ended_and_never_started_again(capsys, tmp_path, no_dns):
    """The same run id and node again in a run directory whose launch ended
    (after a lost controller, train.yml is run again as told): its status
    as it ended, nothing started, the launch and log kept as they were."""
    log = tmp_path / "node-0.log"
    shutil.copyfile(TORCHTITAN_LOG, str(log))
    write_launch(tmp_path, log=str(log), run_id="r1", pid=2 ** 22 + 7)
    (tmp_path / "exit_code").write_text("0\n")
    before = (tmp_path / "launch.json").read_text()
    code, result = run_main(capsys, start_args(tmp_path, "--rdzv-host", "127.0.0.1"), {"POD_NAME": "demo-0"})
    assert code == 0 and result["state"] == "succeeded" and result["already_finished"]
    assert not result["started"] and not result["already_running"] and result["metrics"]["step"] == 400
    assert (tmp_path / "launch.json").read_text() == before and not (tmp_path / "launch.json.prev").exists()


def test_stop_with_nothing_running_reports_and_signals_nothing(capsys, tmp_path):
    code, result = run_main(capsys, ["stop", "--run-dir", str(tmp_path)], {})
    assert code == 0 and result["stopped"] is False and result["state"] == "not-started"
    write_launch(tmp_path, pid=2 ** 22 + 7)
    (tmp_path / "exit_code").write_text("0\n")
    code, result = run_main(capsys, ["stop", "--run-dir", str(tmp_path)], {})
    assert result["stopped"] is False and result["state"] == "succeeded" and result["terminated"] == []
    assert not os.path.exists(str(tmp_path / "stop_requested"))


def test_log_tail_reads_the_end_of_a_large_log(tmp_path):
    log = tmp_path / "big.log"
    log.write_text("".join("line %d %s\n" % (number, "x" * 50) for number in range(5000)))
    tail = run_status.log_tail(str(log))
    assert len(tail) == 20 and tail[0].startswith("line 4980 ") and tail[-1].startswith("line 4999 ")
    assert run_status.log_tail(str(tmp_path / "none.log")) == []
