"""files/bin/mlinfra pod-bench: one pod's part of the benchmark that
verify-rdma runs in every training pod at once. Here two processes of this
machine play pods h-kim-0 and h-kim-1: each starts its own torchrun node
(gloo on the CPU, torch from .work/venv-workload) and prints one JSON object.
"""

import json
import os
import socket
import subprocess

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import pod_bench
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import NodeReader
from test_collective_bench_gloo import PYTHON, REPO, TIMEOUT

LAUNCHER = [os.path.join(REPO, "files", "bin", "mlinfra"), "pod-bench"]
BENCH_ARGS = ["--", "--ops", "all_reduce,all_gather", "-b", "4K", "-e", "64K", "-f", "4", "-w", "1", "-n", "3"]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_pod(pod, arguments, workdir):
    env = dict(os.environ, POD_NAME=pod, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    env.pop("MLINFRA_PLUGINS_DIR", None)
    return subprocess.Popen([PYTHON, *LAUNCHER, "--workdir", str(workdir)] + arguments, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def finish(process):
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err
    return json.loads(out)


def test_the_ordinal_of_the_pod_name_is_the_node_rank():
    assert pod_bench.ordinal_of("h-kim-0") == 0
    assert pod_bench.ordinal_of("llama-train-12") == 12
    with pytest.raises(ValueError, match="pass --node-rank"):
        pod_bench.ordinal_of("gpu-worker-a")


@pytest.mark.parametrize("arguments, environ, words", [
    (["--nnodes", "2"], {"POD_NAME": "h-kim-2", "MASTER_ADDR": "x"}, "node rank 2 is outside 0..1"),
    (["--nnodes", "2"], {"POD_NAME": "h-kim-0"}, "no --master-addr and no MASTER_ADDR"),
    (["--nnodes", "2"], {"HOSTNAME": "node-a.example", "MASTER_ADDR": "x"}, "cannot tell this pod's node rank"),
    (["--nnodes", "2", "--timeout", "0"], {"POD_NAME": "h-kim-0", "MASTER_ADDR": "x"}, "--timeout must be at least 1"),
    (["--nnodes", "2", "--ib-hca", "mlx5_0;reboot"], {"POD_NAME": "h-kim-0", "MASTER_ADDR": "x"},
     "--ib-hca 'mlx5_0;reboot' is not an NCCL_IB_HCA list"),
    (["--nnodes", "2", "--ib-hca", "mlx5_0:x"], {"POD_NAME": "h-kim-0", "MASTER_ADDR": "x"},
     "is not an NCCL_IB_HCA list"),
])
def test_bad_arguments_are_refused_before_anything_runs(capsys, arguments, environ, words):
    with pytest.raises(SystemExit) as exited:
        pod_bench.main(arguments, environ=environ, bench="/nonexistent")
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_without_a_workdir_the_run_leaves_nothing_in_tmp(tmp_path):
    """Every benchmark left its mlinfra-bench-* directory in each pod's /tmp;
    without --workdir the run's own directory goes, its log's tail kept in
    the result. (A python that exits at once stands for a failed start.)"""
    env = dict(os.environ, POD_NAME="h-kim-0", TMPDIR=str(tmp_path))
    done = subprocess.run([PYTHON, *LAUNCHER, "--nnodes", "1", "--master-addr", "127.0.0.1", "--timeout", "30",
                           "--python", "/bin/false"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    result = json.loads(done.stdout)
    assert result["exit_code"] == 1 and result["log"] is None and result["ib_hca"] is None
    assert result["error"] == "the benchmark wrote no result (exit status 1); see the log's tail"
    assert os.listdir(tmp_path) == []


def test_a_run_on_some_ports_overrides_the_detected_nccl_ib_hca(tmp_path):
    """--ib-hca reaches torchrun's environment over the NCCL_IB_HCA the pod's
    detected environment gives (here: what a stand-in for python that
    prints its environment writes into the run's log)."""
    printer = tmp_path / "python"
    printer.write_text("#!/bin/sh\nexec env\n")
    printer.chmod(0o755)
    env = dict(os.environ, POD_NAME="h-kim-0", NCCL_IB_HCA="=mlx5_0,mlx5_3,mlx5_4,mlx5_5")
    done = subprocess.run([PYTHON, *LAUNCHER, "--nnodes", "1", "--master-addr", "127.0.0.1", "--timeout", "30",
                           "--workdir", str(tmp_path / "run"), "--ib-hca", "=mlx5_3:1", "--python", str(printer)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    result = json.loads(done.stdout)
    assert result["ib_hca"] == "=mlx5_3:1"
    assert "NCCL_IB_HCA==mlx5_3:1\n" in (tmp_path / "run" / "bench-node0.log").read_text()


def test_two_pods_benchmark_together_and_pod_0_reports_the_document(workload_python, tmp_path):
    port = str(free_port())
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port, "--mode", "rdma",
              "--timeout", "200"] + BENCH_ARGS
    pods = [start_pod("h-kim-%d" % index, common, tmp_path / str(index)) for index in (0, 1)]
    leader, other = [finish(process) for process in pods]
    for index, result in enumerate((leader, other)):
        assert result["node_rank"] == index and result["exit_code"] == 0 and result["error"] is None, result
        assert result["command"][1:4] == ["-m", "torch.distributed.run", "--nnodes"]
        # gloo writes no NCCL lines: the transport is not judged, never passed.
        assert result["transport"]["status"] == "skip" and "no NCCL lines" in result["transport"]["message"]
        assert os.path.isfile(result["log"])
    assert other["document"] is None
    document = leader["document"]
    assert document["world_size"] == 2 and document["backend"] == "gloo" and document["verdict"] == "pass"
    for op in ("all_reduce", "all_gather"):
        rows = document["ops"][op]["rows"]
        assert [row["size"] for row in rows] == [4096, 16384, 65536]
        # The sums (all_reduce) and the gathered pieces were checked element by element.
        assert all(row["status"] == "measured" and row["wrong"] == 0 and row["busbw_gbps"] > 0 for row in rows)


def test_a_pod_whose_partner_never_comes_reports_a_timeout_not_a_result(workload_python, tmp_path):
    arguments = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                 "--timeout", "8"] + BENCH_ARGS
    result = finish(start_pod("h-kim-0", arguments, tmp_path))
    assert result["timed_out"] is True and result["error"] == "timed out after 8s"
    assert result["document"] is None and result["exit_code"] != 0
    assert result["transport"]["status"] == "skip"


@pytest.mark.parametrize("snapshot, cpus_off", [("healthy-roce-h100", False), ("numa-crossed", True)])
def test_the_pod_s_placement_and_rails_go_with_its_result(snapshot, cpus_off):
    """What a soak attributes degraded runs to, read as a pod on these
    built nodes would (their GPUs and NICs, CPU lists and the pod's cpuset)."""
    root = os.path.join(REPO, "tests", "fixtures", "nodes", snapshot)
    layout = pod_bench.pod_layout(NodeReader(root))
    placement = layout["placement"]
    assert placement["known"] and bool(placement["spans"] or placement["misses"]) is cpus_off
    assert layout["rails"] and all(set(rail) == {"gpu", "nic", "distance", "gpu_numa", "nic_numa"}
                                   for rail in layout["rails"])


# --- on the controller: the plan verify-rdma.yml follows --------------------------------

SETTINGS = {"app": "h-kim", "namespace": "ml", "nproc_per_pod": 8, "port": 29511, "network_mode": "rdma",
            "timeout": 600, "ops": ["all_reduce", "all_gather"], "min_size": "1M", "max_size": "8G"}


def statefulset(replicas):
    return [{"metadata": {"name": "h-kim"}, "spec": {"replicas": replicas}}]


def pods(*phases):
    return [{"metadata": {"name": "h-kim-%d" % ordinal}, "status": {"phase": phase} if phase else {}}
            for ordinal, phase in enumerate(phases)]


def test_the_benchmark_runs_in_every_pod_by_ordinal_with_its_command():
    found = pod_bench.plan(statefulset(2), pods("Running", "Running")[::-1], SETTINGS)
    assert found["pods"] == ["h-kim-0", "h-kim-1"] and found["blocker"] is None
    assert found["command"] == [
        "bash", "-c", 'exec python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra" pod-bench "$@"', "mlinfra pod-bench",
        "--nnodes", "2", "--nproc-per-node", "8", "--master-port", "29511", "--mode", "rdma", "--timeout", "600",
        "--", "--ops", "all_reduce,all_gather", "-b", "1M", "-e", "8G"]
    # What the command leaves to the pod is what its own parser reads.
    options = pod_bench.build_parser().parse_args(found["command"][4:])
    assert (options.nnodes, options.nproc_per_node, options.master_port, options.mode, options.timeout) == (
        2, 8, 29511, "rdma", 600)
    assert options.bench_args == ["--ops", "all_reduce,all_gather", "-b", "1M", "-e", "8G"]
    everything = dict(SETTINGS, master_addr="10.0.0.1", require_gpudirect=False, thresholds=["1G=194"],
                      pairwise=True, extra_args=["--iters", 5], ib_hca="^mlx5_2")
    command = pod_bench.plan(statefulset(2), pods("Running", "Running"), everything)["command"]
    assert command[command.index("--timeout") + 2:] == [
        "--master-addr", "10.0.0.1", "--ib-hca", "^mlx5_2", "--no-require-gpudirect", "--", "--ops",
        "all_reduce,all_gather", "-b", "1M",
        "-e", "8G", "--min-busbw=1G=194", "--pairwise", "--pairwise-size", "8G", "--iters", "5"]
    options = pod_bench.build_parser().parse_args(command[4:])
    assert options.master_addr == "10.0.0.1" and options.require_gpudirect is False and options.ib_hca == "^mlx5_2"


@pytest.mark.parametrize("statefulsets, found_pods, settings, blocker", [
    ([], [], {}, "StatefulSet ml/h-kim is not deployed"),
    (statefulset(0), [], {}, "h-kim is scaled to 0"),
    (statefulset(1), pods("Running"), {}, "h-kim runs on one pod only: the benchmark needs two pods to cross the "
                                          "network (-e replicas=2)"),
    (statefulset(1), pods("Running"), {"single_pod": True}, None),
    (statefulset(3), pods("Running", "Pending", None), {},
     "not all pods run (h-kim-1, h-kim-2 not Running): the benchmark needs every pod of the job"),
    (statefulset(2), pods("Running", "Running"), {"check_mode": True}, "check mode runs no benchmark"),
])
def test_the_benchmark_runs_in_every_pod_or_in_none_and_says_why(statefulsets, found_pods, settings, blocker):
    assert pod_bench.plan(statefulsets, found_pods, dict(SETTINGS, **settings))["blocker"] == blocker
