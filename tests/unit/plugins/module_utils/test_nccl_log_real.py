"""nccl_log on real NCCL logs that users pasted into public issue threads
(tests/fixtures/nccl-logs/real, each file's source and what a careful reader
concludes from it in SOURCES.md there): the network, GPUDirect RDMA, the
verdict in each mode, and for a run that failed, the first line that says
so. NCCL 2.4 to 2.21, InfiniBand, RoCE, EFA and sockets, the prefixes of
mpirun, pdsh, log viewers and CloudWatch."""

import os
import re

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.nccl_log import check_nccl_transport, parse_nccl_log

from test_nccl_log import info

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nccl-logs", "real")

# file (without .log): network, GPUDirect RDMA on the network connections
# (None: no network connection line), verdict in rdma and in tcp mode, and
# the start of the first failure quoted (after "NCCL WARN").
CASES = {
    # EFA through aws-ofi-nccl, 2.4-era ring lines without GDRDMA.
    "efa-aws-libfabric-2host-ring-old-format": ("AWS Libfabric", False, "fail", "pass", None),
    # CloudWatch copies: no network selection / no connection line.
    "efa-cloudwatch-table-duplicated-columns-nccl-2.21.5": (None, None, "skip", "skip", None),
    "efa-libfabric-cloudwatch-timestamp-lines-sagemaker": ("AWS Libfabric", None, "skip", "skip", None),
    "ib-connect-failed-net_ib-error-chain-2node": (None, None, "fail", "fail",
                                                   "[Proxy Service 8] Failed to execute operation Connect"),
    # Every connection via GDRDMA (one host forced over its NICs; 2.11 sends
    # only; a log already filtered with grep GDR; /GDRDMA/Shared under mpirun).
    "ib-gdrdma-1host-net-loopback-nccl-2.7.6": ("IB", True, "pass", "pass", None),
    "ib-gdrdma-2host-16rank-send-receive": ("IB", True, "pass", "pass", None),
    "ib-gdrdma-2node-8rank-nccl-2.11.4": ("IB", True, "pass", "pass", None),
    "ib-gdrdma-k8s-pods-receive-send": ("IB", True, "pass", "pass", None),
    "ib-gdrdma-shared-mpirun-tag-output-interleaved": ("IB", True, "pass", "pass", None),
    "ib-h100-2node-plugin-warn-completion-error-nccl-2.21.5": (None, None, "fail", "fail",
                                                               "NET/IB : Got completion from peer 10.0.35.1<49189>"),
    # Two bare lines (the user cut NCCL's prefix and "Channel" off): nothing
    # a reader of NCCL's log format can take; test_a_host_receiving_... has
    # them in NCCL's format.
    "ib-mixed-gdrdma-two-lines-issue-897": (None, None, "skip", "skip", None),
    # InfiniBand without GDRDMA: nv_peer_mem missing, GPU-NIC distance,
    # a log viewer's box prefix, 2.4's ring lines.
    "ib-no-gdrdma-16rank-2node-init-complete": ("IB", False, "fail", "pass", None),
    "ib-no-gdrdma-2node-gpu-distance-nccl-2.4.7": ("IB", False, "fail", "pass", None),
    "ib-no-gdrdma-k8s-log-viewer-box-prefix": ("IB", False, "fail", "pass", None),
    "ib-no-gdrdma-no-module-2node": ("IB", False, "fail", "pass", None),
    # Only P2P/IPC ring lines in the excerpt: the network was not used there.
    "ib-rank-bracket-prefix-256rank": ("IB", None, "skip", "skip", None),
    "ib-sharp-ibext-pdsh-prefix-cuda-init-error": ("IBext", None, "fail", "fail", "Cuda failure 'initialization error'"),
    "ib-warn-completion-error-4-5host-h100": (None, None, "fail", "fail", "NET/IB : Got completion from peer fe80::"),
    "ib-warn-completion-error-chain-net_ib.cu-nccl-tests": (None, None, "fail", "fail",
                                                            "NET/IB : Got completion with error 4"),
    "ib-warn-create-qp-error-chain-cu-wrapped-line-horovod": ("IB", False, "fail", "fail",
                                                              "Call to ibv_create_qp failed"),
    "ibext-plugin-warn-create-qp-tensorflow-bazel-paths-nccl-2.8.3": ("IBext", None, "fail", "fail",
                                                                      "Call to ibv_create_qp failed"),
    # RoCE device lists without connection lines: selected, not used.
    "roce-2node-16rank-nccl-2.10.3": ("IB", None, "skip", "skip", None),
    "roce-2node-1gpu-header-nccl-2.18.5": ("IB", None, "skip", "skip", None),
    "roce-2node-header-nccl-2.19.3": ("IB", None, "skip", "skip", None),
    "roce-gdr-disabled-by-hca-16rank": ("IB", None, "skip", "skip", None),
    "roce-ibext-v8-plugin-no-gdrdma-64rank-init-complete": ("IBext_v8", False, "fail", "pass", None),
    "roce-irdma-ibext-v8-2node-init-nccl-2.21.5": ("IBext_v8", None, "skip", "skip", None),
    "roce-no-gdrdma-warn-completion-error-12": ("IB", False, "fail", "pass", None),
    "roce-no-gdrdma-warn-create-cq-2node-nccl-2.7.8": ("IB", False, "fail", "fail", "Call to ibv_create_cq failed"),
    "roce-rank0-receive-no-gdrdma-stripped-prefix-nccl-2.5.7": ("IB", False, "fail", "pass", None),
    # A WARN line alone (NCCL_DEBUG=WARN, or all the user pasted): still a failure.
    "roce-warn-timestamp-prefix-ibv_modify_qp-timeout-redacted": (None, None, "fail", "fail",
                                                                  "Call to ibv_modify_qp failed with 110"),
    # Sockets: forced (NCCL_NET=Socket, NCCL_IB_DISABLE), no IB device, no
    # libibverbs (a WARN in 2.10 that is no failure).
    "socket-forced-lo-ib-disabled": ("Socket", None, "fail", "skip", None),
    "socket-forced-nccl-net-socket-dgx-a100-nccl-2.11.4": ("Socket", None, "fail", "skip", None),
    "socket-ibext-plugin-no-ib-device-connect-error": ("Socket", False, "fail", "fail",
                                                       "[Service thread] Error encountered progressing operation"),
    "socket-ibext-plugin-no-ib-device-twice": ("Socket", None, "fail", "skip", None),
    "socket-no-ib-device-aws-many-hosts-nccl-2.4.7": ("Socket", False, "fail", "pass", None),
    # One host logged only ENV lines, the other no selection: not judged.
    "socket-no-ib-device-torchrun-2node-nccl-2.14.3": (None, None, "skip", "skip", None),
    "socket-no-ib-mpirun-prefix-nccl-2.5.6": ("Socket", None, "fail", "skip", None),
    # The first WARN (libcuda's path) is no failure; the connect that
    # failed is.
    "socket-no-libibverbs-info-2host-connect-abort-nccl-2.18.3": ("Socket", None, "fail", "fail",
                                                                  "socketStartConnect: Connect to 10.0.0.2<45763> failed"),
    "socket-no-libibverbs-warn-nccl-2.10.3": ("Socket", None, "fail", "skip", None),
    "socket-openmpi-tag-prefix-2node-connection-closed": ("Socket", False, "fail", "pass", None),
    "socket-warn-socketFinalizeAccept-connect-failed": (None, None, "fail", "fail",
                                                        "socketFinalizeAccept: wrong type 4 != 3"),
    # Closed by the peer, then the error return: the closing was the failure.
    "warn-socketProgress-closed-error-chain-nccl-tests": (None, None, "fail", "fail",
                                                          "socketProgress: Connection closed by remote peer"),
    "warn-timestamp-mpirun-prefix-connect-failed-nccl-2.18.3": (None, None, "fail", "fail",
                                                                "Cuda failure 'invalid argument'"),
}


def read(name):
    with open(os.path.join(REAL, name + ".log"), encoding="utf-8") as handle:
        return handle.read()


def test_every_real_log_has_its_expected_results_and_a_source():
    found = sorted(name[:-4] for name in os.listdir(REAL) if name.endswith(".log"))
    assert found == sorted(CASES) and len(found) >= 20
    with open(os.path.join(REAL, "SOURCES.md"), encoding="utf-8") as handle:
        sources = handle.read()
    for name in found:
        row = [line for line in sources.splitlines() if line.startswith("| `%s.log`" % name)]
        assert row and re.search(r"https://github\.com/[^/]+/[^/]+/(?:issues|pull)/\d+", row[0]), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_log_is_read_and_judged_as_a_careful_reader_would(name):
    net, gpudirect, rdma, tcp, first_error = CASES[name]
    parsed = parse_nccl_log(read(name))
    assert (parsed["net"], parsed["gpudirect"]) == (net, gpudirect)
    verdicts = dict((mode, check_nccl_transport(parsed, mode)) for mode in ("rdma", "tcp"))
    assert (verdicts["rdma"]["status"], verdicts["tcp"]["status"]) == (rdma, tcp)
    if first_error:
        assert parsed["errors"][0].split("NCCL WARN ", 1)[1].startswith(first_error)
        for check in verdicts.values():
            assert check["message"].startswith("NCCL reported a failure") and first_error in check["message"]
            assert "the first to fail is the cause" in check["remediation"]
    else:
        assert parsed["errors"] == []


# The two lines of NVIDIA/nccl#897 (one connection: the sender's side went
# via GDRDMA, the receiver's not), put back into NCCL's line format with two
# hosts and the reverse direction. Written: no whole real log of the case
# was found (real/SOURCES.md, "Not found").
def mixed_log(receiver_plain=True, sender_plain=False):
    sender_flags = "" if sender_plain else "/GDRDMA"
    receiver_flags = "" if receiver_plain else "/GDRDMA"
    return [
        info("node-a", 11, 1, "Channel 00/0 : 9[1] -> 2[2] [send] via NET/IB/0%s" % sender_flags),
        info("node-b", 22, 2, "Channel 00/0 : 9[1] -> 2[2] [receive] via NET/IB/1%s" % receiver_flags),
        info("node-b", 22, 2, "Channel 00/0 : 2[2] -> 9[1] [send] via NET/IB/1/GDRDMA"),
        info("node-a", 11, 1, "Channel 00/0 : 2[2] -> 9[1] [receive] via NET/IB/0/GDRDMA"),
    ]


def test_a_host_receiving_without_gpudirect_fails_naming_it_even_when_others_use_it():
    lines = mixed_log()
    parsed = parse_nccl_log("\n".join(lines))
    assert parsed["gpudirect"] is True
    assert parsed["links_without_gdr"] == [{"host": "node-b", "direction": "receive", "line": lines[1]}]
    check = check_nccl_transport(parsed, "rdma")
    assert check["status"] == "fail"
    assert check["message"] == ('NCCL used IB (RDMA) with GPUDirect RDMA, but not everywhere: node-b (receive) '
                                'without it: "%s"' % lines[1])
    assert "nvidia_peermem" in check["remediation"]
    assert check_nccl_transport(parsed, "rdma", require_gpudirect=False)["status"] == "warn"
    assert check_nccl_transport(parsed, "tcp")["status"] == "pass"


def test_sends_without_gpudirect_are_gpudirect_reads_off_not_a_fault():
    # NCCL_NET_GDR_READ=0: every sender stages through host memory, the
    # receivers write to the GPU directly.
    parsed = parse_nccl_log("\n".join(mixed_log(receiver_plain=False, sender_plain=True)))
    assert parsed["links_without_gdr"] == []
    check = check_nccl_transport(parsed, "rdma")
    assert check["status"] == "pass" and "GDRDMA on 3 of 4 network connection lines" in check["message"]
