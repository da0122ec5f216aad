"""Which named nodes can take a training pod, and the refusal an operator
reads when too few can (the cluster role's node check, before anything is
changed)."""

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.node_choice import (
    doubtful_placements, too_few_nodes, usable_nodes)
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import node_affinity


def node(name, verified=None, date=None, cordoned=False):
    labels = {"kubernetes.io/hostname": name}
    if verified is not None:
        labels["mlinfra.io/rdma-verified"] = verified
    if date:
        labels["mlinfra.io/rdma-verified-date"] = date
    return {"metadata": {"name": name, "labels": labels}, "spec": {"unschedulable": True} if cordoned else {}}


NODES = [node("u09", "true"), node("u11"), node("u16", "false", "2026-11-28"), node("u25", "false", "2026-11-28"),
         node("u36", "true", cordoned=True), node("other", "true")]
NAMED = ["u09", "u11", "u16", "u25", "u36"]


def test_failed_and_cordoned_nodes_take_no_pod_and_unchecked_ones_do():
    found = usable_nodes(NODES, NAMED)
    assert found == {"usable": ["u09", "u11"], "cordoned": ["u36"], "unverified": [],
                     "failed": [{"name": "u16", "date": "2026-11-28"}, {"name": "u25", "date": "2026-11-28"}]}
    # Asked for verified nodes only, the unchecked u11 is left out too.
    strict = usable_nodes(NODES, NAMED, require_verified=True)
    assert strict["usable"] == ["u09"] and strict["unverified"] == ["u11"]
    # A named node the cluster lacks is left to its own check.
    assert usable_nodes(NODES, ["u09", "gone"])["usable"] == ["u09"]


def test_enough_nodes_is_no_refusal():
    assert too_few_nodes(usable_nodes(NODES, NAMED), 2, 5, "local") == ""


def test_the_refusal_names_each_node_left_out_why_and_the_fix():
    message = too_few_nodes(usable_nodes(NODES, NAMED), 6, 5, "local")
    assert message == (
        "replicas=6 but only 2 of the 5 cluster_gpu_nodes can take a pod: u16, u25 failed verify-rdma.yml "
        "(mlinfra.io/rdma-verified=false, 2026-11-28); u36 is cordoned (unschedulable); nothing was changed; fix: "
        "lower replicas (-e replicas=2), or repair the nodes and run ansible-playbook playbooks/verify-rdma.yml -i "
        "inventories/local -e verify_label_nodes=true (it labels the nodes that pass), or uncordon a node once "
        "repaired (kubectl uncordon NODE)")
    strict = too_few_nodes(usable_nodes(NODES, ["u11", "u16"], require_verified=True), 1, 2, "moc")
    assert strict.startswith(
        "replicas=1 but only 0 of the 2 cluster_gpu_nodes can take a pod: u16 failed verify-rdma.yml "
        "(mlinfra.io/rdma-verified=false, 2026-11-28); u11 is not labelled mlinfra.io/rdma-verified=true, which "
        "statefulset_require_verified_nodes asks for; nothing was changed; fix: name other nodes, or repair")


def test_the_statefulset_s_affinity_keeps_pods_off_the_same_nodes():
    """The affinity the scheduler applies and the check above agree: by
    default a node labelled false is excluded and an unlabelled one is not."""
    def expressions(**settings):
        affinity = node_affinity(dict({"cluster_gpu_nodes": NAMED}, **settings))
        return affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]

    default = expressions(statefulset_require_verified_nodes=False)
    assert {"key": "mlinfra.io/rdma-verified", "operator": "NotIn", "values": ["false"]} in default
    strict = expressions(statefulset_require_verified_nodes=True)
    assert {"key": "mlinfra.io/rdma-verified", "operator": "In", "values": ["true"]} in strict
    assert not any(item["operator"] == "NotIn" for item in strict)


def test_a_pod_on_a_failed_or_long_unchecked_node_is_named():
    placed = [{"pod": "h-kim-1", "node": "u16"}, {"pod": "h-kim-0", "node": "u09"}, {"pod": "h-kim-2", "node": "u11"},
              {"pod": "h-kim-3", "node": "old"}, {"pod": "h-kim-4", "node": None},
              # A pod object as k8s_info gives it.
              {"metadata": {"name": "h-kim-5"}, "spec": {"nodeName": "u25"}}]
    nodes = NODES + [node("old", "true", "2026-11-01"), node("u09", "true", "2026-11-27")]
    warnings = doubtful_placements(placed, nodes, "2026-11-28", 7, "local")
    # Sorted by pod; u09 (passed yesterday) and u11 (never checked) say nothing.
    assert warnings == [
        "h-kim-1 runs on u16, which verify-rdma.yml failed on 2026-11-28 (mlinfra.io/rdma-verified=false); it stays "
        "there until deleted: fix the node, or delete the pod once no run needs it (kubectl delete pod) to move it to a "
        "node that passed",
        "h-kim-3 runs on old, last verified 2026-11-01 (27 days ago, more than cluster_verification_max_age=7); check "
        "it again: ansible-playbook playbooks/verify-rdma.yml -i inventories/local -e verify_label_nodes=true",
        "h-kim-5 runs on u25, which verify-rdma.yml failed on 2026-11-28 (mlinfra.io/rdma-verified=false); it stays "
        "there until deleted: fix the node, or delete the pod once no run needs it (kubectl delete pod) to move it to a "
        "node that passed"]
    # 0 leaves the age alone; a failed node is named whatever the age setting.
    assert [line.split(",")[0] for line in doubtful_placements(placed, nodes, "2026-11-28", 0, "local")] == [
        "h-kim-1 runs on u16", "h-kim-5 runs on u25"]
    # On the day the age is reached, not yet.
    assert doubtful_placements(placed, nodes, "2026-11-08", 7, "local") == [warnings[0], warnings[2]]
