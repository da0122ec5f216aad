"""Every verdict rule of verify-rdma.yml and train.yml (module_utils/verdicts),
fed with what the checks really return: node check documents of the
committed node snapshots, NCCL transport checks of real logs, benchmark
documents built by collective_bench."""

import json
import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.filter.verdicts import FilterModule
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import collective_bench as cb
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import bench_pairs
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import nccl_log
from ansible_collections.mlinfra.multinode.plugins.module_utils.report import verdicts as v
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.cli import node_check_report
from conftest import REPO

from ansible.errors import AnsibleFilterError

REAL_LOGS = os.path.join(REPO, "tests", "fixtures", "nccl-logs", "real")
RDMA = dict(mode="rdma", expect_gpus=4, expect_rdma_devices=4)


def node_document(snapshot, name, **expect):
    return node_check_report(root=snapshot(name), fail_on="never", **dict(RDMA, **expect))


def probe(node, name, phase="Running", waiting=None):
    status = {"phase": phase}
    if waiting:
        status["containerStatuses"] = [{"state": {"waiting": {"reason": waiting}}}]
    return {"metadata": {"name": name, "annotations": {"mlinfra.io/probed-node": node}}, "status": status}


def transport_check(log, mode="rdma"):
    with open(os.path.join(REAL_LOGS, log)) as handle:
        return nccl_log.check_nccl_transport(nccl_log.parse_nccl_log(handle.read()), mode)


# -- worst of -----------------------------------------------------------------------

@pytest.mark.parametrize("statuses, verdict", [
    (["pass", "warn", "fail", "not-checked"], "fail"),
    (["pass", "not-checked", "warn"], "not-checked"),
    (["pass", "skip", "warn"], "warn"),
    (["pass", "skip"], "pass"),
    # Nothing measured is never a pass.
    (["skip", "skip"], "not-checked"),
    ([], "not-checked"),
])
def test_worst_of(statuses, verdict):
    assert v.worst_of(statuses) == verdict


# -- nodes --------------------------------------------------------------------------

def test_nodes_from_real_node_check_documents(snapshot):
    healthy = node_document(snapshot, "healthy-roce-h100")
    no_peermem = node_document(snapshot, "no-peermem")
    probes = [probe("a", "p-a"), probe("b", "p-b")]
    execs = [{"pod": "p-a", "json": healthy}, {"pod": "p-b", "json": no_peermem}]
    results = v.node_verdicts(["a", "b"], probes, execs, 300, "ns")
    assert [(r["node"], r["pod"], r["status"], r["error"]) for r in results] == [
        ("a", "p-a", "pass", None), ("b", "p-b", "fail", None)]
    assert results[0]["checks"] == [] and results[0]["summary"]["fail"] == 0
    [gpudirect] = results[1]["checks"]
    assert gpudirect["name"] == "gpudirect_rdma" and gpudirect["status"] == "fail"
    assert gpudirect["remediation"] and gpudirect["message"]
    assert set(gpudirect) == {"name", "status", "message", "remediation", "evidence"}
    # Where things sit, whatever the checks' status: the rail table and the
    # kubelet's topology policies, for the report's own section.
    layout = results[0]["layout"]
    assert layout["gpu_nic_rails"]["rails"] == ["GPU0-mlx5_6 PXB", "GPU1-mlx5_7 PXB", "GPU2-mlx5_10 PXB",
                                                "GPU3-mlx5_11 PXB"]
    assert layout["gpu_nic_rails"]["status"] == "pass" and layout["kubelet_topology"]["message"]
    assert layout["roce_lossless"]["status"] == "skip"
    crossed = v.checks_verdict(node_document(snapshot, "numa-crossed"))["layout"]
    assert crossed["gpu_nic_rails"]["status"] == "warn" and "GPU0-mlx5_10 SYS" in crossed["gpu_nic_rails"]["rails"]


def test_nodes_that_could_not_be_checked_say_why():
    probes = [probe("b", "p-b", phase="Pending", waiting="ImagePullBackOff"), probe("c", "p-c"), probe("d", "p-d")]
    execs = [{"pod": "p-c", "json": None, "error": None, "stderr": "python3: not found\n"},
             {"pod": "p-d", "json": {"checks": [{"name": "memlock", "status": "skip", "message": "unknown"}]}}]
    results = dict((r["node"], r) for r in v.node_verdicts(["a", "b", "c", "d"], probes, execs, 120, "train"))
    assert all(r["status"] == "not-checked" for r in results.values())
    assert results["a"]["error"] == "no probe pod"
    assert results["b"]["error"] == ("probe pod p-b did not run within 120s (Pending: ImagePullBackOff); "
                                     "kubectl describe pod p-b -n train")
    assert results["c"]["error"] == "the checks gave no result in p-c: python3: not found"
    # Every check skipped: nothing was measured.
    assert results["d"]["error"] == "no check could be made (1 skipped)"


def test_check_mode_probes_nothing():
    results = v.node_verdicts(["a"], [], [], 1, "ns", not_probed="check mode creates no probe pods")
    assert results == [{"node": "a", "pod": None, "status": "not-checked", "checks": [],
                        "error": "check mode creates no probe pods"}]


# -- training pods ------------------------------------------------------------------

def test_pods_with_their_detected_nccl_and_missing_ordinals(snapshot):
    warned = node_document(snapshot, "healthy-roce-h100", min_link_rate_gbps=800)
    execs = [{"pod": "job-1", "node": "n1", "json": warned},
             {"pod": "job-0", "node": "n0", "json": None, "error": "container not found"}]
    nccl = {"transport": "rdma", "rdma_ports": [{"device": "mlx5_0"}], "gpus": 4, "gpudirect": True,
            "nccl_version": "2.28.9", "env": {"NCCL_IB_HCA": "mlx5_0"}}
    detected = [{"pod": "job-1", "json": nccl}]
    results = v.pod_verdicts(execs, detected, 3, "job")
    assert [(r["pod"], r["status"]) for r in results] == [
        ("job-0", "not-checked"), ("job-1", "fail"), ("job-2", "not-checked")]
    assert results[0]["error"] == "the checks gave no result: container not found" and results[0]["nccl"] is None
    assert results[2]["error"] == "not running" and results[2]["node"] is None
    assert results[1]["nccl"] == {"transport": "rdma", "rdma_ports": 1, "gpus": 4, "gpudirect": True,
                                  "nccl_version": "2.28.9", "env": {"NCCL_IB_HCA": "mlx5_0"}}
    assert "rdma_link" in [check["name"] for check in results[1]["checks"]]


# -- the benchmark ------------------------------------------------------------------

def bench_document(busbw_gate=None):
    thresholds = cb.parse_thresholds(["1M=%s" % busbw_gate]) if busbw_gate else ()
    shape = cb.layout("all_reduce", 1048576, 2, "bfloat16")
    rows = [cb.measured_row("all_reduce", shape, 2, 0.001, 0, thresholds)]
    document = {"mode": "sweep", "dtype": "bfloat16", "pairs": None,
                "ops": {"all_reduce": cb.op_block("all_reduce", rows)}}
    return cb.finish_document(document)


def bench_pod(pod, rank, exit_code=0, document=None, transport=None, **extra):
    run = {"node_rank": rank, "exit_code": exit_code, "error": None, "seconds": 4.2, "log": "/tmp/bench.log",
           "log_tail": ["last line"], "nccl": {"net": "IB"}, "transport": transport, "document": document}
    run.update(extra)
    return {"pod": pod, "node": "n%d" % rank, "json": run}


def test_a_benchmark_that_passes():
    passing = transport_check("ib-gdrdma-2node-8rank-nccl-2.11.4.log")
    assert passing["status"] == "pass"
    leader = bench_pod("j-0", 0, document=bench_document(), transport=passing)
    result = v.bench_verdict([bench_pod("j-1", 1, transport=passing), leader])
    assert result["status"] == "pass" and result["checks"] == [] and result["error"] is None
    assert [pod["pod"] for pod in result["pods"]] == ["j-0", "j-1"]
    assert result["document"]["verdict"] == "pass"


def test_a_gate_not_passed_is_busbw_gate_with_its_figures_and_fix():
    document = bench_document(busbw_gate=1000000)
    [found] = document["findings"]
    assert found["check"] == "busbw_gate" and found["kind"] == "below_gate" and found["min_busbw_gbps"] == 1000000
    assert found["busbw_gbps"] == document["ops"]["all_reduce"]["rows"][0]["busbw_gbps"]
    for pairwise, fix in ((False, v.GATE_FIX_SWEEP), (True, v.GATE_FIX_PAIRWISE)):
        result = v.bench_verdict([bench_pod("j-0", 0, exit_code=1, document=document)], pairwise=pairwise)
        assert result["status"] == "fail"
        assert [(c["name"], c["status"], c["remediation"]) for c in result["checks"]] == [("busbw_gate", "fail", fix)]
        assert result["checks"][0]["message"] == found["message"]


def test_slow_and_unmeasured_pairs_are_told_apart_by_their_check():
    figures = {"size": 1048576, "count": 524288, "time_us": 100.0, "algbw_gbps": 10.0}
    pairs = [dict(figures, nodes=["a", "b"], status="measured", busbw_gbps=45.0, wrong=0),
             dict(figures, nodes=["a", "c"], status="measured", busbw_gbps=10.0, wrong=0),
             dict(figures, nodes=["b", "c"], status="not-measured", busbw_gbps=None, wrong=None, note="timeout")]
    bench_pairs.analyze_pairs(pairs)
    document = cb.finish_document({"mode": "pairwise", "dtype": "bfloat16", "ops": {}, "pairs": pairs})
    result = v.bench_verdict([bench_pod("j-0", 0, exit_code=1, document=document)], pairwise=True)
    assert [(c["name"], c["message"].split(":")[0]) for c in result["checks"]] == [
        ("busbw_gate", "pair a - c"), ("bench_result", "pair b - c")]
    assert result["checks"][1]["remediation"] is None


def test_a_document_from_before_findings_is_still_judged():
    result = v.bench_verdict([bench_pod("j-0", 0, exit_code=1, document={"reasons": ["all_reduce 1M: 2 wrong elements"]})])
    assert result["status"] == "fail"
    assert [(c["name"], c["message"]) for c in result["checks"]] == [("bench_result", "all_reduce 1M: 2 wrong elements")]


def test_a_node_without_gpudirect_rdma_fails_the_benchmark_quoting_its_lines():
    failing = transport_check("ib-no-gdrdma-no-module-2node.log")
    assert failing["status"] == "fail"
    result = v.bench_verdict([bench_pod("j-0", 0, document=bench_document(), transport=failing)])
    assert result["status"] == "fail"
    [check] = result["checks"]
    assert check["name"] == "nccl_transport" and check["message"].startswith("pod j-0: ")
    assert check["remediation"] and check["evidence"]
    assert all(line in open(os.path.join(REAL_LOGS, "ib-no-gdrdma-no-module-2node.log")).read()
               for line in check["evidence"])


def test_a_transport_warning_alone_makes_a_warn():
    warning = {"name": "nccl_transport", "status": "warn", "message": "fell back", "remediation": "fix it"}
    result = v.bench_verdict([bench_pod("j-0", 0, document=bench_document(), transport=warning)])
    assert result["status"] == "warn" and result["checks"][0]["message"] == "pod j-0: fell back"


def test_a_benchmark_that_did_not_finish_is_never_a_pass():
    crashed = bench_pod("j-1", 1, exit_code=2)
    result = v.bench_verdict([bench_pod("j-0", 0, document=bench_document()), crashed])
    assert result["status"] == "not-checked"
    assert result["checks"][0]["message"] == "pod j-1: torchrun exited with 2 - last line (log in the pod: /tmp/bench.log)"
    # No pod answered at all.
    result = v.bench_verdict([{"pod": "j-0", "json": None, "error": "timed out after 330 s"}])
    assert result["status"] == "not-checked"
    assert [c["message"] for c in result["checks"]] == ["pod j-0: no result: timed out after 330 s"]
    # Pod 0 finished but wrote no document.
    result = v.bench_verdict([bench_pod("j-0", 0)])
    assert result["status"] == "not-checked" and result["checks"] == []
    # Nothing ran.
    assert v.bench_verdict([])["checks"][0]["message"] == "pod 0 gave no result"
    blocked = v.bench_verdict([], blocker="job is scaled to 0", thresholds=["1G=40"])
    assert (blocked["status"], blocked["error"], blocked["checks"], blocked["thresholds"]) == (
        "not-checked", "job is scaled to 0", [], ["1G=40"])


# -- the report and its verdict -----------------------------------------------------

META = {"cluster": "c", "namespace": "ns", "mode": "rdma", "time": "2026-11-26T00:00:00Z"}


def node(name, status, checks=()):
    return {"node": name, "pod": "p-" + name, "status": status, "checks": list(checks), "error": None}


def pod(name, status, on=None):
    return {"pod": name, "node": on, "status": status, "checks": [], "error": None, "nccl": None}


@pytest.mark.parametrize("statuses, bench, notes, verdict", [
    (["pass", "pass"], "pass", [], "pass"),
    (["pass", "warn"], "pass", [], "warn"),
    (["pass", "warn"], "not-checked", [], "not-checked"),
    (["not-checked", "fail"], "pass", [], "fail"),
    (["pass", "pass"], "fail", [], "fail"),
    # A source that was not there to check is never a pass.
    (["pass", "pass"], None, ["no training pods: job is scaled to 0"], "not-checked"),
    ([], None, [], "not-checked"),
])
def test_the_report_verdict_is_the_worst_of_all(statuses, bench, notes, verdict):
    nodes = [node("n%d" % index, status) for index, status in enumerate(statuses)]
    report = v.verify_report(nodes, [], {"status": bench} if bench else None, notes, {}, META)
    assert report["verdict"] == verdict
    assert report["cluster"] == "c" and report["time"] == META["time"] and report["notes"] == notes
    assert [item["subject"] for item in report["nodes"]] == ["node n%d" % index for index in range(len(statuses))]


def test_the_report_says_what_changed_since_the_previous_one():
    previous = {"time": "yesterday", "nodes": [node("a", "pass"), node("gone", "fail")], "pods": [pod("j-0", "warn")],
                "bench": {"status": "pass", "document": {"ops": {"all_reduce": {"avg_busbw_gbps": 40.0}}}}}
    ops_now = {"all_reduce": {"avg_busbw_gbps": 30.0}, "all_gather": {"avg_busbw_gbps": 20.0}}
    bench = {"status": "fail", "document": {"ops": ops_now}}
    report = v.verify_report([node("a", "fail"), node("new", "pass")], [pod("j-0", "warn", on="a")], bench, [],
                             previous, META)
    assert report["pods"][0]["subject"] == "pod j-0 on a"
    assert report["previous"] == {"time": "yesterday", "changes": ["node a: pass -> fail", "benchmark: pass -> fail"],
                                  "bandwidth": ["all_reduce average busbw: 40.00 -> 30.00 GB/s (-25%)"]}


def test_fitness_under_each_fail_on_level():
    warned = {"name": "mtu", "status": "warn", "message": "small", "remediation": "raise it", "evidence": []}
    failed = {"name": "rdma_link", "status": "fail", "message": "down", "remediation": "plug it", "evidence": []}
    report = v.verify_report([node("a", "warn", [warned]), node("b", "fail", [failed, warned])],
                             [pod("j-0", "not-checked")], None, [], {}, META)
    fit = v.fabric_fitness(report, "fail")
    assert not fit["fit"] and fit["missing"] == []
    assert [(item["subject"], [c["name"] for c in item["checks"]]) for item in fit["blocking"]] == [
        ("node b", ["rdma_link"]), ("pod j-0", [])]
    assert fit["failing"] == ["node b", "pod j-0"]
    assert [item["subject"] for item in v.fabric_fitness(report, "warn")["blocking"]] == ["node a", "node b", "pod j-0"]
    never = v.fabric_fitness(report, "never")
    assert never["fit"] and never["failing"] == ["node b", "pod j-0"]
    noted = v.verify_report([node("a", "pass")], [], None, ["no training pods"], {}, META)
    assert v.fabric_fitness(noted, "fail") == {"fit": False, "blocking": [], "missing": ["no training pods"],
                                               "failing": [], "podless": [], "podless_only": False}
    assert v.fabric_fitness(noted, "never")["fit"]
    with pytest.raises(ValueError, match="verify_fail_on must be one of fail, warn, never, got 'always'"):
        v.fabric_fitness(report, "always")


def test_the_verdicts_name_what_they_did_not_check(snapshot):
    """Real node documents: a RoCE node whose lossless settings could not be
    read passes with lossless RoCE not checked; an InfiniBand node has no
    RoCE to check (not applicable: not listed). A benchmark with no gate at
    any size, no NCCL lines to judge the transport by and no RDMA byte
    moved passes with the three named."""
    roce, infiniband = node_document(snapshot, "healthy-roce-h100"), node_document(snapshot, "infiniband-h100")
    probes = [probe("a", "p-a"), probe("b", "p-b")]
    nodes = v.node_verdicts(["a", "b"], probes, [{"pod": "p-a", "json": roce}, {"pod": "p-b", "json": infiniband}],
                            300, "ns")
    assert [(item["status"], [c["name"] for c in item["not_checked"]]) for item in nodes] == [
        ("pass", ["roce_lossless"]), ("pass", [])]
    assert nodes[0]["not_checked"][0]["message"].startswith("lossless settings not known: ")
    unjudged = transport_check("ib-mixed-gdrdma-two-lines-issue-897.log")
    assert unjudged["status"] == "skip"
    port = {"netdevs": ["net1"], "errors": {}, "per_gb": {}, "congestion": []}
    idle = {"mlx5_6/1": dict(port, bytes=0), "mlx5_7/1": dict(port, bytes=0)}
    bench = v.bench_verdict([bench_pod("j-0", 0, document=bench_document(), transport=unjudged, port_counters=idle),
                             bench_pod("j-1", 1, transport=unjudged, port_counters=idle)])
    assert bench["status"] == "pass" and bench["checks"] == []
    assert [item["name"] for item in bench["not_checked"]] == ["nccl_transport", "busbw_gate", "network"]
    assert bench["words"] == "PASS, 3 not checked: transport, gate, network traffic"
    report = v.verify_report(nodes, [], bench, [], {}, META)
    assert report["verdict"] == "pass"
    assert report["words"] == "PASS, 4 not checked: lossless RoCE, transport, gate, network traffic"
    assert [(item["subject"], item["name"]) for item in report["not_checked"]] == [
        ("node a", "roce_lossless"), ("benchmark", "nccl_transport"), ("benchmark", "busbw_gate"),
        ("benchmark", "network")]
    assert [item["words"] for item in report["nodes"]] == ["PASS, 1 not checked: lossless RoCE", "PASS"]
    fitness = v.fabric_fitness(report, "fail")
    assert v.fitness_line(report, fitness, "fail", "r.md") == (
        "2 node(s) and 0 pod(s) checked: PASS, 4 not checked: lossless RoCE, transport, gate, network traffic; "
        "report: r.md")
    # A gate at some size, and bytes on the wire: nothing left unsaid.
    moved = {"mlx5_6/1": dict(port, bytes=10 ** 9)}
    gated = v.bench_verdict([bench_pod("j-0", 0, document=bench_document(), port_counters=moved)],
                            thresholds=["1M=1"])
    assert gated["not_checked"] == [] and gated["words"] == "PASS"


def test_the_benchmark_line_has_no_empty_part():
    passing = transport_check("ib-gdrdma-2node-8rank-nccl-2.11.4.log")
    result = v.bench_verdict([bench_pod("j-0", 0, document=bench_document(), transport=passing)])
    line = v.bench_line(result)
    assert line.startswith("benchmark PASS, 1 not checked: gate; all_reduce average busbw ") and " over 1 sizes; " \
        in line, line
    assert "; ;" not in line and not line.endswith("; ") and "j-0: NCCL transport pass: " in line
    assert v.bench_line(v.bench_verdict([], blocker="job is scaled to 0")) == (
        "benchmark NOT CHECKED: job is scaled to 0")
    failing = v.bench_verdict([bench_pod("j-0", 0, exit_code=1, document=bench_document(busbw_gate=1000000))])
    assert "; busbw_gate fail: " in v.bench_line(failing) and "; ;" not in v.bench_line(failing)


def test_a_fabric_that_fails_only_on_nodes_without_pods_says_so():
    failed = {"name": "rdma_link", "status": "fail", "message": "down", "remediation": "plug it", "evidence": []}
    report = v.verify_report([node("u09", "pass"), node("u16", "fail", [failed]), node("u25", "fail", [failed])],
                             [pod("h-0", "pass", on="u09")], {"status": "pass", "checks": [], "subject": "benchmark"},
                             [], {}, META)
    fitness = v.fabric_fitness(report, "fail")
    assert not fitness["fit"] and fitness["podless_only"] and fitness["podless"] == ["u16", "u25"]
    line = v.fitness_line(report, fitness, "fail", "r.md")
    assert line == (
        "the GPU fabric of c is not fit to train on: node u16 FAIL: rdma_link: down (fix: plug it); node u25 FAIL: "
        "rdma_link: down (fix: plug it); the 1 pod(s), their node(s) and the benchmark pass: what fails is on node(s) "
        "that run no pod (u16, u25), which deploy.yml keeps pods off once verify-rdma.yml labels them "
        "(-e verify_label_nodes=true); report: r.md")
    # A pod's own node failing is not said apart.
    report = v.verify_report([node("u09", "fail", [failed])], [pod("h-0", "pass", on="u09")], None, [], {}, META)
    assert not v.fabric_fitness(report, "fail")["podless_only"]
    never = v.verify_report([node("u16", "fail", [failed])], [], None, [], {}, META)
    assert v.fitness_line(never, v.fabric_fitness(never, "never"), "never", "r.md") == (
        "1 node(s) and 0 pod(s) checked: FAIL; 1 failing (node u16; verify_fail_on=never: reported, not fatal); "
        "report: r.md")


# -- training runs ------------------------------------------------------------------

def said(*states):
    return [{"pod": "p%d" % index, "json": {"state": state} if state else None} for index, state in enumerate(states)]


@pytest.mark.parametrize("states, state", [
    (("succeeded", "succeeded"), "succeeded"),
    (("running", "succeeded"), "running"),
    (("stopped", "running"), "stopped"),
    (("stopped", "failed"), "failed"),
    (("running", None), "failed"),
    ((), "failed"),
])
def test_run_state(states, state):
    assert v.run_state(said(*states)) == state


@pytest.mark.parametrize("states, replicas, seen_before, state", [
    (["running", "failed"], 2, True, "failed"),
    (["succeeded", "succeeded"], 2, True, "succeeded"),
    (["succeeded"], 2, True, "running"),
    ([], 2, True, "stopped"),
    ([], 2, False, "running"),
])
def test_job_run_state(states, replicas, seen_before, state):
    assert v.job_run_state([{"state": s} for s in states], replicas, seen_before) == state


with open(os.path.join(REPO, "tests", "fixtures", "operator_status", "lifecycles.json")) as _handle:
    # Each start mode's run object as its real controller wrote it, status
    # by status, in a run that succeeded and one whose rank 1 failed (the
    # file says how it was recorded).
    LIFECYCLES = json.load(_handle)["runs"]


@pytest.mark.parametrize("name", sorted(LIFECYCLES))
def test_a_run_object_ends_once_its_operator_says_so_and_fails_only_when_it_failed(name):
    lifecycle = LIFECYCLES[name]
    said = [v.run_object_status({"apiVersion": lifecycle["apiVersion"], "kind": lifecycle["kind"], "status": status})
            for status in lifecycle["statuses"]]
    # Not ended, then ended for good (Volcano writes its end twice).
    first_end = [entry["ended"] for entry in said].index(True)
    assert [entry["ended"] for entry in said] == [False] * first_end + [True] * (len(said) - first_end), said
    assert [entry["failed"] for entry in said] == [False] * first_end + [lifecycle["outcome"] == "failed"] * (
        len(said) - first_end), said
    assert said[-1]["words"].startswith(("Volcano Job " if lifecycle["apiVersion"].startswith("batch.volcano.sh")
                                         else lifecycle["kind"] + " "))


def test_a_run_objects_words_are_its_operators():
    def said(name, index):
        lifecycle = LIFECYCLES[name]
        return v.run_object_status({"apiVersion": lifecycle["apiVersion"], "kind": lifecycle["kind"],
                                    "status": lifecycle["statuses"][index]})["words"]

    assert said("pytorchjob-ok", 1) == "PyTorchJob Running: PyTorchJob cap-0f7335/pytorchjob-ok is running."
    assert said("pytorchjob-fail", -1).startswith("PyTorchJob Failed: Job pytorchjob-fail has failed because")
    assert said("jobset-fail", -1).startswith("JobSet Failed: jobset failed due to reaching max number of restarts")
    assert said("volcano-fail", 2) == "Volcano Job Pending (1 of a gang of 2 running)"
    assert said("volcano-fail", -1) == "Volcano Job Terminated"
    assert said("trainjob-ok", -1) == "TrainJob Complete: jobset completed successfully"
    # Nothing written yet (a JobSet's first statuses count its jobs only).
    assert said("trainjob-ok", 0) == said("jobset-ok", 0) == ""


def test_a_run_its_operator_failed_is_failed_even_with_no_pod_to_say_so():
    failed = LIFECYCLES["volcano-fail"]
    run = {"apiVersion": failed["apiVersion"], "kind": failed["kind"], "status": failed["statuses"][-1]}
    assert v.job_run_state([{"state": "running"}], 2, True, run) == "failed"
    assert v.job_run_state([], 2, True, run) == "failed"
    going = dict(run, status=failed["statuses"][3])
    assert v.job_run_state([{"state": "running"}], 2, True, going) == "running"


with open(os.path.join(REPO, "tests", "fixtures", "operator_status", "kueue.json")) as _handle:
    # Kueue's Workloads and LocalQueues as the real Kueue wrote them, status
    # by status, for runs admitted, left waiting and admitted after a wait
    # (the file says how it was recorded).
    KUEUE = json.load(_handle)


def kueue_workload(owner, index):
    (name,) = [name for name, workload in KUEUE["workloads"].items() if workload["owner"] == owner]
    return {"metadata": {"name": name}, "status": KUEUE["workloads"][name]["statuses"][index]}


def test_a_queued_run_is_admitted_when_kueue_says_so_and_says_why_it_waits_until_then():
    waited = KUEUE["workloads"][[name for name in KUEUE["workloads"] if name.startswith("trainjob-")][0]]["statuses"]
    said = [v.queue_admission([{"status": status}], "team-a") for status in waited]
    first = [entry["admitted"] for entry in said].index(True)
    assert first > 0 and all(entry["admitted"] for entry in said[first:]), said
    # The quota that is short, in Kueue's words, even once a later condition
    # (PodsReady, waiting for pods it has not let start) came.
    for entry in said[:first]:
        assert entry["words"] == (
            "LocalQueue team-a: not admitted: couldn't assign flavors to pod set node: insufficient unused quota "
            "for nvidia.com/gpu in flavor mlinfra-any-node, 8 more needed"), entry
    assert said[first]["words"] == said[-1]["words"] == "LocalQueue team-a: admitted by ClusterQueue mlinfra-gpus"
    # A run that waited and was never admitted, and one admitted at once.
    refused = v.queue_admission([kueue_workload("PyTorchJob/queued-refused", -1)], "team-a")
    assert not refused["admitted"] and "pod set worker: insufficient unused quota" in refused["words"]
    assert v.queue_admission([kueue_workload("JobSet/queued-first", 0)], "team-a")["admitted"]
    # Before Kueue made a Workload: not admitted, and why not said.
    assert v.queue_admission([], "team-a") == {
        "admitted": False,
        "words": "LocalQueue team-a: no Workload for the run yet (Kueue makes one for each run object it manages)"}
    assert FilterModule().filters()["queue_admission"]([kueue_workload("JobSet/queued-first", -1)], "q")["admitted"]


def test_a_localqueue_that_would_admit_nothing_is_named_with_the_fix():
    def problem(answer):
        return v.local_queue_problem(answer, "team-a", "ns-1")

    assert problem({"api_found": True, "resources": [{"status": KUEUE["local_queues"]["team-a"]["statuses"][-1]}]}) \
        == ""
    orphan = {"api_found": True, "resources": [{"status": KUEUE["local_queues"]["orphan-queue"]["statuses"][-1]}]}
    assert problem(orphan) == (
        "train_queue_name: LocalQueue ns-1/team-a admits nothing: Can't submit new workloads to clusterQueue; fix: "
        "its ClusterQueue (spec.clusterQueue) must exist and be active, or take another LocalQueue")
    assert problem({"api_found": True, "resources": []}).startswith(
        "train_queue_name: LocalQueue ns-1/team-a does not exist, and Kueue would hold the run until it does; fix: ")
    assert problem({"api_found": False, "resources": []}).startswith(
        "train_queue_name is team-a, but the cluster serves no kueue.x-k8s.io/v1beta2 LocalQueue")
    # A LocalQueue Kueue has not looked at yet: nothing known against it.
    assert problem({"api_found": True, "resources": [{"status": KUEUE["local_queues"]["orphan-queue"]["statuses"][0]}]}) \
        == ""


def job_pod(name, run, phase, deleting=False):
    metadata = {"name": name, "labels": {"mlinfra.io/train-run": run, "app.kubernetes.io/name": "h-kim-train"}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-27T22:00:00Z"
    return {"metadata": metadata, "status": {"phase": phase} if phase else {}}


def test_runs_in_progress_are_the_exec_runs_still_running_and_the_job_runs_with_live_pods():
    exec_pods = [
        {"pod": "h-kim-1", "json": {"state": "running", "run_id": "long-run-3"}},
        {"pod": "h-kim-0", "json": {"state": "running", "run_id": "long-run-3"}},
        # Ended, not started, or no answer: nothing a deploy would kill.
        {"pod": "h-kim-2", "json": {"state": "succeeded", "run_id": "old"}},
        {"pod": "h-kim-3", "json": {"state": "not-started"}},
        {"pod": "h-kim-4", "json": None, "error": "no answer within 60s"},
    ]
    job_pods = [job_pod("h-kim-r7-0", "h-kim-r7", "Running"), job_pod("h-kim-r7-1", "h-kim-r7", None),
                job_pod("h-kim-r6-0", "h-kim-r6", "Succeeded"), job_pod("h-kim-r6-1", "h-kim-r6", "Failed"),
                job_pod("h-kim-r5-0", "h-kim-r5", "Running", deleting=True),
                # A StatefulSet pod, read with them: no run of its own.
                {"metadata": {"name": "h-kim-0", "labels": {"app.kubernetes.io/name": "h-kim"}},
                 "status": {"phase": "Running"}}]
    assert v.runs_in_progress(exec_pods, job_pods) == [
        # A pod that reports no phase yet is Pending.
        {"run": "h-kim-r7", "mode": "job", "pods": ["h-kim-r7-0", "h-kim-r7-1"]},
        {"run": "long-run-3", "mode": "exec", "pods": ["h-kim-0", "h-kim-1"]},
    ]
    assert v.runs_in_progress(exec_pods[2:], job_pods[2:]) == []
    assert FilterModule().filters()["runs_in_progress"](exec_pods[:1], []) == [
        {"run": "long-run-3", "mode": "exec", "pods": ["h-kim-1"]}]


# -- the filters --------------------------------------------------------------------

def test_the_filters_give_the_same_verdicts_and_refuse_what_is_not_a_list():
    filters = FilterModule().filters()
    assert sorted(filters) == ["bench_line", "bench_verdict", "fabric_fitness", "fitness_line", "job_run_state",
                               "local_queue_problem", "node_port_deltas", "node_verdicts", "pod_verdicts",
                               "queue_admission", "run_object_status", "run_state", "runs_going", "runs_in_progress",
                               "soak_report", "soak_run_facts", "verify_report"]
    for name in filters:
        assert os.path.isfile(os.path.join(REPO, "plugins", "filter", name + ".yml")), "%s has no documentation" % name
    assert filters["run_state"](said("running")) == "running"
    assert filters["runs_going"]([_run("r", "batch/v1", "Job", _conditions(("Complete", "False")))]) == ["r"]
    assert filters["verify_report"](META, [node("a", "pass")], None, None, [], None)["verdict"] == "pass"
    # A pod never scheduled has no node and no facts; what is unknown is left out.
    assert filters["soak_run_facts"]([{"pod": "p-0", "node": "n1", "uid": "u", "nccl": {}, "placement": None},
                                      {"pod": "p-1", "node": None}], "3") == {
        "run": 3, "pods": [{"pod": "p-0", "node": "n1", "uid": "u"}]}
    with pytest.raises(AnsibleFilterError, match="queue_admission takes a list, got dict"):
        filters["queue_admission"]({}, "q")
    with pytest.raises(AnsibleFilterError, match="local_queue_problem expects k8s_info's answer"):
        filters["local_queue_problem"]([], "q", "ns")
    with pytest.raises(AnsibleFilterError, match="node_verdicts takes a list, got str"):
        filters["node_verdicts"]("a", [], [], 1, "ns")
    with pytest.raises(AnsibleFilterError, match="fix the -e value"):
        filters["fabric_fitness"]({"nodes": [], "pods": []}, "sometimes")


# -- soak runs ----------------------------------------------------------------------

def test_soak_runs_degraded_and_not_measured():
    runs = [{"run": 1, "time": "t1", "file": "/l/1.log", "measured": True, "status": "pass", "error": None, "pods": []},
            {"run": 2, "time": "t2", "file": "/l/2.log", "measured": True, "status": "pass", "error": None, "pods": []},
            {"run": 3, "time": "t3", "file": None, "measured": False, "status": "not-checked",
             "error": "the training run failed", "pods": []},
            # Measured, but its log gave no throughput to judge.
            {"run": 4, "time": "t4", "file": "/l/4.log", "measured": True, "status": "pass", "error": None, "pods": []}]
    judged = [{"path": "/l/1.log", "throughput": 100.0, "unit": "tokens/s", "below_baseline": 0.0, "degraded": False,
               "reasons": []},
              {"path": "/l/2.log", "throughput": 50.0, "unit": "tokens/s", "below_baseline": 0.5, "degraded": True,
               "reasons": ["50.0% below the baseline"]}]
    report = v.soak_report(runs, judged, {"cluster": "c"})
    assert report["cluster"] == "c" and report["degraded"] == [2] and report["not_measured"] == [3, 4]
    assert [run["reasons"] for run in report["runs"]] == [[], ["50.0% below the baseline"],
                                                          ["the training run failed"], ["not measured"]]
    assert report["runs"][2]["file"] is None and report["runs"][0]["unit"] == "tokens/s"
    # What the probes read: the nodes the run's pods ran on, in order.
    runs[0].update(pods=[{"pod": "p-0", "node": "n10"}, {"pod": "p-1", "node": "n2"}],
                   nodes={"n10": {"ports": {}, "error": None}, "n3": {"ports": {}, "error": None},
                          "n2": {"ports": None, "error": "not read"}})
    report = v.soak_report(runs, judged, {"cluster": "c"})
    assert list(report["runs"][0]["nodes"].items()) == [("n2", {"ports": None, "error": "not read"}),
                                                        ("n10", {"ports": {}, "error": None})]
    assert report["runs"][1]["nodes"] == {}


def test_a_soak_names_a_node_verify_failed_that_took_part():
    runs = [{"run": number, "time": "t", "file": "/l/%d.log" % number, "measured": True, "status": "pass",
             "error": None, "pods": [{"pod": "p-0", "node": "u09"}, {"pod": "p-1", "node": node}]}
            for number, node in ((1, "u11"), (2, "u16"), (3, "u11"), (4, "u16"))]
    failed = [{"name": "u16", "date": "2026-11-27"}, {"name": "u25", "date": None}]
    report = v.soak_report(runs, [], {"cluster": "c", "failed_nodes": failed})
    # u25 took no part: not named.
    assert report["failed_nodes"] == [{"node": "u16", "date": "2026-11-27", "runs": [2, 4], "message":
                                       "node u16, which verify-rdma.yml failed (2026-11-27), took part in runs 2, 4"}]
    assert v.soak_report(runs, [], {"cluster": "c"})["failed_nodes"] == []


def test_a_soak_says_what_its_benchmark_runs_did_not_check():
    gate = {"name": "busbw_gate", "message": "no size had a bus bandwidth gate"}
    runs = [{"run": number, "time": "t", "file": "/l/%d.json" % number, "measured": True, "status": "pass",
             "error": None, "pods": [], "not_checked": skipped}
            for number, skipped in ((1, [{"name": "nccl_transport", "message": "pod p-0: no NCCL lines"}, gate]),
                                    (2, [gate]), (3, []))]
    report = v.soak_report(runs, [], {"cluster": "c"})
    assert report["not_checked"] == [
        {"name": "nccl_transport", "words": "transport", "message": "pod p-0: no NCCL lines", "runs": [1]},
        {"name": "busbw_gate", "words": "gate", "message": "no size had a bus bandwidth gate", "runs": [1, 2]}]
    assert report["not_checked_words"] == "2 not checked: transport, gate"
    assert [run["not_checked"] for run in report["runs"]][2] == []
    # A soak of training runs (no such field) checks nothing it leaves out.
    for run in runs:
        del run["not_checked"]
    assert v.soak_report(runs, [], {"cluster": "c"})["not_checked_words"] == ""


def _run(name, api_version, kind, status=None):
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "status": status}


def _conditions(*types_and_statuses):
    return {"conditions": [{"type": kind, "status": status} for kind, status in types_and_statuses]}


@pytest.mark.parametrize("api_version,kind,ended,going", [
    # Each controller's own words for an end (their API types' constants),
    # and what it writes while the run goes on.
    ("batch/v1", "Job", _conditions(("SuccessCriteriaMet", "True"), ("Complete", "True")),
     _conditions(("Suspended", "False"))),
    ("batch/v1", "Job", _conditions(("FailureTarget", "True"), ("Failed", "True")), None),
    ("kubeflow.org/v1", "PyTorchJob", _conditions(("Created", "True"), ("Running", "False"), ("Succeeded", "True")),
     _conditions(("Created", "True"), ("Running", "True"))),
    ("kubeflow.org/v1", "PyTorchJob", _conditions(("Failed", "True")), _conditions(("Restarting", "True"))),
    ("batch.volcano.sh/v1alpha1", "Job", {"state": {"phase": "Completed"}}, {"state": {"phase": "Completing"}}),
    ("batch.volcano.sh/v1alpha1", "Job", {"state": {"phase": "Aborted"}}, {"state": {"phase": "Aborting"}}),
    ("batch.volcano.sh/v1alpha1", "Job", {"state": {"phase": "Terminated"}}, {"state": {"phase": "Running"}}),
    ("jobset.x-k8s.io/v1alpha2", "JobSet", _conditions(("Completed", "True")),
     _conditions(("StartupPolicyCompleted", "True"), ("Completed", "False"))),
    ("jobset.x-k8s.io/v1alpha2", "JobSet", _conditions(("Failed", "True")), _conditions(("Suspended", "True"))),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob", _conditions(("Complete", "True")),
     _conditions(("Suspended", "False"))),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob", _conditions(("Failed", "True")), {}),
])
def test_a_run_is_going_until_its_controller_says_it_ended(api_version, kind, ended, going):
    runs = [_run("b-ended", api_version, kind, ended), _run("a-going", api_version, kind, going),
            _run("c-new", api_version, kind)]
    assert v.runs_going(runs) == ["a-going", "c-new"]


def test_a_volcano_job_is_not_read_as_a_batch_job_nor_the_other_way():
    # Both kinds are "Job": a Volcano Job ends by its phase, a batch/v1 Job
    # by its conditions; neither's words end the other.
    volcano = _run("volcano", "batch.volcano.sh/v1alpha1", "Job", _conditions(("Complete", "True")))
    batch = _run("batch", "batch/v1", "Job", {"state": {"phase": "Completed"}})
    assert v.runs_going([volcano, batch]) == ["batch", "volcano"]
