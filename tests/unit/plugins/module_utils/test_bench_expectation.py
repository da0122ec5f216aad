"""bench_expectation: the benchmark's gate from the fabric the pods found -
the smallest pod's rails (read here from built node snapshots, as a pod on
them reads them) times the line-rate fraction - its failure as
busbw_expected in the benchmark's verdict, the notes when the figures rest
on too few nodes, and when it does not apply (the inventory's gates, no
NCCL over the NICs). NCCL's transport comes from real NCCL logs."""

import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_expectation as be
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import collective_bench as cb
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import verdicts as v
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import NodeReader
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.pod_bench import pod_layout
from conftest import REPO
from test_verdicts import transport_check

GIB = 1024 ** 3
EXPECTED = {"fraction": 0.97, "from_size": "1G", "overridden": False}


def layout(snapshot):
    return pod_layout(NodeReader(os.path.join(REPO, "tests", "fixtures", "nodes", snapshot)))


def sweep(busbw_by_size, nranks=16, op="all_reduce"):
    """A benchmark document whose rows reach these bus bandwidths (GB/s)."""
    rows = []
    for size, busbw in busbw_by_size:
        shape = cb.layout(op, size, nranks, "bfloat16")
        seconds = shape["size"] * cb.bus_factor(op, nranks) / (busbw * 1e9)
        rows.append(cb.measured_row(op, shape, nranks, seconds, 0))
    return cb.finish_document({"mode": "sweep", "dtype": "bfloat16", "pairs": None, "ops": {op: cb.op_block(op, rows)}})


def pods(snapshots, transport="pass"):
    check = transport_check("ib-gdrdma-2node-8rank-nccl-2.11.4.log") if transport == "pass" else {
        "name": "nccl_transport", "status": "skip", "message": "no NCCL lines in the log"}
    return [dict(layout(snapshot), pod="h-kim-%d" % index, transport=check) for index, snapshot in enumerate(snapshots)]


def test_the_rails_of_the_built_nodes():
    assert layout("healthy-roce-h100")["rail_bandwidth"] == {"rails": ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"],
                                                             "gbytes_per_s": 200.0}
    # GPU0 and GPU1 have no NIC of their own there: two rails, half the bandwidth.
    assert layout("numa-crossed")["rail_bandwidth"] == {"rails": ["mlx5_10", "mlx5_11"], "gbytes_per_s": 100.0}


def test_a_run_below_the_smallest_node_s_rails_fails_naming_size_figure_and_rails():
    document = sweep([(GIB // 2, 120.0), (GIB, 150.2), (2 * GIB, 190.0)])
    found = be.expectation(document, pods(["healthy-roce-h100"] * 3), 0.97, "1G")
    assert found["status"] == "fail" and found["bound_gbps"] == 200.0 and found["gate_gbps"] == 194.0
    assert found["below"] == ["all_reduce 1G: busbw 150.2 GB/s", "all_reduce 2G: busbw 190.0 GB/s"]
    assert found["message"] == ("all_reduce 1G: busbw 150.2 GB/s; all_reduce 2G: busbw 190.0 GB/s below 97% of the "
                                "200.0 GB/s the pods' rails carry (mlx5_6, mlx5_7, mlx5_10, mlx5_11)")
    # Three nodes: no note; the 512M row is below the sizes the gate covers.
    assert found["notes"] == []


def test_a_rail_whose_port_is_down_carries_nothing(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    (root / "sys/class/infiniband/mlx5_6/ports/1/state").write_text("1: DOWN\n")
    assert pod_layout(NodeReader(str(root)))["rail_bandwidth"] == {
        "rails": ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"], "gbytes_per_s": 150.0}


def test_the_node_with_fewer_rails_sets_the_bound_and_a_fast_enough_run_passes():
    document = sweep([(GIB, 98.0), (4 * GIB, 99.0)])
    found = be.expectation(document, pods(["healthy-roce-h100", "numa-crossed", "healthy-roce-h100"]), 0.97, "1G")
    assert found["status"] == "pass" and found["bound_gbps"] == 100.0 and found["rails"] == ["mlx5_10", "mlx5_11"]
    assert found["message"] == "from 1G on, every size reached 97% of the 100.0 GB/s the pods' rails carry"


def test_two_nodes_and_a_figure_above_the_rails_are_said_to_rest_on_too_few_nodes():
    document = sweep([(GIB, 330.0)])
    found = be.expectation(document, pods(["healthy-roce-h100"] * 2), 0.97, "1G")
    assert found["status"] == "pass"
    assert found["notes"][0].startswith("above what the rails carry (200.0 GB/s): all_reduce 1G 330.0 GB/s")
    assert found["notes"][1].startswith("2 node(s) are too few to characterise the network")


@pytest.mark.parametrize("transport, overridden, sizes, why", [
    ("skip", False, [(GIB, 1.0)], "NCCL was not seen sending over the RDMA NICs in h-kim-0 (skip), h-kim-1 (skip)"),
    ("pass", True, [(GIB, 1.0)], "the inventory's gates apply instead"),
    ("pass", False, [(GIB // 2, 1.0)], "no size of 1G or more was measured"),
])
def test_when_the_expectation_does_not_gate(transport, overridden, sizes, why):
    found = be.expectation(sweep(sizes), pods(["healthy-roce-h100"] * 2, transport), 0.97, "1G", overridden)
    assert found["status"] == "skip" and why in found["message"] and found["bound_gbps"] == 200.0


def test_a_pod_whose_rails_are_unknown_gives_no_expectation():
    unknown = pods(["healthy-roce-h100", "recorded/h100-vm-1gpu"])
    found = be.expectation(sweep([(GIB, 1.0)]), unknown, 0.97, "1G")
    assert (found["status"], found["bound_gbps"]) == ("skip", None)
    assert found["message"] == "pod h-kim-1: its rails or their rate are not known"


def test_the_benchmark_verdict_fails_under_busbw_expected():
    document = sweep([(GIB, 150.2)], nranks=2)
    execs = [{"pod": pod["pod"], "node": "n%d" % index, "uid": "u%d" % index,
              "json": dict(pod, node_rank=index, exit_code=0, error=None, seconds=3.0, log="/tmp/l", log_tail=[],
                           nccl={"net": "IB"}, document=document if index == 0 else None)}
             for index, pod in enumerate(pods(["healthy-roce-h100"] * 2))]
    result = v.bench_verdict(execs, expected=EXPECTED)
    assert result["status"] == "fail" and result["expected"]["status"] == "fail"
    [check] = result["checks"]
    assert check["name"] == "busbw_expected" and check["remediation"] == be.EXPECTED_FIX
    assert check["message"].startswith("all_reduce 1G: busbw 150.2 GB/s below 97% of the 200.0 GB/s")
    assert v.bench_verdict(execs)["expected"] is None
    assert v.bench_verdict(execs, expected=dict(EXPECTED, overridden=True))["status"] == "pass"
