"""port_counters: each RDMA port's counters read from sysfs before and after
a run, what moved (bytes from the 4-byte data counters, the error and
congestion counters per GB), and the benchmark verdict's finding and report
rows when an error counter moved, in a pod's ports or in its node's whole
ports as the probes read them (mlinfra node-check --read-counters)."""

import json
import os
import subprocess
import sys

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import NodeReader
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.port_counters import counter_findings, port_deltas, \
    read_port_counters
from ansible_collections.mlinfra.multinode.plugins.module_utils.report.verdicts import bench_verdict

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PORT = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.2/infiniband/mlx5_6"


def write_port(root, counters, hw_counters):
    """mlx5_6's port 1 counters, in a copy of a recorded node."""
    for directory, values in (("counters", counters), ("hw_counters", hw_counters)):
        os.makedirs(str(root / PORT / "ports" / "1" / directory), exist_ok=True)
        for name, value in values.items():
            (root / PORT / "ports" / "1" / directory / name).write_text("%d\n" % value)


QUIET = {"port_xmit_data": 1000, "port_rcv_data": 1000, "symbol_error": 0, "link_downed": 0, "port_xmit_wait": 5}
HW_QUIET = {"out_of_sequence": 0, "np_cnp_sent": 0, "rp_cnp_handled": 0, "local_ack_timeout_err": 3}


def test_what_a_run_moved_on_each_port(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    write_port(root, QUIET, HW_QUIET)
    (root / PORT / "ports/1/counters/bogus").write_text("not a number\n")
    before = read_port_counters(NodeReader(str(root)))
    assert sorted(before) == ["mlx5_10/1", "mlx5_11/1", "mlx5_6/1", "mlx5_7/1"]
    assert before["mlx5_6/1"]["netdevs"] == ["net1"]
    assert before["mlx5_6/1"]["counters"]["port_xmit_data"] == 1000 and "bogus" not in before["mlx5_6/1"]["counters"]
    # 2 GB out and 0.5 GB in (in 4-byte words), a link that went down once,
    # out-of-sequence packets, CNPs.
    moved = dict(QUIET, port_xmit_data=1000 + 500000000, port_rcv_data=1000 + 125000000, link_downed=1,
                 port_xmit_wait=5 + 2500)
    write_port(root, moved, dict(HW_QUIET, out_of_sequence=40, np_cnp_sent=250))
    deltas = port_deltas(before, read_port_counters(NodeReader(str(root))))
    assert list(deltas) == ["mlx5_6/1", "mlx5_7/1", "mlx5_10/1", "mlx5_11/1"]
    assert deltas["mlx5_7/1"] == {"netdevs": ["net2"], "bytes": 0, "errors": {}, "congestion": {}, "per_gb": {}}
    assert {"mlx5_6/1": deltas["mlx5_6/1"]} == {"mlx5_6/1": {
        "netdevs": ["net1"], "bytes": 2500000000,
        "errors": {"link_downed": 1, "out_of_sequence": 40},
        "congestion": {"port_xmit_wait": 2500, "np_cnp_sent": 250, "rp_cnp_handled": 0},
        "per_gb": {"link_downed": 0.4, "np_cnp_sent": 100.0, "out_of_sequence": 16.0, "port_xmit_wait": 1000.0}}}
    found = counter_findings({"node-b": deltas, "node-a": {}})
    assert [(item["host"], item["counter"], item["delta"]) for item in found] == [
        ("node-b", "out_of_sequence", 40), ("node-b", "link_downed", 1)]


def ethtool_stats(pause, duration, discard):
    """What ``ethtool -S net1`` prints on a ConnectX port (NIC statistics, one
    counter a line; the priority port counters among the others)."""
    return ("NIC statistics:\n     rx_packets: 845320277\n     rx_bytes: 2195783498134\n"
            "     rx_prio0_pause: 0\n     rx_prio3_pause: %d\n     rx_prio3_pause_duration: %d\n"
            "     tx_prio3_pause: 96204\n     rx_prio3_buf_discard: %d\n     tx_pause_storm_warning_events: 0\n"
            "     rx_prio3_pause_transition: 5\n" % (pause, duration, discard))


def test_the_priority_pause_counters_come_from_ethtool(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    recording = root / "usr/share/mlinfra-snapshot/ethtool-S-net1.txt"
    recording.parent.mkdir(parents=True, exist_ok=True)
    recording.write_text(ethtool_stats(148213, 3320119, 0))
    before = read_port_counters(NodeReader(str(root)))
    assert before["mlx5_6/1"]["ethtool"] == {
        "rx_prio0_pause": 0, "rx_prio3_pause": 148213, "rx_prio3_pause_duration": 3320119, "tx_prio3_pause": 96204,
        "rx_prio3_buf_discard": 0, "tx_pause_storm_warning_events": 0, "rx_prio3_pause_transition": 5}
    # net2's port has no recording, and this root is not this machine's: nothing.
    assert before["mlx5_7/1"]["ethtool"] == {}
    recording.write_text(ethtool_stats(149213, 3420119, 7))
    delta = port_deltas(before, read_port_counters(NodeReader(str(root))))["mlx5_6/1"]
    assert delta["errors"] == {"rx_prio3_buf_discard": 7}
    assert delta["congestion"]["rx_prio3_pause"] == 1000 and delta["congestion"]["rx_prio3_pause_duration"] == 100000
    [found] = counter_findings({"node-b": {"mlx5_6/1": delta}})
    assert found["meaning"] == "packets dropped on priority 3, which was meant to be lossless"


def test_a_counter_that_went_back_counts_from_zero_and_no_bytes_no_rate():
    before = {"mlx5_6/1": {"netdevs": [], "counters": {"symbol_error": 900, "port_xmit_data": 10},
                           "hw_counters": {}}}
    after = {"mlx5_6/1": {"netdevs": [], "counters": {"symbol_error": 7, "port_xmit_data": 10}, "hw_counters": {}}}
    assert port_deltas(before, after)["mlx5_6/1"]["errors"] == {"symbol_error": 7}
    assert port_deltas(before, after)["mlx5_6/1"]["per_gb"] == {}
    # A port seen only once has no delta.
    assert port_deltas(before, {}) == {}


def bench_pod(name, node, counters):
    result = {"node_rank": int(name[-1]), "exit_code": 0, "error": None, "transport": None,
              "port_counters": counters, "document": None}
    return {"pod": name, "node": node, "rc": 0, "json": result}


def test_the_benchmark_verdict_names_the_nic_whose_error_counters_moved():
    clean = {"netdevs": ["net1"], "bytes": 2 * 10 ** 9, "errors": {}, "congestion": {"np_cnp_sent": 10},
             "per_gb": {"np_cnp_sent": 5.0}}
    faulty = dict(clean, errors={"symbol_error": 12}, per_gb={"symbol_error": 6.0, "np_cnp_sent": 5.0})
    verdict = bench_verdict([bench_pod("h-kim-0", "node-a", {"mlx5_6/1": clean}),
                             bench_pod("h-kim-1", "node-b", {"mlx5_6/1": faulty, "mlx5_7/1": clean})])
    [counters] = [check for check in verdict["checks"] if check["name"] == "port_counters"]
    assert counters["status"] == "warn"
    assert counters["message"] == ("pod h-kim-1 on node-b: mlx5_6/1 (net1) symbol_error +12, 6.0 per GB moved "
                                   "(symbol errors on the physical link (cable, transceiver or port))")
    assert "ethtool -m" in counters["remediation"]
    assert verdict["counters"] == [
        {"pod": "h-kim-0", "node": "node-a", "port": "mlx5_6/1", "netdevs": ["net1"], "gb": 2.0, "errors": "",
         "congestion_per_gb": "np_cnp_sent 5.0"},
        {"pod": "h-kim-1", "node": "node-b", "port": "mlx5_6/1", "netdevs": ["net1"], "gb": 2.0,
         "errors": "symbol_error +12", "congestion_per_gb": "np_cnp_sent 5.0"},
        {"pod": "h-kim-1", "node": "node-b", "port": "mlx5_7/1", "netdevs": ["net1"], "gb": 2.0, "errors": "",
         "congestion_per_gb": "np_cnp_sent 5.0"}]
    quiet = bench_verdict([bench_pod("h-kim-0", "node-a", {"mlx5_6/1": clean})])
    assert not [check for check in quiet["checks"] if check["name"] == "port_counters"]


def probe_reading(root, pod, node):
    """What a probe's exec of mlinfra node-check --read-counters gives
    pods_exec: the command in files/bin, run on the node's root."""
    proc = subprocess.run([sys.executable, os.path.join(REPO, "files", "bin", "mlinfra"), "node-check", "--read-counters",
                           "--root", str(root)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return {"pod": pod, "node": node, "rc": 0, "json": json.loads(proc.stdout), "stderr": proc.stderr, "error": None}


def test_the_probes_read_their_nodes_whole_ports_around_the_benchmark(snapshot_copy):
    flaky, quiet = snapshot_copy("healthy-roce-h100"), snapshot_copy("tcp-only")
    write_port(flaky, QUIET, HW_QUIET)
    before = [probe_reading(flaky, "h-kim-probe-0", "node-b"), probe_reading(quiet, "h-kim-probe-1", "node-c")]
    # While the benchmark ran, 3 GB crossed node-b's mlx5_6 port, whoever sent
    # them, with symbol errors; node-c (no RDMA port) ran no benchmark pod.
    write_port(flaky, dict(QUIET, port_xmit_data=1000 + 375000000, port_rcv_data=1000 + 375000000,
                           symbol_error=300), HW_QUIET)
    after = [probe_reading(flaky, "h-kim-probe-0", "node-b"), probe_reading(quiet, "h-kim-probe-1", "node-c")]
    pods = [bench_pod("h-kim-0", "node-a", {}), bench_pod("h-kim-1", "node-b", {})]
    verdict = bench_verdict(pods, probe_counters={"before": before, "after": after})
    [counters] = [check for check in verdict["checks"] if check["name"] == "port_counters"]
    assert (counters["status"], counters["message"]) == ("warn", (
        "node node-b (whole ports): mlx5_6/1 (net1) symbol_error +300, 100.0 per GB moved "
        "(symbol errors on the physical link (cable, transceiver or port))"))
    assert verdict["node_port_counters"]["node-c"] == {"ports": {}, "error": None}
    assert [(row["node"], row["port"], row["gb"], row["errors"]) for row in verdict["node_counters"]] == [
        ("node-b", "mlx5_6/1", 3.0, "symbol_error +300"), ("node-b", "mlx5_7/1", 0.0, ""),
        ("node-b", "mlx5_10/1", 0.0, ""), ("node-b", "mlx5_11/1", 0.0, "")]
    # A probe that could not read afterwards: the node is named, not passed over.
    lost = dict(after[0], rc=None, json=None, error="pod h-kim-probe-0 is gone")
    verdict = bench_verdict(pods, probe_counters={"before": before, "after": [lost, after[1]]})
    [counters] = [check for check in verdict["checks"] if check["name"] == "port_counters"]
    assert counters["message"] == ("node node-b: its probe could not read the ports' counters after the run: "
                                   "pod h-kim-probe-0 is gone")
    assert verdict["node_counters"] == [{"node": "node-b", "port": None, "error": counters["message"][len("node node-b: "):]}]
    # No probes (a soak's benchmark, or verify_node_checks=false): no node rows.
    assert bench_verdict(pods)["node_counters"] == []
