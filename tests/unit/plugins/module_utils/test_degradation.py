"""degradation: which factors separate a soak's degraded runs from its
normal ones - a NIC whose counter moved only in them, a placement, a node -
and the plain statement when nothing does. The facts are written here as
mlinfra pod-bench records them (node, uid, placement, port counter deltas);
the last tests read the real Composer logs of the degradation hunt (two
normal, two degraded runs) as a directory of runs with facts beside them."""

import json
import shutil
from pathlib import Path

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.report import degradation
from ansible_collections.mlinfra.multinode.plugins.module_utils.report.throughput import ThroughputError, format_report, \
    noise, throughput_report

COMPOSER = Path(__file__).resolve().parents[3] / "fixtures" / "logs" / "composer"
GB = 10 ** 9
ALIGNED = {"cpus_per_numa_node": {"1": 16}, "gpu_numa_nodes": [1], "spans": [], "misses": []}
CROSSED = {"cpus_per_numa_node": {"0": 16}, "gpu_numa_nodes": [1], "spans": [0], "misses": [1]}


def pod(name, node, uid=None, placement=None, errors=None, congestion=None, gigabytes=8):
    """One pod's facts: its RDMA port moved ``gigabytes`` with these counters."""
    return {"pod": name, "node": node, "uid": uid or "uid-" + name, "placement": placement or ALIGNED,
            "rails": [{"gpu": "GPU0", "nic": "mlx5_6", "distance": "PIX"}],
            "port_counters": {"mlx5_6/1": {"netdevs": ["net1"], "bytes": gigabytes * GB, "errors": errors or {},
                                           "congestion": congestion or {"np_cnp_sent": 400, "port_xmit_wait": 9000}}}}


def run(number, degraded, *pods):
    return {"run": number, "degraded": degraded, "facts": {"pods": list(pods)}}


def names(result):
    return [factor["factor"] for factor in result["factors"]]


def test_a_nic_whose_error_counters_climb_only_in_the_degraded_runs_is_named():
    flaky = {"symbol_error": 1200, "link_error_recovery": 3}
    runs = [run(number, number in (1, 3), pod("h-kim-0", "node-a"),
                pod("h-kim-1", "node-b", errors=flaky if number in (1, 3) else None)) for number in (1, 2, 3, 4)]
    result = degradation.attribute(runs)
    assert result["verdict"] == degradation.ATTRIBUTED
    top = result["factors"][0]
    assert (top["nodes"], top["port"], top["counter"]) == (["node-b"], "mlx5_6/1", "symbol_error")
    assert top["degraded_runs"] == [1, 3] and top["normal_runs"] == [] and top["score"] == 1
    assert top["evidence"][0] == "run 1: +1200 (150 per GB): symbol errors on the physical link (cable, transceiver or port)"
    assert result["summary"] == ("degraded runs 1, 3: symbol_error moved on node-b mlx5_6/1 (net1) "
                                 "(in 2 of 2 degraded runs, 0 of 2 normal runs)")
    # Congestion that every run shows, the nodes and pods every run had: none separates.
    assert all("np_cnp_sent" not in name and "node-a" not in name for name in names(result))
    assert set(factor["kind"] for factor in result["factors"]) == {"counter"}


def test_a_nodes_whole_port_whose_errors_climb_only_in_the_degraded_runs_is_named():
    # The pods' own ports (VFs) stayed clean; the probes saw node-b's whole
    # port take symbol errors in runs 2 and 3 only.
    def node_read(errors):
        return {"ports": {"mlx5_6/1": {"netdevs": ["ens1f0"], "bytes": 16 * GB, "errors": errors,
                                       "congestion": {}, "per_gb": {}}}, "error": None}
    lost = {"ports": None, "error": "its probe could not read the ports' counters after the run: gone"}
    runs = []
    for number in (1, 2, 3, 4):
        # node-c, where no pod of the run ran, is left out of its facts.
        nodes = {"node-a": lost if number == 1 else node_read({}), "node-c": node_read({"symbol_error": 5}),
                 "node-b": node_read({"symbol_error": 800} if number in (2, 3) else {})}
        facts = degradation.run_facts(number, [pod("h-kim-0", "node-a"), pod("h-kim-1", "node-b")], nodes)
        runs.append({"run": number, "degraded": number in (2, 3), "facts": facts})
    assert [node["node"] for node in runs[0]["facts"]["nodes"]] == ["node-a", "node-b"]
    assert runs[0]["facts"]["nodes"][0] == {"node": "node-a", "error": lost["error"]}
    result = degradation.attribute(runs)
    top = result["factors"][0]
    assert (top["nodes"], top["port"], top["counter"]) == (["node-b"], "mlx5_6/1 (whole port)", "symbol_error")
    assert result["summary"] == ("degraded runs 2, 3: symbol_error moved on node-b mlx5_6/1 (whole port) (ens1f0) "
                                 "(in 2 of 2 degraded runs, 0 of 2 normal runs)")
    assert top["evidence"][0] == "run 2: +800 (50 per GB): symbol errors on the physical link (cable, transceiver or port)"


def test_congestion_counts_only_where_it_is_well_above_the_normal_runs():
    runs = [run(1, True, pod("h-kim-0", "node-a", congestion={"np_cnp_sent": 40000})),
            run(2, False, pod("h-kim-0", "node-a", congestion={"np_cnp_sent": 400})),
            run(3, False, pod("h-kim-0", "node-a", congestion={"np_cnp_sent": 700}))]
    result = degradation.attribute(runs)
    assert names(result) == ["np_cnp_sent moved on node-a mlx5_6/1 (net1)"]
    assert result["factors"][0]["evidence"] == ["run 1: +40000 (5e+03 per GB)"]


def test_degradation_that_follows_the_placement_of_recreated_pods_is_put_on_the_placement():
    # Fresh pods (new uids) every run, on the same two nodes; in runs 2 and
    # 4 pod 1 got CPUs on the other NUMA node than its GPU.
    runs = [run(number, number in (2, 4), pod("h-kim-0", "node-a", uid="a%d" % number),
                pod("h-kim-1", "node-b", uid="b%d" % number, placement=CROSSED if number in (2, 4) else ALIGNED))
            for number in (1, 2, 3, 4)]
    result = degradation.attribute(runs)
    assert result["verdict"] == degradation.ATTRIBUTED
    # A single pod of one of the two degraded runs is no cause of both.
    assert names(result) == ["a pod's CPUs off its GPUs' NUMA node"]
    assert result["factors"][0]["evidence"] == ["run 2: h-kim-1 on node-b: CPUs on NUMA node(s) 0, GPUs on 1",
                                                "run 4: h-kim-1 on node-b: CPUs on NUMA node(s) 0, GPUs on 1"]


def test_the_node_every_degraded_run_had_ranks_before_the_pairs_it_was_in():
    pairs = {1: ("node-a", "node-b"), 2: ("node-a", "node-c"), 3: ("node-b", "node-c"), 4: ("node-a", "node-b"),
             5: ("node-c", "node-a")}
    runs = [run(number, "node-c" in nodes, pod("h-kim-0", nodes[0], uid="x%d" % number),
                pod("h-kim-1", nodes[1], uid="y%d" % number)) for number, nodes in sorted(pairs.items())]
    result = degradation.attribute(runs)
    assert result["factors"][0]["factor"] == "node node-c"
    assert result["factors"][0]["in_degraded"] == "3 of 3 degraded runs"
    assert result["factors"][0]["in_normal"] == "0 of 2 normal runs"
    # node-a with node-c: 2 of the 3 degraded runs, and no normal one.
    assert "nodes node-a and node-c together" in names(result)
    assert "node node-a" not in names(result)


def test_degraded_runs_within_the_normal_runs_scatter_are_not_pinned_on_a_node():
    """Flagged by a threshold tighter than the runs' own noise: the node
    both had in common is a candidate, not named, and the summary says
    why; the same runs well below the noise are attributed."""
    throughput = {1: 100.0, 2: 115.0, 3: 86.0, 4: 88.0, 5: 84.0, 6: 104.0}
    runs = []
    for number, value in sorted(throughput.items()):
        nodes = ("node-a", "node-c") if number in (3, 5) else ("node-a", "node-b")
        entry = run(number, number in (3, 5), pod("h-kim-0", nodes[0], uid="x%d" % number),
                    pod("h-kim-1", nodes[1], uid="y%d" % number))
        entry["throughput"] = value
        runs.append(entry)
    result = degradation.attribute(runs, noise(runs))
    assert result["verdict"] == degradation.CANNOT_TELL
    # Normal 100, 115, 88, 104: median 102, MAD 7.5 -> 10.9% scatter; the
    # degraded 86 and 84 are 16.7% below, within 3 of it (32.7%).
    assert result["noise"] == {"shortfall": 0.1667, "scatter": 0.109, "within": True}
    assert result["summary"] == (
        "cannot tell what slowed the degraded runs 3, 5: they are 16.7% below the normal runs' median, within 3 "
        "times the normal runs' own scatter (10.9%, 1.4826 MAD), so they may be noise; more runs, or a saved "
        "baseline, can tell")
    assert names(result)[0] == "node node-c"
    for entry in runs:
        if entry["degraded"]:
            entry["throughput"] = 50.0
    result = degradation.attribute(runs, noise(runs))
    assert result["verdict"] == degradation.ATTRIBUTED and result["noise"]["within"] is False
    assert result["summary"].startswith("degraded runs 3, 5: node node-c")


def test_noise_on_the_same_pods_is_attributed_to_nothing():
    runs = [run(number, number == 3, pod("h-kim-0", "node-a"), pod("h-kim-1", "node-b")) for number in (1, 2, 3, 4)]
    result = degradation.attribute(runs)
    assert result["verdict"] == degradation.NOTHING and result["factors"] == []
    assert result["summary"].startswith("nothing measured separates the degraded run 3 from the 3 normal one(s)")


def test_one_degraded_run_of_fresh_pods_is_no_pattern_but_a_counter_that_moved_in_it_is_evidence():
    runs = [run(number, number == 2, pod("h-kim-0", "node-a", uid="a%d" % number),
                pod("h-kim-1", "node-b", uid="b%d" % number)) for number in (1, 2, 3)]
    assert degradation.attribute(runs)["verdict"] == degradation.NOTHING
    runs[1]["facts"]["pods"][1]["port_counters"]["mlx5_6/1"]["errors"] = {"out_of_sequence": 5000}
    result = degradation.attribute(runs)
    assert names(result) == ["out_of_sequence moved on node-b mlx5_6/1 (net1)"]


def test_no_degraded_run_and_every_run_degraded():
    calm = [run(number, False, pod("h-kim-0", "node-a")) for number in (1, 2)]
    assert degradation.attribute(calm)["verdict"] == degradation.NO_DEGRADED
    assert degradation.attribute(calm)["summary"] == "no run degraded: nothing to attribute"
    slow = [run(number, True, pod("h-kim-0", "node-a")) for number in (1, 2)]
    result = degradation.attribute(slow)
    assert result["verdict"] == degradation.ALL_DEGRADED and "no normal run to compare with" in result["summary"]
    assert "node node-a" in names(result)


def test_runs_not_measured_or_without_facts_are_left_out():
    runs = [run(1, True, pod("h-kim-0", "node-c")), run(2, False, pod("h-kim-0", "node-a")),
            {"run": 3, "degraded": None, "facts": None}, {"run": 4, "degraded": True, "facts": None},
            run(5, True, pod("h-kim-0", "node-c"))]
    result = degradation.attribute(runs)
    assert result["runs_without_facts"] == [4] and result["degraded_runs"] == [1, 5]
    assert result["factors"][0]["factor"] == "node node-c"
    only_bare = [{"run": 1, "degraded": True, "facts": None}, {"run": 2, "degraded": False, "facts": None}]
    assert degradation.attribute(only_bare)["verdict"] == degradation.NO_FACTS


def test_the_facts_a_soak_writes_read_back(tmp_path):
    bench_pods = [dict(pod("h-kim-0", "node-a"), exit_code=0, nccl={"net": "IB"}), {"pod": "h-kim-1", "node": None}]
    path = tmp_path / "run-02.facts.json"
    path.write_text(json.dumps(degradation.run_facts(2, bench_pods)))
    facts = degradation.read_facts(str(path))
    assert facts["run"] == 2 and [entry["pod"] for entry in facts["pods"]] == ["h-kim-0"]
    assert sorted(facts["pods"][0]) == ["node", "placement", "pod", "port_counters", "rails", "uid"]
    assert degradation.read_facts(str(tmp_path / "none.facts.json")) is None
    # Facts with the nodes' whole ports read back; a node entry without its name is refused.
    path.write_text(json.dumps(degradation.run_facts(2, bench_pods, {"node-a": {"ports": {}, "error": None}})))
    assert degradation.read_facts(str(path))["nodes"] == [{"node": "node-a", "port_counters": {}}]
    path.write_text(json.dumps({"pods": [], "nodes": [{"port_counters": {}}]}))
    with pytest.raises(degradation.FactsError, match='optionally "nodes"'):
        degradation.read_facts(str(path))
    path.write_text("{not json")
    with pytest.raises(degradation.FactsError, match="run-02.facts.json is not JSON"):
        degradation.read_facts(str(path))


@pytest.mark.parametrize("log, facts", [("runs/run-03.json", "runs/run-03.facts.json"),
                                        ("a/h-kim-0.log.gz", "a/h-kim-0.facts.json"), ("plain", "plain.facts.json")])
def test_where_a_run_s_facts_sit(log, facts):
    assert degradation.facts_path(log) == facts


def composer_runs(tmp_path):
    """The four real Composer runs, each with facts saying which nodes its
    two pods ran on: the degraded ones had node gpu-7."""
    for name in ("composer-gpu-1-good", "composer-gpu-2-good", "composer-gpu-1-bad", "composer-gpu-2-bad"):
        shutil.copy(str(COMPOSER / (name + ".log")), str(tmp_path / (name + ".log")))
        second = "gpu-7" if name.endswith("bad") else "gpu-3"
        facts = {"pods": [pod("train-0", "gpu-1"), pod("train-1", second)]}
        (tmp_path / (name + ".facts.json")).write_text(json.dumps(facts))
    return tmp_path


def test_a_directory_of_runs_from_another_cluster_is_attributed(tmp_path):
    report = throughput_report([str(composer_runs(tmp_path) / "*")])
    # The facts files beside the logs are not taken for logs.
    assert len(report["runs"]) == 4 and len(report["degraded"]) == 2
    attribution = report["attribution"]
    assert attribution["verdict"] == degradation.ATTRIBUTED
    assert attribution["factors"][0]["factor"] == "node gpu-7"
    text = format_report(report)
    assert "\nattribution: degraded runs " in text
    assert "\n  node gpu-7: in 2 of 2 degraded runs and 0 of 2 normal runs" in text


def test_logs_without_facts_have_no_attribution_and_a_bad_facts_file_names_itself(tmp_path):
    shutil.copy(str(COMPOSER / "composer-gpu-1-good.log"), str(tmp_path / "a.log"))
    shutil.copy(str(COMPOSER / "composer-gpu-1-bad.log"), str(tmp_path / "b.log"))
    assert throughput_report([str(tmp_path / "*.log")])["attribution"] is None
    (tmp_path / "b.facts.json").write_text(json.dumps({"pods": [{"pod": "train-0"}]}))
    with pytest.raises(ThroughputError) as error:
        throughput_report([str(tmp_path / "*.log")])
    assert str(tmp_path / "b.facts.json") in str(error.value) and 'each pod with its "node"' in str(error.value)
