"""isolation_round: a planned round becomes one torchrun job per test on
the pods of its nodes, read by pod-bench's own parser, and the pods'
results become the figures the planner judges."""

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import isolation, isolation_round, pod_bench

NODES = ["gpu-%02d" % index for index in range(8)]
PORTS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"]
PODS = dict((node, {"name": "h-kim-%d" % index, "ip": "10.128.0.%d" % (10 + index)})
            for index, node in enumerate(NODES))


def parsed(arguments):
    return pod_bench.build_parser().parse_args(arguments)


def test_each_test_of_the_first_round_is_a_job_of_its_own_on_the_pods_of_its_nodes():
    tests = isolation.plan_round(NODES, PORTS, [])["round"]
    arguments = isolation_round.round_arguments(tests, PODS, 29600)
    assert sorted(arguments) == sorted(pod["name"] for pod in PODS.values())
    for index, test in enumerate(tests):
        options = [parsed(arguments[PODS[node]["name"]]) for node in test["nodes"]]
        assert [option.node_rank for option in options] == list(range(len(test["nodes"])))
        assert set((option.nnodes, option.master_addr, option.master_port) for option in options) == {
            (len(test["nodes"]), PODS[test["nodes"][0]]["ip"], 29600 + index)}
        assert all(option.ib_hca is None for option in options)


def test_a_node_on_some_ports_runs_on_those_devices_exactly():
    tests = [{"nodes": ["gpu-00", "gpu-01"], "ports": {"gpu-00": ["mlx5_0", "mlx5_3"], "gpu-01": ["mlx5_0", "mlx5_3"]},
              "purpose": "halve"},
             {"nodes": ["gpu-02", "gpu-03"], "ports": None, "purpose": "control"}]
    arguments = isolation_round.round_arguments(tests, PODS, 29600)
    assert parsed(arguments["h-kim-0"]).ib_hca == "=mlx5_0,mlx5_3"
    assert pod_bench.IB_HCA.match(parsed(arguments["h-kim-1"]).ib_hca)
    assert parsed(arguments["h-kim-2"]).ib_hca is None and parsed(arguments["h-kim-3"]).master_port == 29601


@pytest.mark.parametrize("tests, pods, port, words", [
    ([{"nodes": ["gpu-00", "gpu-99"], "ports": None}], PODS, 29600, "without a running pod: gpu-99"),
    ([{"nodes": ["gpu-00", "gpu-01"], "ports": None}, {"nodes": ["gpu-01", "gpu-02"], "ports": None}], PODS, 29600,
     "node(s) gpu-01 are in two tests of one round"),
    ([{"nodes": ["gpu-00", "gpu-01"], "ports": None}, {"nodes": ["gpu-02", "gpu-03"], "ports": None}], PODS, 65535,
     "needs ports 65535 to 65536"),
])
def test_a_round_that_cannot_run_is_refused_naming_why(tests, pods, port, words):
    with pytest.raises(isolation.IsolationError) as raised:
        isolation_round.round_arguments(tests, pods, port)
    assert words in str(raised.value)


def result(busbw_by_size=None, exit_code=0, timed_out=False):
    document = None if busbw_by_size is None else {"ops": {"alltoall": {"rows": [
        {"requested_size": size, "busbw_gbps": busbw} for size, busbw in sorted(busbw_by_size.items())]}}}
    return {"exit_code": exit_code, "timed_out": timed_out, "document": document}


def test_the_figure_is_node_0s_largest_size_and_a_group_that_failed_has_none():
    tests = [{"nodes": [NODES[index], NODES[index + 1]], "ports": None, "purpose": "screen"} for index in (0, 2, 4, 6)]
    results = {
        "h-kim-0": result({1 << 20: 3.5, 1 << 26: 41.0, 1 << 24: 30.0}), "h-kim-1": result(),
        # Its partner timed out: node 0's document is not a figure of the pair.
        "h-kim-2": result({1 << 26: 40.0}), "h-kim-3": result(timed_out=True, exit_code=None),
        # Measured nothing of the op (every row not measured).
        "h-kim-4": result({1 << 26: None}), "h-kim-5": result(),
        # h-kim-7 gave no result at all.
        "h-kim-6": result({1 << 26: 39.0}),
    }
    figures = isolation_round.round_figures(tests, PODS, results, "alltoall")
    assert figures == [41.0, None, None, None]
    # What the planner makes of them: a figure that could not be taken is slow.
    assert isolation.judge_round(tests + tests[:1], figures + [40.0], PORTS) == [False, True, True, True, False]
