"""Verdicts of the node checks on each recorded node, in rdma and tcp mode."""

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.checks import CHECK_NAMES, POD_CHECK_NAMES, \
    Expectations, failed, run_checks, summarize
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_node_facts


def verdicts(root, **expect):
    results = run_checks(gather_node_facts(root), Expectations(**expect))
    assert [r["name"] for r in results] == list(CHECK_NAMES)
    for result in results:
        assert set(result) == {"name", "status", "message", "remediation", "data", "not_applicable"}
        assert result["not_applicable"] is False or result["status"] == "skip"
        assert result["status"] in ("pass", "warn", "fail", "skip")
        assert result["message"]
        if result["status"] in ("fail", "warn"):
            assert result["remediation"], "%s %s has no remediation" % (result["name"], result["status"])
    return dict((r["name"], r) for r in results)


RDMA = dict(mode="rdma", gpus=4, rdma_devices=4)


def test_healthy_roce_node_passes_everything(snapshot):
    results = verdicts(snapshot("healthy-roce-h100"), min_link_rate_gbps=400, **RDMA)
    # Its ports' PFC and ECN were not recorded: not known, so not passed.
    assert {name: r["status"] for name, r in results.items()} == dict(dict.fromkeys(CHECK_NAMES, "pass"),
                                                                      roce_lossless="skip")
    assert results["roce_lossless"]["message"].startswith(
        "lossless settings not known: net1 priority 0: PFC (no mlnx_qos output: none recorded, and not run for "
        "a root other than /), ECN roce_np, ECN roce_rp not readable")
    assert results["roce_gid"]["data"]["indices"] == [3]


@pytest.mark.parametrize("name,check,words", [
    ("iommu-off", "iommu_passthrough", "IOMMU translates DMA"),
    ("no-peermem", "gpudirect_rdma", "nvidia_peermem is not loaded"),
    ("port-down", "rdma_link", "mlx5_10/1 DOWN (Disabled)"),
    ("memlock-limited", "memlock", "8388608"),
    ("acs-redirect", "pcie_acs", "ACS redirects"),
])
def test_each_faulty_node_fails_exactly_its_check(snapshot, name, check, words):
    results = verdicts(snapshot(name), **RDMA)
    failing = [n for n, r in results.items() if r["status"] == "fail"]
    assert failing == [check]
    assert words in results[check]["message"]


def test_faults_are_warnings_or_skips_in_tcp_mode(snapshot):
    for name in ("iommu-off", "port-down", "memlock-limited", "acs-redirect"):
        results = verdicts(snapshot(name), mode="tcp", gpus=4)
        assert not [n for n, r in results.items() if r["status"] == "fail"], name
    assert verdicts(snapshot("port-down"), mode="tcp")["rdma_link"]["status"] == "warn"
    assert verdicts(snapshot("no-peermem"), mode="tcp")["gpudirect_rdma"]["status"] == "skip"


def test_gpudirect_can_be_a_warning_only(snapshot):
    results = verdicts(snapshot("no-peermem"), require_gpudirect=False, **RDMA)
    assert results["gpudirect_rdma"]["status"] == "warn"


def test_infiniband_node(snapshot):
    results = verdicts(snapshot("infiniband-h100"), **RDMA)
    assert results["rdma_link"]["status"] == "pass" and "InfiniBand" in results["rdma_link"]["message"]
    assert results["roce_gid"]["status"] == "skip" and results["mtu"]["status"] == "skip"


def test_roce_gid_indices_that_differ_are_reported(snapshot):
    results = verdicts(snapshot("roce-gid-mixed"), **RDMA)
    assert results["roce_gid"]["status"] == "pass"
    assert results["roce_gid"]["data"]["indices"] == [3, 5]
    assert results["roce_gid"]["data"]["consistent"] is False
    assert "mlx5_10(net3)=5" in results["roce_gid"]["message"]


def test_tcp_only_node(snapshot):
    rdma = verdicts(snapshot("tcp-only"), **RDMA)
    assert {n for n, r in rdma.items() if r["status"] == "fail"} == {"mlx5_driver", "gpudirect_rdma", "rdma_devices"}
    tcp = verdicts(snapshot("tcp-only"), mode="tcp", gpus=4)
    assert {n: r["status"] for n, r in tcp.items()} == {
        "iommu_passthrough": "pass", "mlx5_driver": "pass", "gpudirect_rdma": "skip", "rdma_devices": "skip",
        "rdma_link": "skip", "roce_gid": "skip", "memlock": "pass", "gpu_count": "pass",
        "nvlink_topology": "pass", "pcie_acs": "pass", "mtu": "skip", "roce_lossless": "skip", "gpu_nic_rails": "skip",
        "kubelet_topology": "pass"}


def test_expectations_change_the_verdict(snapshot):
    assert verdicts(snapshot("healthy-roce-h100"), mode="rdma", gpus=8)["gpu_count"]["status"] == "fail"
    assert verdicts(snapshot("healthy-roce-h100"), mode="rdma", rdma_devices=8)["rdma_devices"]["status"] == "fail"
    slow = verdicts(snapshot("healthy-roce-h100"), mode="rdma", min_link_rate_gbps=800)["rdma_link"]
    assert slow["status"] == "fail" and "below 800" in slow["message"]
    mtu = verdicts(snapshot("healthy-roce-h100"), mode="rdma", min_mtu=9216)["mtu"]
    assert mtu["status"] == "warn"


def test_a_node_may_hold_more_gpus_than_a_pod_asks_for(snapshot):
    # The node probe asks for at least the pods' GPUs (min_gpus); a pod,
    # which sees only what it asked for, for exactly that many (gpus).
    node = snapshot("healthy-roce-h100")
    assert verdicts(node, mode="rdma", min_gpus=4)["gpu_count"]["status"] == "pass"
    assert verdicts(node, mode="rdma", min_gpus=2)["gpu_count"]["status"] == "pass"
    assert verdicts(node, mode="rdma", gpus=2)["gpu_count"]["status"] == "fail"
    short = verdicts(node, mode="rdma", min_gpus=8)["gpu_count"]
    assert short["status"] == "fail" and short["message"] == "4 GPU(s), expected at least 8"
    assert "nvidia-smi" in short["remediation"]
    with pytest.raises(ValueError, match="not both"):
        Expectations(gpus=4, min_gpus=4)


def test_broken_node_gives_verdicts_not_tracebacks(snapshot):
    results = verdicts(snapshot("broken"), **RDMA)
    assert results["memlock"]["status"] == "skip"
    assert results["rdma_link"]["status"] == "fail"
    assert "state unknown" in results["rdma_link"]["message"]
    assert results["nvlink_topology"]["status"] == "skip"


def test_a_check_that_raises_becomes_a_failure(snapshot):
    facts = gather_node_facts(snapshot("healthy-roce-h100"), topology=False)
    del facts["memlock"]["soft"]
    results = dict((r["name"], r) for r in run_checks(facts, Expectations()))
    assert results["memlock"]["status"] == "fail"
    assert "KeyError" in results["memlock"]["message"]
    assert results["gpu_count"]["status"] == "pass"


def test_fail_on_levels():
    results = [{"name": "a", "status": "warn"}, {"name": "b", "status": "fail"}, {"name": "c", "status": "pass"}]
    assert [r["name"] for r in failed(results, "fail")] == ["b"]
    assert [r["name"] for r in failed(results, "warn")] == ["a", "b"]
    assert failed(results, "never") == []
    assert summarize(results) == {"pass": 1, "warn": 1, "fail": 1, "skip": 0, "total": 3}


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of rdma, tcp"):
        Expectations(mode="infiniband")


def pod_verdicts(root, **expect):
    results = run_checks(gather_node_facts(str(root)), Expectations(**expect), in_pod=True)
    assert [r["name"] for r in results] == list(CHECK_NAMES + POD_CHECK_NAMES)
    return dict((r["name"], r) for r in results)


def set_status(root, capeff):
    (root / "proc" / "self" / "status").write_text("Name:\tpython3\nCapEff:\t%s\n" % capeff)


def test_pod_checks_run_only_in_a_pod(snapshot):
    results = run_checks(gather_node_facts(snapshot("healthy-roce-h100")), Expectations(**RDMA))
    assert not set(POD_CHECK_NAMES) & {r["name"] for r in results}


@pytest.mark.parametrize("capeff,status", [
    ("00000000a80425fb", "fail"),     # a restricted pod's default set: no IPC_LOCK (bit 14)
    ("00000000a80465fb", "pass"),     # the same with IPC_LOCK added
    ("000001ffffffffff", "pass"),     # privileged
])
def test_ipc_lock_is_read_from_the_effective_capabilities(snapshot_copy, capeff, status):
    root = snapshot_copy("memlock-limited")
    set_status(root, capeff)
    result = pod_verdicts(root, **RDMA)["ipc_lock"]
    assert result["status"] == status, result
    assert result["data"]["effective"] == capeff
    if status == "fail":
        assert "memlock is limited" in result["message"] and "IPC_LOCK" in result["remediation"]


def test_missing_ipc_lock_is_a_warning_when_memlock_is_unlimited(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    set_status(root, "00000000a80425fb")
    assert pod_verdicts(root, **RDMA)["ipc_lock"]["status"] == "warn"
    assert pod_verdicts(root, mode="tcp")["ipc_lock"]["status"] == "warn"


def test_unknown_capabilities_are_skipped_not_passed(snapshot):
    result = pod_verdicts(snapshot("healthy-roce-h100"), **RDMA)["ipc_lock"]
    assert result["status"] == "skip" and result["data"]["effective"] is None


def test_dev_infiniband_needs_uverbs_devices_in_rdma_mode(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    results = pod_verdicts(root, **RDMA)
    assert results["dev_infiniband"]["status"] == "pass"
    assert results["dev_infiniband"]["data"]["entries"] == ["rdma_cm", "uverbs0", "uverbs1", "uverbs2", "uverbs3"]
    for name in ("uverbs0", "uverbs1", "uverbs2", "uverbs3"):
        (root / "dev" / "infiniband" / name).unlink()
    result = pod_verdicts(root, **RDMA)["dev_infiniband"]
    assert result["status"] == "fail" and "no uverbs device (rdma_cm)" in result["message"]
    (root / "dev" / "infiniband" / "rdma_cm").unlink()
    (root / "dev" / "infiniband").rmdir()
    result = pod_verdicts(root, **RDMA)["dev_infiniband"]
    assert result["status"] == "fail" and "/dev/infiniband is missing" in result["message"]
    assert "RDMA resources" in result["remediation"]
    assert pod_verdicts(root, mode="tcp")["dev_infiniband"]["status"] == "skip"
