"""soak.yml names the cause of degraded runs on the local cluster.

No RDMA hardware runs here, so the local cluster plays the faults
(tools/localcluster/faults.py) on a node these tests add: on every other
pod placed there, a flaky link (its NIC's error counters advance while the
pod's benchmark runs) or CPUs on the NUMA node away from its GPUs, and in
both cases torchrun's workers in the pod held to a tenth of a CPU from their
rendezvous on (a cgroup's CPU quota), which is what makes those runs
degraded. Everything else is real: the StatefulSet's
pods recreated by the soak before each run, the benchmark over gloo across
them, each pod reading its own (copied) node root, the soak's facts, the
throughput judgement and the attribution. The normal-noise case, which must
be attributed to nothing, is test_bench.py's soak on two healthy nodes.
"""

import json
import time
import uuid

import pytest
from ansible_cli import deployment, run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

HEALTHY = "moc-r4pcc04u09-nairr"
APP = "h-kim"
RUNS = 4
# On every other pod the node takes: with the pods recreated before each
# run, two of the four runs have the fault.
FLAKY_LINK = {"pods": "odd", "slowdown": 0.9, "counters": {"mlx5_6/1": {"symbol_error": 300, "link_error_recovery": 1}}}
# NUMA node 0's CPUs (build_snapshots.NUMA_CPULISTS) for a pod whose GPUs
# sit on nodes 0 and 1.
CROSSED_CPUS = {"pods": "odd", "slowdown": 0.9, "cpus": "0-31,64-95"}


@pytest.fixture(scope="module")
def fault_node(localcluster):
    """A GPU node of the inventory's h100-sriov profile, added for these
    tests (the faults are set per test); deleted afterwards."""
    name = "moc-fault-%s" % uuid.uuid4().hex[:6]
    profiles = localcluster.load_inventory_vars()["localcluster_node_profiles"]
    api = localcluster.Api()
    localcluster.apply_node(api, localcluster.node_object(
        {"name": name, "profile": "h100-sriov", "snapshot": "healthy-roce-h100"}, profiles, inventory=False))
    try:
        localcluster.wait_nodes(api, [name], 60)
        yield name
    finally:
        api.delete("/api/v1/nodes/%s" % name)


@pytest.fixture(scope="module")
def deployed(api_client, fault_node):
    with deployment(api_client, "faults", [HEALTHY, fault_node]) as settings:
        yield settings


def give_fault(localcluster, api_client, namespace, node, snapshot, fault):
    """Sets the node's snapshot and fault, then has the StatefulSet recreate
    its pods, so that the soak's first run starts from pods made under them."""
    localcluster.Api().merge_patch("/api/v1/nodes/%s" % node, {"metadata": {"annotations": {
        localcluster.NODE_SNAPSHOT: snapshot, localcluster.faults.FAULT_ANNOTATION: json.dumps(fault)}}})
    core = client.CoreV1Api(api_client)
    selector = "app.kubernetes.io/name=%s" % APP
    old = {pod.metadata.uid for pod in core.list_namespaced_pod(namespace, label_selector=selector).items}
    core.delete_collection_namespaced_pod(namespace, label_selector=selector)
    deadline = time.time() + 120
    while time.time() < deadline:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        if len(pods) == 2 and not {pod.metadata.uid for pod in pods} & old and all(
                any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []) for pod in pods):
            return
        time.sleep(1)
    raise AssertionError("the pods were not recreated under the fault within 120 s")


def soak(settings, tmp_path):
    # The pods' own port counters and placement carry both faults; the
    # probes' reading of the nodes' whole ports around each run (a soak's
    # default) is tested by the soaks of test_bench.py and test_train_jobs.py.
    run = run_playbook("soak.yml", "local", dict(settings, soak_runs=RUNS, soak_recreate_pods=True,
                                                 soak_report_dir=str(tmp_path), verify_bench_ops=["all_reduce"],
                                                 verify_bench_min_size="256K", soak_node_counters=False))
    (soak_dir,) = tmp_path.glob("soak-*")
    facts = [json.loads((soak_dir / ("run-%02d.facts.json" % number)).read_text()) for number in range(1, RUNS + 1)]
    return run, json.loads((soak_dir / "soak.json").read_text()), (soak_dir / "soak.md").read_text(), facts


def faulted_runs(facts, node, has_fault):
    """The runs whose pod on ``node`` had the fault, by its facts: every
    other one, or as good for the attribution (two of the four: a pod
    made and replaced between two runs counts too)."""
    runs = [entry["run"] for entry in facts for pod in entry["pods"] if pod["node"] == node and has_fault(pod)]
    assert len(runs) == RUNS // 2, runs
    return runs


def test_degraded_runs_on_a_flaky_link_are_put_on_that_node_s_nic(localcluster, api_client, fault_node, deployed,
                                                                  tmp_path):
    flaky = fault_node
    give_fault(localcluster, api_client, deployed["cluster_namespace"], flaky, "roce-counters", FLAKY_LINK)
    run, report, markdown, facts = soak(deployed, tmp_path)
    faulted = faulted_runs(facts, flaky, lambda pod: pod["port_counters"]["mlx5_6/1"]["errors"])
    # gloo on two shared cores is noisy: a normal run may come out degraded
    # too (at the default soak_threshold of 15%; normal runs differ by up to
    # a half), while a faulted one is three times slower or more.
    assert set(faulted) <= set(report["degraded"]), report["runs"]
    attribution = report["attribution"]
    assert attribution["verdict"] == "attributed"
    top = attribution["factors"][0]
    assert (top["nodes"], top["port"], top["counter"]) == ([flaky], "mlx5_6/1", "symbol_error")
    assert top["degraded_runs"] == faulted and top["normal_runs"] == []
    summary = "degraded runs %s: symbol_error moved on %s mlx5_6/1 (net1)" % (
        ", ".join(str(number) for number in report["degraded"]), flaky)
    assert attribution["summary"].startswith(summary)
    # What the operator reads: the play fails naming the NIC, the report shows it.
    assert run.failed and "attribution: " + summary in " ".join(run.failure_messages())
    assert "## What separates the degraded runs" in markdown and "| %s | " % top["factor"] in markdown
    # Each run's facts name its pods by uid (fresh ones every run); the
    # healthy node's ports have no counters to move.
    uids = set()
    for entry in facts:
        assert sorted(pod["node"] for pod in entry["pods"]) == sorted([HEALTHY, flaky])
        uids.update(pod["uid"] for pod in entry["pods"])
        assert "| %d | h-kim-0 |" % entry["run"] in markdown
    assert len(uids) == 2 * RUNS


def test_degraded_runs_that_follow_the_pods_placement_are_put_on_the_placement(localcluster, api_client, fault_node,
                                                                               deployed, tmp_path):
    crossed = fault_node
    give_fault(localcluster, api_client, deployed["cluster_namespace"], crossed, "healthy-roce-h100", CROSSED_CPUS)
    run, report, markdown, facts = soak(deployed, tmp_path)
    faulted = faulted_runs(facts, crossed, lambda pod: pod["placement"]["misses"])
    assert set(faulted) <= set(report["degraded"]), report["runs"]
    attribution = report["attribution"]
    top = attribution["factors"][0]
    assert attribution["verdict"] == "attributed" and top["kind"] == "placement"
    assert top["factor"] == "a pod's CPUs off its GPUs' NUMA node" and top["normal_runs"] == []
    assert all(line.endswith("on %s: CPUs on NUMA node(s) 0, GPUs on 0,1" % crossed) for line in top["evidence"])
    # The node was in every run: not what separates them.
    assert "node %s" % crossed not in [factor["factor"] for factor in attribution["factors"]]
    assert run.failed and "attribution: degraded runs %s: a pod's CPUs off its GPUs' NUMA node" % ", ".join(
        str(number) for number in report["degraded"]) in " ".join(run.failure_messages())
    assert "(OFF)" in markdown
