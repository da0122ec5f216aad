"""The verify role's probe objects (plugins/module_utils/workload/probe_manifests.py):
the same objects, as data, that the role's template probe.yaml.j2 gave for
the local inventory before they were built in Python (recorded in
tests/fixtures/manifests/, and changed there with each deliberate change:
the owner labels, the alive file), no field added by a hostile value, and
a probe that ends by itself once the play stops using it."""

import json
import os
import subprocess
import time

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.probe_manifests import (
    probe_command, probe_idle_limit, probe_lifetime, probe_manifests)

from manifest_checks import HOSTILE, REPO, inventory_settings, key_paths, paths_holding, round_trip

RECORDED = os.path.join(REPO, "tests", "fixtures", "manifests")


@pytest.mark.parametrize("platform", ["kubernetes", "openshift"])
def test_the_local_inventorys_probes_are_what_the_template_gave(platform):
    with open(os.path.join(RECORDED, "probe-local-%s.json" % platform)) as handle:
        recorded = json.load(handle)
    # Two runtime files stand for all (the volume's items follow the code).
    built = probe_manifests(inventory_settings("local", cluster_platform=platform,
                                               pod_runtime_keys=["pod_commands.py", "node.cli.py"]))
    assert built == recorded
    # One pod per node, named by its position, on that node.
    pods = [obj for obj in built if obj["kind"] == "Pod"]
    nodes = inventory_settings("local")["cluster_gpu_nodes"]
    assert [(pod["metadata"]["name"], pod["spec"]["nodeName"]) for pod in pods] == [
        ("h-kim-probe-%d" % index, node) for index, node in enumerate(nodes)]


def test_the_probe_outlives_its_start_and_its_stay_by_ten_minutes():
    pod = probe_manifests(inventory_settings("local", verify_probe_timeout="30"))[-1]
    assert pod["spec"]["activeDeadlineSeconds"] == 630
    assert pod["spec"]["containers"][0]["command"][-1] == probe_command(630)
    # Staying for a benchmark (its timeout and exec margin), it lives that much longer.
    staying = probe_manifests(inventory_settings("local", verify_probe_timeout="30", stay_seconds="210"))[-1]
    assert staying["spec"]["activeDeadlineSeconds"] == 840
    assert staying["spec"]["containers"][0]["command"][-1] == probe_command(840)


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


def test_a_soaks_probe_ends_one_step_after_its_last_use():
    settings = dict(inventory_settings("local"), stay_seconds=1000 * 5400, step_seconds=5400)
    (pod,) = [item for item in probe_manifests(settings) if item["kind"] == "Pod"][:1]
    # The whole soak bounds its life; one run bounds how long it goes unused.
    assert pod["spec"]["activeDeadlineSeconds"] == probe_lifetime(settings)
    assert probe_idle_limit(settings) == 5400 + 600
    assert pod["spec"]["containers"][0]["command"][-1] == probe_command(6000)
    # Without steps (verify-rdma.yml) it may idle as long as it lives.
    plain = inventory_settings("local")
    assert probe_idle_limit(plain) == probe_lifetime(plain)


def test_the_probe_shell_lives_while_used_and_ends_when_not(tmp_path):
    alive = tmp_path / "alive"
    shell = subprocess.Popen(["/bin/sh", "-c", probe_command(3)], env=dict(os.environ, MLINFRA_PROBE_ALIVE=str(alive)))
    try:
        for second in range(4):  # used every second for four seconds: it stays
            time.sleep(1)
            alive.touch()
            assert shell.poll() is None, "ended after %d s of use" % (second + 1)
        # Not used any more: gone within the limit and one poll.
        assert shell.wait(timeout=8) == 0
    finally:
        shell.kill()
