"""Reading NCCL_DEBUG=INFO logs and judging the transport NCCL used.

The logs under tests/fixtures/nccl-logs were written by hand from NCCL's
line formats, except those under recorded/ (that directory's README says which
line follows which real format, and where the recorded ones come from); the
lines built inside the tests below are written too. CASES
holds the expected results of every fixture: a log added there without an
entry here fails test_every_fixture_has_expected_results.
"""

import gzip
import io
import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.nccl_log import CHECK_NAME, EXIT_FAILED, EXIT_OK, \
    EXIT_USAGE, check_nccl_transport, format_verdict, main, net_kind, parse_nccl_log
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.checks import STATUSES

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
LOGS = os.path.join(REPO, "tests", "fixtures", "nccl-logs")
TOOL = [os.path.join(REPO, "files", "bin", "mlinfra"), "nccl-log"]

# One entry per fixture (path relative to LOGS): what parse_nccl_log must
# find and the check's status in each mode (rdma with GPUDirect required).
CASES = {
    "ib-gdrdma-2node.log": {
        "nccl_version": "2.21.5", "net": "IB", "net_source": "connections", "gpudirect": True, "nodes": 2,
        "hosts": ["gpu-a01", "gpu-a02"], "link_layers": ["IB"],
        "channels": {"NET/IB/GDRDMA": 12, "P2P/CUMEM/read": 6},
        "rdma": "pass", "tcp": "pass",
    },
    "roce-no-gdr.log": {
        "nccl_version": "2.23.4", "net": "IB", "net_source": "connections", "gpudirect": False, "nodes": 2,
        "hosts": ["trainer-0", "trainer-1"], "link_layers": ["RoCE"], "channels": {"NET/IB": 8},
        "rdma": "fail", "tcp": "pass",
    },
    "socket-fallback.log": {
        "nccl_version": "2.19.3", "net": "Socket", "net_source": "connections", "gpudirect": False, "nodes": 2,
        "hosts": ["trainer-0", "trainer-1"], "link_layers": [], "channels": {"NET/Socket": 8},
        "rdma": "fail", "tcp": "pass",
    },
    "single-node-p2p.log": {
        "nccl_version": "2.22.3", "net": "IB", "net_source": "selection", "gpudirect": None, "nodes": 1,
        "hosts": ["gpu-b07"], "link_layers": ["RoCE"],
        "channels": {"P2P/CUMEM/read": 6, "SHM/direct/direct": 4},
        "rdma": "skip", "tcp": "skip",
    },
    "nccl-2.28-ib-gdrdma.log": {
        "nccl_version": "2.28.3", "net": "IB", "net_source": "connections", "gpudirect": True, "nodes": 2,
        "hosts": ["worker-0", "worker-1"], "link_layers": ["IB"],
        "channels": {"NET/IB/GDRDMA": 10, "P2P/CUMEM": 4},
        "rdma": "pass", "tcp": "pass",
    },
    "empty.log": {
        "nccl_version": None, "net": None, "net_source": None, "gpudirect": None, "nodes": None, "hosts": [],
        "link_layers": [], "channels": {}, "rdma": "skip", "tcp": "skip",
    },
    "no-nccl-lines.log": {
        "nccl_version": None, "net": None, "net_source": None, "gpudirect": None, "nodes": None, "hosts": [],
        "link_layers": [], "channels": {}, "rdma": "skip", "tcp": "skip",
    },
    # Recorded (README): one H100 without RDMA devices, NCCL 2.28.9. IB found
    # no device, NCCL selected sockets; one rank made no connection. In rdma
    # mode that selection is the failure; in tcp mode nothing was crossed.
    "recorded/h100-1gpu-socket-selected.log": {
        "nccl_version": "2.28.9", "net": "Socket", "net_source": "selection", "gpudirect": None, "nodes": 1,
        "hosts": ["vm"], "link_layers": [], "channels": {}, "rdma": "fail", "tcp": "skip",
    },
}


def fixture_path(name):
    return os.path.join(LOGS, name)


def read_fixture(name):
    opener = gzip.open if name.endswith(".gz") else open
    with opener(fixture_path(name), "rb") as handle:
        return handle.read().decode("utf-8")


def parse_fixture(name):
    return parse_nccl_log(read_fixture(name))


def info(host, pid, dev, message, tid=None):
    """One line as NCCL's logger prints it."""
    return "%s:%d:%d [%d] NCCL INFO %s" % (host, pid, tid or pid + 70, dev, message)


def judge(lines, mode="rdma", **kwargs):
    parsed = parse_nccl_log("\n".join(lines))
    return parsed, check_nccl_transport(parsed, mode, **kwargs)


def test_every_fixture_has_expected_results():
    found = set()
    for directory, dirs, files in os.walk(LOGS):
        # real/: users' logs, judged by test_nccl_log_real.py.
        dirs[:] = sorted(name for name in dirs if os.path.join(directory, name) != os.path.join(LOGS, "real"))
        found.update(os.path.relpath(os.path.join(directory, name), LOGS) for name in files
                     if name.endswith((".log", ".log.gz")))
    assert found == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_parse(name):
    expected = CASES[name]
    parsed = parse_fixture(name)
    for key in ("nccl_version", "net", "net_source", "gpudirect", "nodes", "hosts", "link_layers", "channels"):
        assert parsed[key] == expected[key], key
    # Every quoted line is a whole line of the log, as it was written.
    lines = read_fixture(name).splitlines()
    for quoted in parsed["evidence"]["net"] + parsed["evidence"]["gpudirect"]:
        assert quoted in lines
    assert bool(parsed["evidence"]["net"]) == bool(expected["net"])
    json.dumps(parsed)


@pytest.mark.parametrize("mode", ["rdma", "tcp"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_verdict(name, mode):
    parsed = parse_fixture(name)
    check = check_nccl_transport(parsed, mode)
    assert check["status"] == CASES[name][mode]
    # The shape of every check result (common/status.check_result), as the node checks give it.
    assert sorted(check) == ["data", "message", "name", "not_applicable", "remediation", "status"]
    assert check["not_applicable"] is False
    assert check["name"] == CHECK_NAME and check["status"] in STATUSES
    assert check["message"] and isinstance(check["data"], dict)
    assert bool(check["remediation"]) == (check["status"] in ("fail", "warn"))
    json.dumps(check)


def test_ib_with_gpudirect_on_two_nodes():
    parsed = parse_fixture("ib-gdrdma-2node.log")
    assert parsed["net_kind"] == "rdma" and parsed["nets"] == ["IB"]
    assert parsed["gdr_channels"] == parsed["net_channels"] == 12
    assert parsed["channel_families"] == {"NET": 12, "COLLNET": 0, "P2P": 6, "SHM": 0, "other": 0}
    # Four processes on two hosts, their lines interleaved.
    assert parsed["processes"] == 4 and parsed["nranks"] == 4
    assert parsed["cuda_version"] == "12.4"
    assert [(hca["device"], hca["port"], hca["link_layer"]) for hca in parsed["hcas"]] == [
        ("mlx5_0", 1, "IB"), ("mlx5_1", 1, "IB")]
    assert parsed["hcas"][0]["hosts"] == ["gpu-a01", "gpu-a02"]
    assert parsed["oob"] == ["eth0:10.20.1.11<0>", "eth0:10.20.1.12<0>"]
    assert parsed["env"] == {"NCCL_IB_HCA": "mlx5_0,mlx5_1"}
    assert parsed["plugin"] is None and parsed["notes"] == []
    check = check_nccl_transport(parsed, "rdma")
    assert "IB (RDMA over InfiniBand) with GPUDirect RDMA" in check["message"]
    assert "gpu-a01:4101:4188 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA" \
        in check["message"]
    assert "gpu-a01:4101:4188 [0] NCCL INFO Using network IB" in check["message"]
    assert check["data"]["evidence"] == parsed["evidence"]


def test_roce_without_gpudirect():
    parsed = parse_fixture("roce-no-gdr.log")
    assert parsed["gdr_channels"] == 0 and parsed["net_channels"] == 8
    assert parsed["gpudirect_capable"] is False
    assert parsed["gpudirect_hcas"] == {"mlx5_2": False, "mlx5_3": False}
    assert parsed["evidence"]["gpudirect"] == [
        "trainer-0:212:290 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0",
        "trainer-0:212:290 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_2'"]
    check = check_nccl_transport(parsed, "rdma")
    assert check["status"] == "fail"
    assert "RoCE" in check["message"] and "without GPUDirect RDMA" in check["message"]
    assert "GPU Direct RDMA Disabled for HCA 0 'mlx5_2'" in check["message"]
    for remedy in ("nvidia_peermem", "NCCL_DMABUF_ENABLE=1", "5.12", "open GPU kernel modules"):
        assert remedy in check["remediation"]
    # Not requiring GPUDirect makes it a warning, never a pass.
    assert check_nccl_transport(parsed, "rdma", require_gpudirect=False)["status"] == "warn"
    assert "without GPUDirect RDMA" in check_nccl_transport(parsed, "tcp")["message"]


def test_socket_fallback():
    parsed = parse_fixture("socket-fallback.log")
    assert parsed["net_kind"] == "socket"
    assert [(iface["interface"], iface["address"]) for iface in parsed["socket_interfaces"]] == [
        ("eth0", "10.128.3.17"), ("eth0", "10.128.5.42")]
    assert parsed["clues"] == ["trainer-0:97:171 [0] NCCL INFO NCCL_IB_HCA set to mlx5_9",
                               "trainer-0:97:171 [0] NCCL INFO NET/IB : No device found."]
    assert parsed["evidence"]["net"] == [
        "trainer-0:97:171 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
        "trainer-0:97:171 [0] NCCL INFO Using network Socket",
        "trainer-0:97:171 [0] NCCL INFO NET/Socket : Using [0]eth0:10.128.3.17<0>"]
    check = check_nccl_transport(parsed, "rdma")
    assert check["status"] == "fail"
    # The deciding line is quoted as the log has it, and NCCL's own hints.
    assert '"trainer-0:97:171 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0"' \
        in check["message"]
    assert "NET/IB : No device found." in check["message"] and "NCCL_IB_HCA set to mlx5_9" in check["message"]
    for cause in ("NCCL_IB_HCA", "/dev/infiniband", "IPC_LOCK", "NCCL_IB_DISABLE=1", "resource"):
        assert cause in check["remediation"]
    tcp = check_nccl_transport(parsed, "tcp")
    assert tcp["status"] == "pass" and "TCP sockets" in tcp["message"]
    assert "via NET/Socket/0" in tcp["message"]


def test_single_node_is_not_checked():
    parsed = parse_fixture("single-node-p2p.log")
    assert parsed["net_channels"] == 0 and parsed["channel_families"]["SHM"] == 4
    for mode in ("rdma", "tcp"):
        check = check_nccl_transport(parsed, mode)
        assert check["status"] == "skip"
        assert check["message"].startswith("not checked: all 4 ranks were on one node")
        assert "no network was used" in check["message"] and "Using network IB" in check["message"]
    # Without the nNodes line, P2P and SHM connections alone say the same.
    lines = [line for line in read_fixture("single-node-p2p.log").splitlines() if "nNodes" not in line]
    parsed, check = judge(lines)
    assert parsed["nodes"] is None and check["status"] == "skip"
    assert "only P2P/SHM connections" in check["message"]


@pytest.mark.parametrize("text", ["", b"", None, "\n\n", "training step 1 loss 2.3\nbackend nccl\n"])
def test_empty_or_no_nccl_lines(text):
    parsed = parse_nccl_log(text)
    assert parsed["nccl_lines"] == 0 and parsed["net"] is None and parsed["gpudirect"] is None
    assert parsed["notes"][0].startswith("no NCCL lines in the log")
    for mode in ("rdma", "tcp"):
        check = check_nccl_transport(parsed, mode)
        assert check["status"] == "skip" and "NCCL_DEBUG=INFO" in check["message"]


def test_nccl_2_28_wording():
    parsed = parse_fixture("nccl-2.28-ib-gdrdma.log")
    # The version is an INFO line since 2.2x; before, a bare line.
    assert (parsed["nccl_version"], parsed["cuda_version"]) == ("2.28.3", "12.9")
    assert parsed["dmabuf"] is True and parsed["ring_gdr"] == [1]
    # Proxied sends (PXN) and shared buffers count as GPUDirect connections.
    assert parsed["gdr_channels"] == parsed["net_channels"] == 10
    assert parsed["evidence"]["net"][1] == "worker-0:88:161 [0] NCCL INFO Assigned NET plugin IB to comm"
    assert parsed["env"]["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
    # The WARN line has a timestamp and a source location before NCCL's prefix.
    assert parsed["warnings"] == ["[2025-09-02 14:03:51] worker-1:92:92 [1] misc/socket.cc:64 NCCL WARN "
                                  "socketProgress: Connection closed by remote peer worker-0<46021>"]
    assert parsed["processes"] == 4
    # The 2.28 selection lines decide on their own too.
    lines = [line for line in read_fixture("nccl-2.28-ib-gdrdma.log").splitlines()
             if " via " not in line and "Using network" not in line]
    parsed, check = judge(lines)
    assert (parsed["net"], parsed["net_source"]) == ("IB", "selection")
    assert parsed["evidence"]["net"][0] == "worker-0:88:161 [0] NCCL INFO Assigned NET plugin IB to comm"
    assert check["status"] == "skip" and "nNodes 2 but no network connection lines" in check["message"]


def test_interleaved_and_glued_lines():
    # Two processes writing at once: the second line starts in the middle of
    # the first one, which it cut short (the rest of it is lost), and its
    # host name is glued to the first one's tail.
    glued = (info("node-a", 11, 0, "ncclCommInitRank comm 0x55d3c")
             + info("node-b", 22, 0, "Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA"))
    lines = [info("node-a", 11, 0, "Using network IB"), glued,
             info("node-b", 22, 0, "Using network IB"),
             info("node-a", 11, 0, "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA"),
             info("node-a", 11, 0, "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"),
             info("node-b", 22, 0, "Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA")]
    parsed, check = judge(lines)
    assert parsed["hosts"] == ["node-a", "node-b"] and parsed["processes"] == 2
    assert parsed["channels"] == {"NET/IB/GDRDMA": 4} and parsed["nccl_lines"] == 6
    assert check["status"] == "pass"


@pytest.mark.parametrize("prefix", ["", "[rank1]:", "[1,0]<stdout>:", "[default1]:",
                                    "2025-03-11T09:14:02.118264512Z ", "trainer-1 trainer "])
def test_launcher_prefixes(prefix):
    lines = [prefix + info("gpu-c03", 301, 1, "Using network IB"),
             prefix + info("gpu-c03", 301, 1, "Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA"),
             prefix + "gpu-c03:301:301 [1] transport/net_ib.cc:1012 NCCL WARN NET/IB : Got completion with error 12"]
    parsed, check = judge(lines)
    assert parsed["hosts"] == ["gpu-c03"] and parsed["net"] == "IB"
    assert parsed["warnings"] == [lines[2]]
    # A work request the NIC completed with an error: the run failed,
    # whatever transport it used.
    assert parsed["errors"] == [lines[2]] and check["status"] == "fail"
    assert check["message"] == 'NCCL reported a failure (network: IB (RDMA)): "%s"' % lines[2].strip()


def test_ranks_that_disagree_fail_on_the_socket_one():
    lines = [info("node-a", 11, 0, "Using network IB"), info("node-b", 22, 0, "Using network Socket"),
             info("node-a", 11, 0, "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA"),
             info("node-b", 22, 0, "Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0"),
             info("node-a", 11, 0, "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA")]
    parsed, check = judge(lines)
    assert parsed["net"] == "Socket" and parsed["nets"] == ["IB", "Socket"]
    assert check["status"] == "fail" and "ranks disagreed: IB, Socket" in check["message"]
    assert lines[3] in check["message"]
    assert "ranks did not all use the same network: IB, Socket" in parsed["notes"]


def test_socket_selected_without_connections():
    # One node, no network connection, but NCCL selected sockets: across
    # nodes it would use them, so rdma mode fails; tcp mode cannot judge.
    lines = [info("node-a", 11, 0, "NCCL_IB_DISABLE set by environment to 1."),
             info("node-a", 11, 0, "NET/Socket : Using [0]eth0:10.0.0.5<0> [1]net1:192.168.7.5<0>"),
             info("node-a", 11, 0, "Using network Socket"),
             info("node-a", 11, 0, "comm 0x55aa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"),
             info("node-a", 11, 0, "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read")]
    parsed, check = judge(lines)
    assert check["status"] == "fail" and "no network connection was made" in check["message"]
    assert "NCCL_IB_DISABLE set by environment to 1." in check["message"]
    assert parsed["env"] == {"NCCL_IB_DISABLE": "1"}
    assert [iface["interface"] for iface in parsed["socket_interfaces"]] == ["eth0", "net1"]
    assert check_nccl_transport(parsed, "tcp")["status"] == "skip"


def test_old_device_lists_prefer_the_rdma_network():
    # NCCL 2.4/2.5 listed the socket interfaces even when it then used IB,
    # and printed no "Using network" line.
    lines = [info("node-a", 11, 0, "NET/Socket : Using [0]ib0:192.168.11.1<0>"),
             info("node-a", 11, 0, "NET/Plugin : No plugin found (libnccl-net.so)."),
             info("node-a", 11, 0, "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>"),
             "NCCL version 2.4.7+cuda10.0"]
    parsed = parse_nccl_log("\n".join(lines))
    assert (parsed["net"], parsed["net_source"]) == ("IB", "device list")
    assert parsed["nccl_version"] == "2.4.7" and parsed["plugin"] is None
    # With only the socket list, it is Socket.
    parsed = parse_nccl_log("\n".join(lines[:2]))
    assert parsed["net"] == "Socket"


def test_old_channel_formats():
    lines = [info("node-a", 11, 0, "Channel 00 : 0[3d000] -> 1[3e000] [receive] via NET/IB/0/GDRDMA"),
             info("node-a", 11, 0, "Ring 00 : 155[3d000] -> 157[b2000] via P2P/IPC"),
             info("node-a", 11, 0, "Channel 01 : 0[3d000] -> 1[3e000] via P2P/direct pointer/read"),
             info("node-a", 11, 0, "Channel 00/24 :    0   1   2   3")]
    parsed = parse_nccl_log("\n".join(lines))
    assert parsed["channels"] == {"NET/IB/GDRDMA": 1, "P2P/IPC": 1, "P2P/direct pointer/read": 1}


def test_partial_gpudirect_and_pci_flag():
    # Sends without GPUDirect (GPUDirect reads off) and receives with it.
    lines = [info("node-a", 11, 0, "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA(PCI)"),
             info("node-a", 11, 0, "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0")]
    parsed, check = judge(lines)
    assert parsed["gpudirect"] is True and (parsed["gdr_channels"], parsed["net_channels"]) == (1, 2)
    assert check["status"] == "pass" and "GDRDMA on 1 of 2 network connection lines" in check["message"]
    assert any("NCCL_NET_GDR_READ" in note for note in parsed["notes"])


def test_net_plugins():
    assert [net_kind(name) for name in ("IB", "IBext", "IBext_v8", "gIB", "AWS Libfabric", "Libfabric", "Socket",
                                        "GPUDirectTCPX", None)] == \
        ["rdma", "rdma", "rdma", "rdma", "rdma", "rdma", "socket", "other", None]
    # NVIDIA's HPC-X plugin, with SHARP on the device list.
    lines = [info("node-a", 11, 0, "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v6 (v6)"),
             info("node-a", 11, 0, "P2P plugin IBext"),
             info("node-a", 11, 0, "NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1:0/IB [RO]; OOB ib0:10.9.0.1<0>"),
             info("node-a", 11, 0, "Using network IBext"),
             info("node-a", 11, 0, "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA")]
    parsed, check = judge(lines)
    assert (parsed["net"], parsed["plugin"], check["status"]) == ("IBext", "NCCL RDMA Plugin v6", "pass")
    assert [(hca["device"], hca["flags"]) for hca in parsed["hcas"]] == [("mlx5_0", ["SHARP"]), ("mlx5_1", [])]
    # A plugin whose network name holds a space.
    parsed, check = judge([info("node-a", 11, 0, "Channel 00/0 : 1[0] -> 0[0] [send] via NET/AWS Libfabric/0/GDRDMA")])
    assert (parsed["net"], parsed["net_kind"], check["status"]) == ("AWS Libfabric", "rdma", "pass")
    # A plugin this check does not know: never a plain pass in rdma mode.
    lines = [info("node-a", 11, 0, "Channel 00/0 : 1[0] -> 0[0] [send] via NET/GPUDirectTCPX/0/GDRDMA")]
    parsed, check = judge(lines)
    assert check["status"] == "warn" and "does not know as RDMA" in check["message"]
    assert check_nccl_transport(parsed, "tcp")["status"] == "pass"
    # Only the plugin line: its name is all the log says.
    parsed = parse_nccl_log(info("node-a", 11, 0, "NET/Plugin: Loaded net plugin Libfabric (v10)"))
    assert (parsed["net"], parsed["net_source"]) == ("Libfabric", "net plugin")


def test_gpudirect_lines_only_support_the_connections():
    lines = [info("node-a", 11, 0, "GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 5 > 4)"),
             info("node-a", 11, 0, "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)")]
    parsed = parse_nccl_log("\n".join(lines))
    # Without a network connection GPUDirect RDMA was not used either way.
    assert parsed["gpudirect"] is None and parsed["gpudirect_capable"] is False
    assert parsed["gpudirect_hcas"] == {"mlx5_1": False}
    parsed = parse_nccl_log(info("node-a", 11, 0, "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"))
    assert parsed["gpudirect"] is None and parsed["gpudirect_capable"] is True


def test_nccl_debug_below_info():
    lines = ["NCCL version 2.21.5+cuda12.4",
             "node-a:11:11 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection reset by peer"]
    parsed, check = judge(lines)
    assert parsed["nccl_lines"] == 2 and parsed["info_lines"] == 0
    assert check["status"] == "skip" and "NCCL_DEBUG=INFO" in check["message"]


def test_different_versions_are_noted():
    parsed = parse_nccl_log("NCCL version 2.21.5+cuda12.4\n" + info("node-b", 22, 0, "NCCL version 2.23.4+cuda12.6"))
    assert parsed["nccl_versions"] == ["2.21.5", "2.23.4"] and parsed["nccl_version"] == "2.21.5"
    assert "ranks ran different NCCL versions: 2.21.5, 2.23.4" in parsed["notes"]


def test_no_connection_lines():
    check = judge([info("node-a", 11, 0, "Using network IB")])[1]
    assert check["status"] == "skip" and "no connection (Channel ... via) lines" in check["message"]


def test_bad_mode():
    with pytest.raises(ValueError, match="mode must be one of rdma, tcp"):
        check_nccl_transport(parse_nccl_log(""), "infiniband")


def test_reads_a_large_log_quickly():
    # 256 ranks x 32 channels x send and receive: a real job's worth of lines.
    lines = [info("node-%d" % (rank // 8), 1000 + rank, rank % 8,
                  "Channel %02d/0 : %d[%d] -> %d[%d] [%s] via NET/IB/%d/GDRDMA" % (
                      channel, rank, rank % 8, (rank + 8) % 256, rank % 8, side, rank % 8))
             for rank in range(256) for channel in range(32) for side in ("send", "receive")]
    started = time.time()
    parsed = parse_nccl_log(iter(lines))
    assert parsed["net_channels"] == len(lines) and len(parsed["hosts"]) == 32
    assert len(parsed["evidence"]["gpudirect"]) == 1
    assert time.time() - started < 10


def run_main(args, stdin_text=""):
    stdout = io.StringIO()
    status = main(args, stdin=io.StringIO(stdin_text), stdout=stdout)
    return status, stdout.getvalue()


def test_main(tmp_path):
    status, output = run_main([fixture_path("socket-fallback.log")])
    assert status == EXIT_FAILED and output.startswith("FAIL  nccl_transport: NCCL used TCP sockets")
    assert "fix: NCCL falls back to TCP sockets" in output
    status, output = run_main(["--mode", "tcp", "--format", "json", fixture_path("socket-fallback.log")])
    document = json.loads(output)
    assert status == EXIT_OK and document["check"]["status"] == "pass" and document["log"]["net"] == "Socket"
    status, output = run_main(["--no-require-gpudirect", fixture_path("roce-no-gdr.log")])
    assert status == EXIT_OK and output.startswith("WARN")
    # Standard input, and several files read as one log.
    status, output = run_main([], stdin_text=read_fixture("single-node-p2p.log"))
    assert status == EXIT_OK and output.startswith("SKIP")
    assert "log: NCCL 2.22.3, 1 host, 4 processes, network IB (from selection)" in output
    compressed = tmp_path / "rank1.log.gz"
    with gzip.open(str(compressed), "wb") as handle:
        handle.write(b"\n".join(line.encode() for line in read_fixture("ib-gdrdma-2node.log").splitlines()
                                if line.startswith("gpu-a02")))
    status, output = run_main(["-", str(compressed)],
                              stdin_text="\n".join(line for line in read_fixture("ib-gdrdma-2node.log").splitlines()
                                                   if not line.startswith("gpu-a02")))
    assert status == EXIT_OK and output.startswith("PASS") and "2 hosts" in output
    status, output = run_main([str(tmp_path / "missing.log")])
    assert status == EXIT_USAGE and output == ""
    with pytest.raises(SystemExit) as exc:
        run_main(["--mode", "infiniband"])
    assert exc.value.code == EXIT_USAGE


def test_format_verdict_lists_devices():
    parsed = parse_fixture("roce-no-gdr.log")
    text = format_verdict(check_nccl_transport(parsed, "rdma"), parsed)
    assert "devices: mlx5_2:1/RoCE, mlx5_3:1/RoCE" in text and "GPUDirect RDMA no" in text


def test_command_without_ansible():
    # -S: no site-packages, so neither Ansible nor torch can be imported: the
    # in-pod command must need neither.
    proc = subprocess.run([sys.executable, "-S", *TOOL, "--mode", "rdma", fixture_path("socket-fallback.log")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                          check=False)
    assert proc.returncode == EXIT_FAILED and proc.stderr == ""
    assert "via NET/Socket/0" in proc.stdout
    with open(fixture_path("ib-gdrdma-2node.log"), encoding="utf-8") as handle:
        proc = subprocess.run([sys.executable, "-S", *TOOL, "--format", "json"], stdin=handle,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                              check=False)
    assert proc.returncode == EXIT_OK and json.loads(proc.stdout)["check"]["status"] == "pass"
