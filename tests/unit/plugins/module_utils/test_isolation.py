"""The fault-isolation planner (plugins/module_utils/fabric/isolation.py) on
the fabric model of tools/isolation/fabric_model.py: nodes slow on every
port, ports slow on their own, pairs slow only together, with noise. The
model stands in for the fabric, which cannot run here; the planner's own
rounds, judgements and conclusions are what is tested."""

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import isolation

SPEC = importlib.util.spec_from_file_location(
    "mlinfra_fabric_model", Path(__file__).resolve().parents[4] / "tools" / "isolation" / "fabric_model.py")
fabric_model = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = fabric_model
SPEC.loader.exec_module(fabric_model)


@pytest.mark.parametrize("count", [4, 12, 16, 50, 249, 256])
def test_the_pair_rounds_put_every_two_nodes_together_exactly_once(count):
    classes = isolation.affine_classes(count)
    order = isolation.plane_order(count)
    assert len(classes) == order + 1 and order * order >= count
    met = {}
    for lines in classes:
        # A round's groups are disjoint.
        members = [item for line in lines for item in line]
        assert len(members) == len(set(members))
        for line in lines:
            for pair in itertools.combinations(line, 2):
                met[pair] = met.get(pair, 0) + 1
    assert met == dict((pair, 1) for pair in itertools.combinations(range(count), 2))


def test_256_nodes_with_five_bad_nodes_two_bad_ports_and_a_bad_pair_are_solved_in_under_30_rounds():
    """The goal: every fault found and nothing else, in at most 30 rounds
    (the round robin takes 255), for at least 95% of random fabrics."""
    seeds = range(40)
    solved, rounds = 0, []
    for seed in seeds:
        fabric = fabric_model.random_fabric(256, 8, seed)
        conclusion = isolation.isolate(fabric.nodes, fabric.ports, fabric.measure)
        solved += fabric_model.solved(fabric, conclusion)
        rounds.append(conclusion["rounds"])
        for entry in conclusion["log"]:
            members = [node for test in entry["tests"] for node in test["nodes"]]
            assert len(members) == len(set(members)), (seed, entry["purpose"])
    assert solved >= 0.95 * len(seeds), solved
    assert max(rounds) <= 30, rounds


def test_each_fault_is_named_as_what_it_is_and_every_round_is_kept():
    fabric = fabric_model.Fabric(["n%02d" % i for i in range(16)], ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],
                                 bad_nodes={"n03": 0.5}, bad_ports={("n07", "mlx5_2"): 0.4},
                                 bad_pairs={("n10", "n14"): 0.5}, seed=7)
    conclusion = isolation.isolate(fabric.nodes, fabric.ports, fabric.measure)
    assert conclusion["bad_nodes"] == ["n03"]
    assert conclusion["bad_ports"] == [("n07", "mlx5_2")]
    assert conclusion["bad_pairs"] == [("n10", "n14")]
    assert conclusion["not_reproduced"] == [] and conclusion["unresolved"] == []
    purposes = [entry["purpose"] for entry in conclusion["log"]]
    # Screening, the pairs (order 4: five rounds), narrowing, one confirmation.
    assert purposes[:3] == ["screen"] * 3 and purposes[3:8] == ["pairs"] * 5 and purposes[-1] == "confirm"
    assert conclusion["rounds"] == len(purposes) <= 3 + 5 + 8 + 1
    # Each test is kept with its figure and verdict, port subsets per node.
    port_tests = [test for entry in conclusion["log"] for test in entry["tests"] if test["purpose"] == "ports"]
    assert port_tests and all(set(test["ports"]) == {test["nodes"][0]} for test in port_tests)
    for entry in conclusion["log"]:
        members = [node for test in entry["tests"] for node in test["nodes"]]
        assert len(members) == len(set(members)), entry  # one test per node per round
        assert all(isinstance(test["figure"], float) and isinstance(test["slow"], bool) for test in entry["tests"])


def test_a_healthy_fabric_reports_nothing_after_the_screen_and_the_pairs():
    fabric = fabric_model.Fabric(["n%d" % i for i in range(64)], ["p0", "p1"], seed=3)
    conclusion = isolation.isolate(fabric.nodes, fabric.ports, fabric.measure)
    assert (conclusion["bad_nodes"], conclusion["bad_ports"], conclusion["bad_pairs"]) == ([], [], [])
    assert conclusion["rounds"] == 3 + 9  # order 8: nine classes of lines


def test_a_test_without_a_figure_is_never_a_pass():
    tests = [{"nodes": ["a", "b"], "ports": None, "purpose": "screen"} for _index in range(4)]
    assert isolation.judge_round(tests, [100.0, 99.0, None, 60.0], ["p0"]) == [False, False, True, True]
    # A control of the kind is the reference where there is one.
    control = {"nodes": ["c", "d"], "ports": None, "purpose": "control"}
    assert isolation.judge_round(tests[:1] + [control], [80.0, 100.0], ["p0"]) == [True, False]


def test_the_plan_replays_from_its_history_round_by_round():
    """What a playbook does between rounds: keep the figures, ask for the
    next round; the conclusion is the same as one run of the plan."""
    nodes, ports = ["n%02d" % i for i in range(12)], ["p0", "p1", "p2", "p3"]
    whole = fabric_model.Fabric(nodes, ports, bad_nodes={"n05": 0.5}, seed=11)
    expected = isolation.isolate(nodes, ports, whole.measure)
    stepped = fabric_model.Fabric(nodes, ports, bad_nodes={"n05": 0.5}, seed=11)
    history = []
    while True:
        step = isolation.plan_round(nodes, ports, history)
        if "conclusion" in step:
            break
        history.append(stepped.measure(step["round"]))
    assert step["conclusion"] == expected and expected["bad_nodes"] == ["n05"]
    with pytest.raises(isolation.IsolationError, match="a round of 6 tests came back with 2 figures"):
        isolation.plan_round(nodes, ports, [[1.0, 2.0]])
    with pytest.raises(isolation.IsolationError, match="at least 4 distinct nodes"):
        isolation.plan_round(["a", "b", "a"], ports, [])
