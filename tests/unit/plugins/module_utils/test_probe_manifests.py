"""The verify role's probe objects (plugins/module_utils/probe_manifests.py):
the same objects, as data, that the role's template probe.yaml.j2 gave for
the local inventory before they were built in Python (recorded in
tests/fixtures/manifests/), and no field added by a hostile value."""

import json
import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.probe_manifests import probe_manifests

from manifest_checks import HOSTILE, REPO, inventory_settings, key_paths, paths_holding, round_trip

RECORDED = os.path.join(REPO, "tests", "fixtures", "manifests")


@pytest.mark.parametrize("platform", ["kubernetes", "openshift"])
def test_the_local_inventorys_probes_are_what_the_template_gave(platform):
    with open(os.path.join(RECORDED, "probe-local-%s.json" % platform)) as handle:
        recorded = json.load(handle)
    built = probe_manifests(inventory_settings("local", cluster_platform=platform))
    assert built == recorded
    # One pod per node, named by its position, on that node.
    pods = [obj for obj in built if obj["kind"] == "Pod"]
    nodes = inventory_settings("local")["cluster_gpu_nodes"]
    assert [(pod["metadata"]["name"], pod["spec"]["nodeName"]) for pod in pods] == [
        ("h-kim-probe-%d" % index, node) for index, node in enumerate(nodes)]


def test_the_probe_outlives_its_start_and_its_stay_by_ten_minutes():
    pod = probe_manifests(inventory_settings("local", verify_probe_timeout="30"))[-1]
    assert pod["spec"]["activeDeadlineSeconds"] == 630
    assert pod["spec"]["containers"][0]["command"][-1] == "trap 'exit 0' TERM; sleep 630 & wait"
    # Staying for a benchmark (its timeout and exec margin), it lives that much longer.
    staying = probe_manifests(inventory_settings("local", verify_probe_timeout="30", stay_seconds="210"))[-1]
    assert staying["spec"]["activeDeadlineSeconds"] == 840
    assert staying["spec"]["containers"][0]["command"][-1] == "trap 'exit 0' TERM; sleep 840 & wait"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_are_one_value_each_and_add_no_field(hostile):
    def objects(value):
        return probe_manifests(inventory_settings("local", cluster_platform="openshift", cluster_name=value,
                                                  cluster_namespace=value, verify_probe_image=value,
                                                  cluster_gpu_nodes=["node-a", value]))

    before, after = objects("plain"), objects(hostile)
    assert [key_paths(obj) for obj in after] == [key_paths(obj) for obj in before]
    assert paths_holding(after, hostile) == paths_holding(before, "plain")
    assert round_trip(after) == after
