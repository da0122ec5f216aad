"""roce_qos and the roce_lossless check: mlnx_qos's output read, NCCL's
priority worked out from NCCL_IB_TC and the port's trust and DSCP map, and
the verdict on the recorded RoCE nodes with PFC and ECN on that priority,
off it, and unknown."""

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.checks import Expectations, run_checks
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_node_facts
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.roce_qos import nccl_priority, parse_mlnx_qos

# mlnx_qos -i as the mlnx_qos documentation (MLNX_OFED 4.2) shows it: DSCP
# trusted, PFC on priorities 0, 2, 6 and 7.
DOCUMENTED = """DCBX mode: OS controlled
Priority trust state: dscp
dscp2prio mapping:
prio:0 dscp:07,06,05,04,03,02,01,00,
prio:1 dscp:15,14,13,12,11,10,09,08,
prio:2 dscp:23,22,21,20,19,18,17,16,
prio:3 dscp:31,30,29,28,27,26,25,24,
prio:4 dscp:39,38,37,36,35,34,33,32,
prio:5 dscp:47,46,45,44,43,42,41,40,
prio:6 dscp:55,54,53,52,51,50,49,48,
prio:7 dscp:63,62,61,60,59,58,57,56,
Cable len: 10
PFC configuration:
priority 0 1 2 3 4 5 6 7
enabled 1 0 1 0 0 0 1 1
tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%
priority: 1
"""


def test_mlnx_qos_output_is_read():
    qos = parse_mlnx_qos(DOCUMENTED)
    assert qos["trust"] == "dscp" and qos["pfc"] == [True, False, True, False, False, False, True, True]
    assert len(qos["dscp2prio"]) == 64 and qos["dscp2prio"][26] == 3 and qos["dscp2prio"][0] == 0
    assert parse_mlnx_qos("Priority trust state: pcp\n") == {"trust": "pcp", "dscp2prio": {}, "pfc": None}
    assert parse_mlnx_qos("mlnx_qos: command not found") is None


@pytest.mark.parametrize("traffic_class, qos, expected", [
    # NCCL_IB_TC=106: DSCP 26 (AF31), priority 3 in the default map.
    (106, None, 3),
    (106, {"trust": "dscp", "dscp2prio": {26: 5}}, 5),
    # Unset: NCCL's default traffic class 0.
    (None, None, 0),
    (41, {"trust": "dscp", "dscp2prio": {}}, 1),
    # A port that trusts PCP: the VLAN's priority, which NCCL does not set.
    (106, {"trust": "pcp", "dscp2prio": {}}, None),
])
def test_nccls_priority(traffic_class, qos, expected):
    assert nccl_priority(traffic_class, qos)[0] == expected


def lossless(snapshot, mode="rdma", nccl_ib_tc=106):
    facts = gather_node_facts(snapshot, topology=False)
    return run_checks(facts, Expectations(mode=mode, nccl_ib_tc=nccl_ib_tc), only=("roce_lossless",))[0]


def test_pfc_and_ecn_on_nccls_priority_pass(snapshot):
    result = lossless(snapshot("roce-lossless"))
    assert result["status"] == "pass"
    assert result["message"] == "PFC and ECN on NCCL's priority on net1, net2, net3, net4"
    assert result["data"]["ports"]["net1"]["mlnx_qos_source"] == "recorded"


def test_nccl_on_another_priority_than_the_lossless_one_is_a_warning(snapshot):
    result = lossless(snapshot("roce-lossless"), nccl_ib_tc=None)
    assert result["status"] == "warn"
    assert result["message"].startswith(
        "NCCL's RoCE priority is not lossless: net1 priority 0: PFC, ECN roce_np, ECN roce_rp off (NCCL_IB_TC=0 "
        "(unset), DSCP 0 -> priority 0 (the port's DSCP map));")
    assert "NCCL_IB_TC" in result["remediation"] and "rx_prio<N>_pause" in result["remediation"]


def test_a_lossy_fabric_is_a_warning_naming_what_is_off(snapshot):
    result = lossless(snapshot("roce-lossy"))
    assert result["status"] == "warn"
    assert "net4 priority 3: PFC, ECN roce_np, ECN roce_rp off (NCCL_IB_TC=106, DSCP 26 -> priority 3" \
        in result["message"]


def test_unknown_or_not_applicable_is_never_a_pass(snapshot):
    assert lossless(snapshot("healthy-roce-h100"))["status"] == "skip"
    assert lossless(snapshot("roce-lossless"), mode="tcp")["status"] == "skip"
    infiniband = lossless(snapshot("infiniband-h100"))
    assert infiniband["status"] == "skip" and "InfiniBand" in infiniband["message"]


def test_the_command_takes_nccls_traffic_class(snapshot):
    from ansible_collections.mlinfra.multinode.plugins.module_utils.node import cli as node_cli
    report = node_cli.node_check_report(root=snapshot("roce-lossless"), nccl_ib_tc=106, checks=["roce_lossless"])
    assert report["checks"][0]["status"] == "pass"
    assert node_cli.traffic_class("106") == 106
    for wrong in ("AF31", "256", "-1"):
        with pytest.raises(Exception, match="NCCL_IB_TC is a traffic class byte, 0 to 255"):
            node_cli.traffic_class(wrong)
