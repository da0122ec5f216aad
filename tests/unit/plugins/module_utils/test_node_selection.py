"""GPU nodes chosen by label (cluster_gpu_node_selector): the selector's
syntax, the scheduler's toleration rule, and what the play says it chose
and left out, on nodes as the local cluster's inventory describes them."""

import copy

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.common.labels import parse_selector
from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import check_settings
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.node_selection import (
    select_gpu_nodes, tolerates, untolerated_taints)
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import node_affinity

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
WANTED = {"nvidia.com/gpu": 4, "openshift.io/eno5np0rdma": 1}


def gpu_node(name, gpus="4", taints=(GPU_TAINT,), cordoned=False, rdma="8"):
    allocatable = {"cpu": "64", "memory": "1055315188Ki", "nvidia.com/gpu": gpus}
    if rdma:
        allocatable["openshift.io/eno5np0rdma"] = rdma
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
            "spec": {"taints": [dict(taint) for taint in taints], "unschedulable": cordoned},
            "status": {"allocatable": allocatable}}


@pytest.mark.parametrize("selector, expressions", [
    ("nvidia.com/gpu.present=true", [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]),
    ("pool==a100, tier!=spare", [{"key": "pool", "operator": "In", "values": ["a100"]},
                                 {"key": "tier", "operator": "NotIn", "values": ["spare"]}]),
    ("pool in (a, b),zone notin (z1)", [{"key": "pool", "operator": "In", "values": ["a", "b"]},
                                        {"key": "zone", "operator": "NotIn", "values": ["z1"]}]),
    ("feature.node.kubernetes.io/rdma.capable,!node-role.kubernetes.io/infra",
     [{"key": "feature.node.kubernetes.io/rdma.capable", "operator": "Exists"},
      {"key": "node-role.kubernetes.io/infra", "operator": "DoesNotExist"}]),
    ("nvidia.com/gpu.count>3", [{"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["3"]}]),
    ("", []),
])
def test_a_selector_reads_as_the_match_expressions_of_a_node_affinity(selector, expressions):
    assert parse_selector(selector) == expressions


@pytest.mark.parametrize("selector, named", [
    ("nvidia.com/gpu.present=true,", "empty requirement"),
    ("gpu present=true", "'gpu present=true' is not a label key"),
    ("pool=a b", "is not a label value"),
    ("pool in ()", "the set of values is empty"),
    ("nvidia.com/gpu.count>three", "must be a whole number"),
    ("-bad=1", "is not a label key"),
])
def test_a_malformed_selector_is_refused_naming_the_requirement(selector, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        parse_selector(selector)


def test_tolerations_follow_the_schedulers_rule():
    assert tolerates(GPU_TOLERATION, GPU_TAINT)
    assert tolerates({"operator": "Exists"}, GPU_TAINT)
    assert tolerates({"key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT)
    assert not tolerates({"key": "nvidia.com/gpu", "value": "absent"}, GPU_TAINT)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT)
    node = gpu_node("u09", taints=(GPU_TAINT, {"key": "repair", "effect": "NoExecute"},
                                   {"key": "soft", "effect": "PreferNoSchedule"},
                                   {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}))
    # PreferNoSchedule keeps no pod off; the cordon's taint is said as cordoned.
    assert untolerated_taints(node, [GPU_TOLERATION]) == ["repair:NoExecute"]


def test_the_selection_says_what_it_chose_and_why_each_other_node_was_left_out():
    nodes = [gpu_node("u12"), gpu_node("u09"), gpu_node("u11", cordoned=True), gpu_node("u16", gpus="2"),
             gpu_node("u25", taints=(GPU_TAINT, {"key": "nvidia.com/gpu.xid", "value": "79", "effect": "NoSchedule"})),
             gpu_node("u36"), gpu_node("u40", rdma="")]
    found = select_gpu_nodes(nodes, "nvidia.com/gpu.present=true", ["u36"], [GPU_TOLERATION], WANTED)
    assert found["chosen"] == ["u09", "u12"]
    assert found["refusal"] == ""
    assert {entry["name"]: entry["why"] for entry in found["left_out"]} == {
        "u11": "cordoned (unschedulable)",
        "u16": "offers too little: nvidia.com/gpu (wants 4, has 2)",
        "u25": "tainted nvidia.com/gpu.xid=79:NoSchedule, which cluster_node_tolerations does not tolerate",
        "u36": "named in cluster_gpu_nodes_exclude",
        "u40": "offers too little: openshift.io/eno5np0rdma (wants 1, has 0)",
    }
    assert found["line"] == (
        "cluster_gpu_node_selector 'nvidia.com/gpu.present=true' matched 7 nodes; chose 2: u09, u12; left out 5: "
        "u11 (cordoned (unschedulable)); u16 (offers too little: nvidia.com/gpu (wants 4, has 2)); "
        "u25 (tainted nvidia.com/gpu.xid=79:NoSchedule, which cluster_node_tolerations does not tolerate); "
        "u36 (named in cluster_gpu_nodes_exclude); u40 (offers too little: openshift.io/eno5np0rdma (wants 1, has 0))")


def test_many_nodes_left_out_for_one_reason_are_one_group_and_the_line_stays_short():
    nodes = [gpu_node("n%03d" % index, cordoned=index % 2 == 1) for index in range(256)]
    found = select_gpu_nodes(nodes, "pool=a", (), [GPU_TOLERATION], WANTED)
    assert len(found["chosen"]) == 128 and len(found["left_out"]) == 128
    assert "chose 128: n000, n002, n004, n006, n008, n010, n012, n014 and 120 more" in found["line"]
    assert found["line"].endswith("left out 128: n001, n003, n005, n007, n009, n011, n013, n015 and 120 more "
                                  "(cordoned (unschedulable))")
    assert len(found["line"]) < 300


def test_no_node_matched_or_left_is_a_refusal_naming_the_fix():
    found = select_gpu_nodes([], "pool=gone")
    assert found["chosen"] == []
    assert found["refusal"] == (
        "cluster_gpu_node_selector 'pool=gone' matches no node; nothing was changed; fix: label the GPU nodes "
        "(kubectl label node NODE KEY=VALUE) or correct cluster_gpu_node_selector; kubectl get nodes -l 'pool=gone' "
        "lists what it matches")
    untolerated = select_gpu_nodes([gpu_node("u09")], "pool=a", wanted=WANTED)
    assert untolerated["refusal"].startswith("cluster_gpu_node_selector 'pool=a' matched 1 node; chose 0; left out 1: "
                                             "u09 (tainted nvidia.com/gpu=present:NoSchedule")
    assert "tolerate the taint in cluster_node_tolerations" in untolerated["refusal"]


def settings(**given):
    base = {"cluster_gpu_nodes": [], "cluster_gpu_node_selector": "", "cluster_gpu_nodes_exclude": [], "replicas": 2}
    base.update(given)
    return check_settings(base)


def messages(found):
    return [error["message"] for error in found["errors"]]


def test_the_nodes_are_named_or_selected_never_both_nor_neither():
    assert messages(settings(cluster_gpu_node_selector="nvidia.com/gpu.present=true")) == []
    assert messages(settings(cluster_gpu_nodes=["u09", "u11"])) == []
    both = messages(settings(cluster_gpu_nodes=["u09", "u11"], cluster_gpu_node_selector="pool=a"))
    assert len(both) == 1 and both[0].startswith("cluster_gpu_nodes")
    assert "give one of the two" in both[0] and "cluster_gpu_node_selector=''" in both[0]
    neither = messages(settings())
    assert len(neither) == 1 and "cluster_gpu_node_selector (e.g. nvidia.com/gpu.present=true)" in neither[0]
    excluded = messages(settings(cluster_gpu_nodes=["u09", "u11"], cluster_gpu_nodes_exclude=["u09"]))
    assert len(excluded) == 1 and excluded[0].startswith("cluster_gpu_nodes_exclude")
    # replicas is held to a named list here, to a selection once it is made.
    assert messages(settings(cluster_gpu_node_selector="pool=a", replicas=300)) == []
    assert "replicas=3 but only 2" in messages(settings(cluster_gpu_nodes=["u09", "u11"], replicas=3))[0]


def test_a_malformed_selector_is_refused_with_the_variable_and_the_fix():
    refused = messages(settings(cluster_gpu_node_selector="pool in (a,b"))
    assert len(refused) == 1 and refused[0].startswith("cluster_gpu_node_selector")
    assert "kubectl get nodes -l" in refused[0]


def test_manifests_written_without_a_cluster_select_the_nodes_by_the_selector():
    written = {"cluster_gpu_nodes": [], "cluster_gpu_node_selector": "pool in (a,b),!repair",
               "statefulset_require_verified_nodes": False}
    expressions = node_affinity(written)["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"]
    assert expressions == [{"key": "pool", "operator": "In", "values": ["a", "b"]},
                           {"key": "repair", "operator": "DoesNotExist"},
                           {"key": "mlinfra.io/rdma-verified", "operator": "NotIn", "values": ["false"]}]
    chosen = dict(copy.deepcopy(written), cluster_gpu_nodes=["u09"])
    assert node_affinity(chosen)["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"][0] == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["u09"]}
