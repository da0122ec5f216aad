"""files/bin/mlinfra nccl-bench run for real: torchrun, gloo, on the CPU.

Uses the interpreter of .work/venv-workload (torch, as in the training image;
scripts/setup.sh creates it). Sizes and iterations are small, so that each
torchrun takes seconds on two shared cores.
"""

import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import collective_bench as cb
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_table
from conftest import WORKLOAD_PYTHON

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = [os.path.join(REPO, "files", "bin", "mlinfra"), "nccl-bench"]
ALL_OPS = ",".join(cb.OPS)
TIMEOUT = 300
# The workload python; the other torchrun tests import it from here.
PYTHON = WORKLOAD_PYTHON


def _environment():
    env = dict(os.environ)
    # One thread per process on the shared cores; no GPU, so that auto would
    # also pick gloo; node names from the fallback, not the caller's shell.
    env.update({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
    env.pop("MLINFRA_NODE_NAME", None)
    env.pop("MLINFRA_PLUGINS_DIR", None)
    return env


def torchrun(python, nproc, arguments, cwd):
    """Runs the tool under torchrun --standalone (a free port of its own)."""
    command = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *TOOL]
    return subprocess.run(command + list(arguments), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT, cwd=str(cwd), env=_environment(), check=False)


def _explain(result):
    return "exit %d\n--- stdout\n%s\n--- stderr\n%s" % (result.returncode, result.stdout[-6000:], result.stderr[-6000:])


@pytest.fixture(scope="module")
def sweep(workload_python, tmp_path_factory):
    """All four ops on 2 ranks, 1K to 64K, with a gate every size passes."""
    directory = tmp_path_factory.mktemp("sweep")
    path = directory / "bench.json"
    result = torchrun(workload_python, 2, ["--backend", "gloo", "--ops", ALL_OPS, "-b", "1K", "-e", "64K", "-f", "4",
                                           "-w", "1", "-n", "3", "--min-busbw", "1K=0.000001", "--json", str(path)],
                      directory)
    return result, path


def test_sweep_passes_with_exact_results(sweep):
    result, path = sweep
    assert result.returncode == 0, _explain(result)
    document = cb.read_document(str(path))
    assert document["verdict"] == "pass" and document["passed"] and document["reasons"] == []
    assert (document["backend"], document["device"], document["dtype"]) == ("gloo", "cpu", "float32")
    assert document["world_size"] == 2 and document["mode"] == "sweep"
    # torchrun --standalone: one node, named after this host.
    assert document["nodes"] == [{"name": socket.gethostname(), "ranks": [0, 1], "hostnames": [socket.gethostname()]}]
    assert list(document["ops"]) == list(cb.OPS)
    for op, block in document["ops"].items():
        rows = block["rows"]
        assert [row["requested_size"] for row in rows] == [1024, 4096, 16384, 65536], op
        for row in rows:
            assert row["status"] == "measured" and row["wrong"] == 0, (op, row)
            # gloo has no CUDA graphs: every size is an eager loop.
            assert row["launch"] == "eager"
            assert row["time_us"] > 0 and row["algbw_gbps"] > 0
            assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * cb.bus_factor(op, 2))
            assert row["gate"]["passed"] and row["gate"]["status"] == "pass"
            shape = cb.layout(op, row["requested_size"], 2, "float32")
            assert (row["size"], row["count"]) == (shape["size"], shape["count"])
    assert document["wrong"] == 0
    assert document["collective"] == "all_reduce" and len(document["results"]) == 4


def test_sweep_table_parses_back_to_the_document(sweep):
    result, path = sweep
    assert result.returncode == 0, _explain(result)
    document = cb.read_document(str(path))
    tests = bench_table.parse_table(result.stdout)
    assert [test["op"] for test in tests] == list(cb.OPS), result.stdout
    for test in tests:
        block = document["ops"][test["op"]]
        assert test["out_of_bounds"] == 0
        assert len(test["rows"]) == len(block["rows"])
        for parsed, row in zip(test["rows"], block["rows"]):
            in_place = block["placement"] == "in-place"
            measured = parsed["in_place" if in_place else "out_of_place"]
            assert parsed["in_place" if not in_place else "out_of_place"] is None
            assert (parsed["size"], parsed["count"], parsed["type"]) == (row["size"], row["count"], "float")
            assert measured["wrong"] == 0
            assert measured["time_us"] == pytest.approx(row["time_us"], rel=0.01, abs=0.01)
            assert measured["busbw_gbps"] == pytest.approx(row["busbw_gbps"], rel=0.01, abs=0.01)
    assert "# verdict: pass" in result.stdout


def test_an_unreachable_gate_fails(workload_python, tmp_path):
    path = tmp_path / "bench.json"
    result = torchrun(workload_python, 2, ["--backend", "gloo", "-b", "1K", "-e", "4K", "-w", "1", "-n", "2",
                                           "--min-busbw", "1K=1000000", "--json", str(path)], tmp_path)
    # The tool exits 1; torchrun exits 1 whenever a worker does not exit 0.
    assert result.returncode == 1, _explain(result)
    document = cb.read_document(str(path))
    assert document["verdict"] == "fail" and not document["passed"]
    rows = document["ops"]["all_reduce"]["rows"]
    assert [row["gate"]["status"] for row in rows] == ["fail", "fail", "fail"]
    assert all(row["gate"]["min_busbw_gbps"] == 1000000 and row["gate"]["passed"] is False for row in rows)
    assert all(row["wrong"] == 0 for row in rows)
    assert "below the gate of 1e+06 GB/s" in "\n".join(document["reasons"])
    assert "# verdict: fail" in result.stdout


def test_bad_usage_exits_2_with_a_clear_message(workload_python, tmp_path):
    # Checked before torch is imported or torchrun's variables are read.
    direct = subprocess.run([workload_python, *TOOL, "--min-busbw", "x=y"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT, cwd=str(tmp_path),
                            env=_environment(), check=False)
    assert direct.returncode == 2, _explain(direct)
    assert "mlinfra nccl-bench: error: --min-busbw 'x=y': SIZE 'x' is not a size" in direct.stderr
    assert "1G=194" in direct.stderr
    # The same with any python 3: the check needs no torch.
    again = subprocess.run([sys.executable, *TOOL, "--min-busbw", "1G=-3"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT, env=_environment(),
                           check=False)
    assert again.returncode == 2 and "above 0 GB/s" in again.stderr, _explain(again)
    # Under torchrun the workers exit 2 with the message (rank 0's only) and
    # torchrun reports the failure.
    launched = torchrun(workload_python, 2, ["--backend", "gloo", "--min-busbw", "x=y"], tmp_path)
    assert launched.returncode != 0, _explain(launched)
    output = launched.stdout + launched.stderr
    assert output.count("mlinfra nccl-bench: error: --min-busbw 'x=y': SIZE 'x' is not a size") == 1, _explain(launched)


def test_pairwise_measures_every_pair_of_four_nodes(workload_python, tmp_path):
    path = tmp_path / "pairs.json"
    # A pair is slow below 5% of the median here: timings on two shared cores
    # scatter far more than on a network, and this test checks the mechanics.
    result = torchrun(workload_python, 4, ["--backend", "gloo", "--pairwise", "--ranks-per-node", "1",
                                           "--pairwise-size", "16K", "-w", "1", "-n", "3", "--slow-fraction", "0.05",
                                           "--json", str(path)], tmp_path)
    assert result.returncode == 0, _explain(result)
    document = cb.read_document(str(path))
    assert document["mode"] == "pairwise" and document["verdict"] == "pass"
    names = ["node0", "node1", "node2", "node3"]
    assert [node["name"] for node in document["nodes"]] == names
    assert [node["ranks"] for node in document["nodes"]] == [[0], [1], [2], [3]]
    pairs = document["pairs"]
    assert len(pairs) == 6
    assert sorted(tuple(pair["nodes"]) for pair in pairs) == [
        (first, second) for index, first in enumerate(names) for second in names[index + 1:]]
    for pair in pairs:
        assert pair["status"] == "measured" and pair["wrong"] == 0 and pair["busbw_gbps"] > 0, pair
        assert len(pair["ranks"]) == 2 and pair["size"] == 16384 and not pair["slow"]
    rounds = document["pairwise"]["rounds"]
    assert len(rounds) == 3 and all(len(pairs_of_round) == 2 for pairs_of_round in rounds)
    assert document["slow_pairs"] == [] and document["suspect_nodes"] == []
    assert document["slowest_pair"]["busbw_gbps"] == min(pair["busbw_gbps"] for pair in pairs)
    assert "# suspect nodes: none" in result.stdout and result.stdout.count("node0  ") >= 3
