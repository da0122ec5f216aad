"""NCCL auto-detection: each variable set only with evidence, user values win."""

import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.nccl_env import compare_pod_results, compute_nccl_env, \
    find_nccl_version, render_env_file
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.facts import gather_node_facts


def detect(root, **kwargs):
    result = compute_nccl_env(gather_node_facts(root), **kwargs)
    details = dict((d["name"], d) for d in result["details"])
    for detail in details.values():
        assert detail["reason"], detail["name"]
        assert detail["set"] == (detail["value"] is not None)
    return result, details


def test_healthy_roce_with_old_nccl_sets_the_shared_gid_index(snapshot):
    result, details = detect(snapshot("healthy-roce-h100"), nccl_version=(2, 18, 3))
    assert result["transport"] == "rdma"
    assert result["env"] == {"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_GID_INDEX": "3",
                             "GPUS_PER_NODE": "4", "OMP_NUM_THREADS": "32"}
    # Left to NCCL, with the reason.
    assert not details["NCCL_P2P_LEVEL"]["set"] and "NVLink" in details["NCCL_P2P_LEVEL"]["reason"]
    assert not details["NCCL_NET_GDR_LEVEL"]["set"] and "nvidia_peermem" in details["NCCL_NET_GDR_LEVEL"]["reason"]
    assert not details["NCCL_IB_HCA"]["set"] and "all 4" in details["NCCL_IB_HCA"]["reason"]
    assert [p["netdev"] for p in result["rdma_ports"]] == ["net1", "net2", "net3", "net4"]


def test_new_nccl_picks_gids_itself(snapshot):
    result, details = detect(snapshot("healthy-roce-h100"), nccl_version=(2, 21, 5))
    assert "NCCL_IB_GID_INDEX" not in result["env"]
    assert "2.21.5 picks" in details["NCCL_IB_GID_INDEX"]["reason"]


def test_gid_indices_that_differ_are_never_written(snapshot):
    for version in ((2, 18, 3), None):
        result, details = detect(snapshot("roce-gid-mixed"), nccl_version=version)
        assert "NCCL_IB_GID_INDEX" not in result["env"]
        assert "mlx5_10:1=5" in details["NCCL_IB_GID_INDEX"]["reason"]


def test_port_down_is_left_out_of_the_hca_list(snapshot):
    result, details = detect(snapshot("port-down"))
    assert result["env"]["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_11:1"
    assert "mlx5_10:1 is DOWN" in details["NCCL_IB_HCA"]["reason"]


def test_roce_device_without_netdev_in_the_pod_is_left_out(snapshot_copy):
    root = snapshot_copy("healthy-roce-h100")
    os.remove(str(root / "sys/class/net/net4"))
    result, details = detect(str(root))
    assert result["env"]["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_10:1"
    assert "mlx5_11:1 has no netdev" in details["NCCL_IB_HCA"]["reason"]


def test_infiniband_needs_no_gid_index(snapshot):
    result, details = detect(snapshot("infiniband-h100"), nccl_version=(2, 18, 3))
    assert result["transport"] == "rdma"
    assert "NCCL_IB_GID_INDEX" not in result["env"] and "no RoCE" in details["NCCL_IB_GID_INDEX"]["reason"]


def test_tcp_only_node(snapshot):
    result, details = detect(snapshot("tcp-only"))
    assert result["transport"] == "tcp" and result["errors"] == []
    assert "NCCL_IB_DISABLE" not in result["env"]  # nothing to disable
    assert "NCCL_SOCKET_IFNAME" not in result["env"]  # eth0 is the only candidate
    result = detect(snapshot("tcp-only"), mode="rdma")[0]
    assert result["errors"] and "silently fall back to sockets" in result["errors"][0]


def test_tcp_mode_on_an_rdma_node_disables_ib(snapshot):
    result, details = detect(snapshot("healthy-roce-h100"), mode="tcp")
    assert result["transport"] == "tcp"
    assert result["env"]["NCCL_IB_DISABLE"] == "1"
    assert "NCCL_IB_HCA" not in result["env"] and "NCCL_IB_GID_INDEX" not in result["env"]


def test_user_values_win_and_null_removes(snapshot):
    result, details = detect(snapshot("healthy-roce-h100"), nccl_version=(2, 18, 3),
                             overrides={"NCCL_IB_GID_INDEX": "5", "OMP_NUM_THREADS": None, "NCCL_DEBUG": "INFO"})
    assert result["env"]["NCCL_IB_GID_INDEX"] == "5"
    assert "OMP_NUM_THREADS" not in result["env"]
    assert result["env"]["NCCL_DEBUG"] == "INFO"
    assert details["NCCL_IB_GID_INDEX"]["source"] == "user"
    assert "detected: RoCE v2 IPv4 GID at index 3" in details["NCCL_IB_GID_INDEX"]["reason"]


def test_environment_values_are_kept_but_lose_to_the_user(snapshot):
    result, details = detect(snapshot("healthy-roce-h100"), environ={"NCCL_SOCKET_IFNAME": "eth1",
                                                                     "GPUS_PER_NODE": "2"},
                             overrides={"GPUS_PER_NODE": "4"})
    assert result["env"]["NCCL_SOCKET_IFNAME"] == "eth1" and details["NCCL_SOCKET_IFNAME"]["source"] == "environment"
    assert result["env"]["GPUS_PER_NODE"] == "4" and details["GPUS_PER_NODE"]["source"] == "user"


def test_env_file_is_valid_shell(tmp_path, snapshot):
    result = detect(snapshot("port-down"), overrides={"NCCL_DEBUG": "it's INFO"})[0]
    path = tmp_path / "nccl.env"
    path.write_text(render_env_file(result))
    out = os.popen("sh -c '. %s && echo \"$NCCL_IB_HCA|$NCCL_DEBUG|$DETECTED_TRANSPORT\"'" % path).read()
    assert out.strip() == "=mlx5_6:1,mlx5_7:1,mlx5_11:1|it's INFO|rdma"


@pytest.mark.parametrize("name,value,words", [
    ("NCCL_X;touch F;#", "1", "is not an NCCL variable name"),
    ("NCCL_$(touch F)", "1", "is not an NCCL variable name"),
    ("NCCL_X\ntouch F", "1", "is not an NCCL variable name"),
    ("BASH_ENV", "/tmp/x", "is not an NCCL variable name"),
    ("NCCL_DEBUG", "INFO\ntouch F", "holds a line break"),
    ("NCCL_DEBUG", {"a": 1}, "must be text or a number, got a mapping"),
])
def test_an_override_a_shell_could_run_is_refused(snapshot, name, value, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        detect(snapshot("port-down"), overrides={name: value})


def test_an_env_file_is_never_written_with_a_name_a_shell_could_run(snapshot):
    """Defence in depth: a result changed after compute_nccl_env (or made by
    hand) is refused by render_env_file too."""
    result = detect(snapshot("port-down"))[0]
    result["details"].append({"name": "NCCL_X;touch F", "value": "1", "set": True, "source": "user", "reason": ""})
    with pytest.raises(ValueError, match="not written to an env file"):
        render_env_file(result)


def test_find_nccl_version(tmp_path):
    assert find_nccl_version({"NCCL_VERSION": "2.21.5"}, [])[0] == (2, 21, 5)
    (tmp_path / "nvidia_nccl_cu12-2.26.2.dist-info").mkdir()
    version, source = find_nccl_version({"NCCL_VERSION": "2.21.5"}, [str(tmp_path)])
    assert version == (2, 26, 2) and source == "nvidia_nccl_cu12-2.26.2.dist-info"  # the wheel torch loads wins
    assert find_nccl_version({}, [str(tmp_path / "none")])[0] is None


def test_unknown_mode_is_refused(snapshot):
    with pytest.raises(ValueError, match="auto, rdma, tcp"):
        compute_nccl_env(gather_node_facts(snapshot("tcp-only"), topology=False), mode="roce")


def pods_on(snapshot, *snapshot_names, **kwargs):
    """One detection result per pod, pod i on a node recorded as the i-th snapshot."""
    return [{"pod": "h-kim-%d" % index, "node": "node-%s" % name,
             "json": compute_nccl_env(gather_node_facts(snapshot(name)), **kwargs)}
            for index, name in enumerate(snapshot_names)]


def test_pods_on_healthy_nodes_agree(snapshot):
    comparison = compare_pod_results(pods_on(snapshot, "healthy-roce-h100", "healthy-roce-h100", "infiniband-h100",
                                             mode="rdma"))
    assert comparison == {"agree": True, "mismatches": [], "unreadable": []}


def test_a_port_down_makes_a_pod_disagree_on_the_rails(snapshot):
    comparison = compare_pod_results(pods_on(snapshot, "healthy-roce-h100", "port-down", "healthy-roce-h100",
                                             mode="rdma"))
    assert not comparison["agree"]
    (mismatch,) = comparison["mismatches"]
    assert mismatch["field"] == "rdma_ports" and mismatch["level"] == "fail" and mismatch["expected"] == 4
    assert mismatch["odd"] == [{"pod": "h-kim-1", "node": "node-port-down", "value": 3}]
    assert mismatch["message"] == "usable RDMA ports: 4 on 2 pod(s), but 3 on h-kim-1 (node node-port-down)"


def test_missing_gpudirect_is_a_warning_only(snapshot):
    comparison = compare_pod_results(pods_on(snapshot, "no-peermem", "healthy-roce-h100", "healthy-roce-h100",
                                             mode="rdma"))
    assert comparison["agree"]
    (mismatch,) = comparison["mismatches"]
    assert (mismatch["field"], mismatch["level"], mismatch["expected"]) == ("gpudirect", "warn", True)
    assert [entry["pod"] for entry in mismatch["odd"]] == ["h-kim-0"]


def test_auto_mode_on_a_tcp_only_node_disagrees_on_transport(snapshot):
    comparison = compare_pod_results(pods_on(snapshot, "healthy-roce-h100", "tcp-only"))
    fields = dict((m["field"], m) for m in comparison["mismatches"])
    assert not comparison["agree"]
    assert fields["transport"]["expected"] == "rdma"
    assert fields["transport"]["odd"] == [{"pod": "h-kim-1", "node": "node-tcp-only", "value": "tcp"}]


def test_tcp_mode_agrees_whatever_the_nics(snapshot):
    comparison = compare_pod_results(pods_on(snapshot, "healthy-roce-h100", "port-down", "tcp-only", mode="tcp"))
    assert comparison["agree"] and comparison["mismatches"] == []


def test_an_unreadable_pod_is_never_agreement(snapshot):
    pods = pods_on(snapshot, "healthy-roce-h100", "healthy-roce-h100")
    pods[1]["json"] = None
    comparison = compare_pod_results(pods)
    assert comparison == {"agree": False, "mismatches": [], "unreadable": ["h-kim-1"]}


def test_on_a_tie_the_pod_that_lacks_something_is_named(snapshot):
    comparison = compare_pod_results(pods_on(snapshot, "port-down", "no-peermem", mode="rdma"))
    fields = dict((m["field"], m) for m in comparison["mismatches"])
    assert (fields["rdma_ports"]["expected"], [o["pod"] for o in fields["rdma_ports"]["odd"]]) == (4, ["h-kim-0"])
    assert (fields["gpudirect"]["expected"], [o["pod"] for o in fields["gpudirect"]["odd"]]) == (True, ["h-kim-1"])
