"""tools/perf/fleet_nodes.py: the fake nodes of the scale measurements are a
mix of the recorded snapshots, and a selector chooses the first n of them."""

import importlib.util
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC = importlib.util.spec_from_file_location("fleet_nodes", os.path.join(REPO, "tools", "perf", "fleet_nodes.py"))
fleet_nodes = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fleet_nodes)


def test_every_snapshot_a_node_stands_on_is_recorded():
    for snapshot in (fleet_nodes.HEALTHY,) + fleet_nodes.FAULTY:
        assert os.path.isdir(os.path.join(REPO, "tests", "fixtures", "nodes", snapshot, "proc")), snapshot


def test_one_node_in_sixteen_is_faulty_and_every_fault_is_met_at_256():
    snapshots = [fleet_nodes.snapshot_of(index) for index in range(256)]
    assert snapshots.count(fleet_nodes.HEALTHY) == 240
    assert set(snapshots) == {fleet_nodes.HEALTHY} | set(fleet_nodes.FAULTY)
    # Two nodes (a small run) are both healthy; the faulty ones are named.
    assert fleet_nodes.faulty(2) == []
    assert fleet_nodes.faulty(32) == ["moc-perf-016", "moc-perf-032"]
    assert len(fleet_nodes.faulty(256)) == 16


def test_a_size_no_label_marks_is_refused_with_the_sizes_there_are():
    assert fleet_nodes.size_label(32) == "mlinfra.io/perf-first-32"
    with pytest.raises(ValueError) as raised:
        fleet_nodes.size_label(33)
    assert str(raised.value).startswith("33 nodes: choose one of 2, 6, 32")
