"""node_record and mlinfra node-check --record: a snapshot holds what the node
checks read and nothing else, and the checks give on it what they gave on the
node. Snapshots were recorded on real GPU hosts (tests/fixtures/nodes/recorded:
one H100, and two H200s joined by NVLink), with the checks' reports on each
host itself."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.cli import format_report, main_node_check, \
    node_check_report
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric import port_counters
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import NodeReader
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.record import record_node
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.port_counters import read_port_counters

from conftest import REPO, SNAPSHOTS

# Each recorded host: its directory, its GPUs, and what the report must say
# of them.
RECORDED_HOSTS = {
    "h100-vm-1gpu": (1, "1 GPU(s): NVIDIA H100 80GB HBM3, driver 580.159.04", None),
    "h200x2-nvlink": (2, "2 GPU(s): NVIDIA H200, driver 580.159.04", "all 1 GPU pair(s) on NVLink (NV18)"),
}
sys.path.insert(0, SNAPSHOTS)
import build_snapshots  # noqa: E402


def comparable(report):
    """A report without what names the root it was read from."""
    facts = dict(report["facts"])
    root = facts.pop("root")
    facts["topology"] = dict(facts["topology"], nvidia_smi=None)
    return json.loads(json.dumps(dict(report, facts=facts), sort_keys=True).replace(root, "ROOT"))


def recorded_snapshot(tmp_path, host="h100-vm-1gpu"):
    """A recorded snapshot with its empty directories (sys/class/infiniband,
    sys/module/mlx5_core, ...), which git does not keep: empty-dirs.txt
    beside it lists them."""
    import shutil
    recorded = os.path.join(SNAPSHOTS, "recorded", host)
    target = tmp_path / "snapshot"
    shutil.copytree(os.path.join(recorded, "snapshot"), str(target), symlinks=True)
    with open(os.path.join(recorded, "empty-dirs.txt")) as handle:
        for line in handle.read().split():
            (target / line).mkdir(parents=True, exist_ok=True)
    return str(target)


@pytest.mark.parametrize("host", sorted(RECORDED_HOSTS))
@pytest.mark.parametrize("mode", ["rdma", "tcp"])
def test_a_recorded_gpu_host_is_checked_as_the_host_itself_was(mode, host, tmp_path):
    gpus, gpu_line, nvlink_line = RECORDED_HOSTS[host]
    with open(os.path.join(SNAPSHOTS, "recorded", host, "host-%s.txt" % mode)) as handle:
        on_the_host = handle.read()
    report = node_check_report(recorded_snapshot(tmp_path, host), mode=mode, min_gpus=gpus)
    assert format_report(report) + "\n" == on_the_host
    statuses = dict((check["name"], check["status"]) for check in report["checks"])
    assert statuses["gpu_count"] == "pass" and gpu_line in on_the_host
    if nvlink_line:
        # Two GPUs of one host: their NVLink pair is read from nvidia-smi's
        # topology as the host printed it.
        assert statuses["nvlink_topology"] == "pass" and nvlink_line in on_the_host
    if mode == "rdma":
        # Kernel 6.18 with the open module: DMA-BUF, no peermem needed. A
        # recording without osrelease once read this as "kernel None is
        # older than 5.12" (test_node_facts has that case).
        assert statuses["gpudirect_rdma"] == "pass" and "580.159.04 on kernel 6.18.44" in on_the_host
        # mlx5 loaded, no RDMA device: the fault these hosts really have.
        assert statuses["rdma_devices"] == "fail"


@pytest.mark.parametrize("name", sorted(build_snapshots.SNAPSHOTS))
def test_a_recorded_snapshot_is_checked_as_its_node(tmp_path, name):
    node = os.path.join(SNAPSHOTS, name)
    record_node(node, str(tmp_path / "snapshot"))
    for mode in ("rdma", "tcp"):
        assert comparable(node_check_report(str(tmp_path / "snapshot"), mode=mode)) == \
            comparable(node_check_report(node, mode=mode)), mode


def test_only_what_the_checks_read_is_recorded(tmp_path, snapshot_copy):
    node = snapshot_copy("healthy-roce-h100")
    (node / "etc").mkdir()
    (node / "etc/shadow").write_text("root:secret\n")
    (node / "sys/class/infiniband/mlx5_10/ports/1/counters").mkdir()
    (node / "sys/class/infiniband/mlx5_10/ports/1/counters/port_xmit_data").write_text("12345\n")
    record_node(str(node), str(tmp_path / "snapshot"))
    recorded = set()
    for directory, _dirs, names in os.walk(str(tmp_path / "snapshot")):
        recorded.update(os.path.relpath(os.path.join(directory, name), str(tmp_path / "snapshot")) for name in names)
    assert "etc/shadow" not in recorded
    assert "proc/cmdline" in recorded and "usr/bin/nvidia-smi" in recorded
    # The ports' counters too: what moved on a node is read from two
    # snapshots. (sys/class/infiniband/mlx5_10 links to the PCI device.)
    assert [path for path in recorded if path.endswith("/infiniband/mlx5_10/ports/1/counters/port_xmit_data")]


def test_a_live_host_s_ethtool_output_is_recorded_for_its_roce_ports(tmp_path, snapshot_copy, monkeypatch):
    # ethtool runs only against the host's own root (/), which here has no
    # RDMA port: the tool is stood in for, the rest is the real recording.
    node = snapshot_copy("roce-counters")
    asked = []

    def ethtool(reader, tool, arguments, netdev, recorded_as=None):
        asked.append((tool, tuple(arguments), recorded_as))
        return "NIC statistics:\n     rx_prio3_pause: 148213\n     tx_prio3_pause: 12\n", "/usr/sbin/ethtool"

    monkeypatch.setattr(port_counters, "tool_output", ethtool)
    record_node(str(node), str(tmp_path / "snapshot"))
    # Once per RoCE port: the recording keeps what the counters' reading printed.
    assert len(asked) == len(set(asked))
    ports = read_port_counters(NodeReader(str(tmp_path / "snapshot")))
    assert ("ethtool", ("-S", "net1"), "ethtool-S") in asked
    assert ports["mlx5_6/1"]["ethtool"] == {"rx_prio3_pause": 148213, "tx_prio3_pause": 12}
    assert ports["mlx5_6/1"]["counters"] == read_port_counters(NodeReader(str(node)))["mlx5_6/1"]["counters"]


def test_the_command_records_into_a_new_directory_only(tmp_path, capsys):
    node = os.path.join(SNAPSHOTS, "port-down")
    target = tmp_path / "snapshot"
    assert main_node_check(["--root", node, "--record", str(target), "--fail-on", "never"]) == 0
    out, err = capsys.readouterr()
    assert "FAIL  rdma_link" in out
    assert err.startswith("recorded ") and "check it as this node with: mlinfra node-check --root %s" % target in err
    with pytest.raises(SystemExit):
        main_node_check(["--root", node, "--record", str(target)])
    assert "is not empty: record into a new directory" in capsys.readouterr().err
    # The command in files/bin, as an operator runs it on a node.
    proc = subprocess.run([sys.executable, os.path.join(REPO, "files", "bin", "mlinfra"), "node-check", "--root", node,
                           "--record", str(tmp_path / "again"), "--mode", "tcp"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0 and os.path.isfile(str(tmp_path / "again" / "proc" / "cmdline")), proc.stderr


def test_nvidia_smi_is_asked_once_and_its_failure_replayed(tmp_path, snapshot_copy):
    node = snapshot_copy("healthy-roce-h100")
    calls = tmp_path / "calls"
    failing = node / "usr" / "bin" / "nvidia-smi"
    # Runs (--help answers), but its topology fails.
    failing.write_text("#!/bin/sh\n[ \"$1\" = --help ] && exit 0\necho \"$@\" >> %s\necho 'Failed to initialize "
                       "NVML: Driver/library version mismatch' >&2\nexit 9\n" % calls)
    failing.chmod(0o755)
    facts = record_node(str(node), str(tmp_path / "snapshot"))
    assert calls.read_text() == "topo -m\n"
    assert facts["topology"]["available"] is False and "exited 9" in facts["topology"]["reason"]
    replayed = node_check_report(str(tmp_path / "snapshot"), mode="rdma")["facts"]["topology"]
    assert (replayed["exit_status"], replayed["available"]) == (9, False)
    assert "Driver/library version mismatch" in replayed["reason"]
