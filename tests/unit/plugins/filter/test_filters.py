"""The collection's filters, called as Ansible calls them (their FilterModule)."""

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.filter.nccl_agreement import FilterModule as AgreementFilters
from ansible_collections.mlinfra.multinode.plugins.filter.nodes_short import FilterModule as ShortFilters
from ansible_collections.mlinfra.multinode.plugins.module_utils.common.quantity import parse_quantity
from ansible_collections.mlinfra.multinode.plugins.filter.text_table import FilterModule as TableFilters

text_table = TableFilters().filters()["text_table"]
nccl_agreement = AgreementFilters().filters()["nccl_agreement"]
nodes_short = ShortFilters().filters()["nodes_short"]


def resources_short(allocatable, wanted):
    """What one node lacks, through the filter: the short list of the refusal."""
    refusal = nodes_short([{"metadata": {"name": "n"}, "status": {"allocatable": allocatable}}], ["n"], wanted, {})
    return re.findall(r"\S+ \(wants [^)]*\)", refusal.split("; fix: ", 1)[0])


def test_text_table_aligns_columns_and_shows_null_as_dash():
    lines = text_table([["h-kim-0", "node-long-name", 4], ["h-kim-10", None, 3]], ["POD", "NODE", "PORTS"])
    assert lines == [
        "POD       NODE            PORTS",
        "h-kim-0   node-long-name  4",
        "h-kim-10  -               3",
    ]


def test_text_table_refuses_a_short_row():
    with pytest.raises(AnsibleFilterError, match="every row needs 2 cells"):
        text_table([["only-one"]], ["POD", "NODE"])


def test_nccl_agreement_refuses_what_is_not_a_pod_list():
    with pytest.raises(AnsibleFilterError, match="list of {pod, node, json}"):
        nccl_agreement({"pod": "h-kim-0"})


def test_nccl_agreement_names_the_odd_pod():
    def result(transport, ports):
        return {"transport": transport, "rdma_ports": [{"device": "mlx5_%d" % i} for i in range(ports)],
                "gpus": 4, "gpudirect": True, "nccl_version": "2.21.5"}
    comparison = nccl_agreement([{"pod": "p-0", "node": "a", "json": result("rdma", 4)},
                                 {"pod": "p-1", "node": "b", "json": result("rdma", 4)},
                                 {"pod": "p-2", "node": "c", "json": result("tcp", 4)}])
    assert not comparison["agree"]
    assert [(m["field"], [o["pod"] for o in m["odd"]]) for m in comparison["mismatches"]] == [
        ("transport", ["p-2"]), ("rdma_ports", ["p-2"])]


def test_resources_short_lists_what_a_node_lacks():
    allocatable = {"nvidia.com/gpu": "4", "openshift.io/eno5np0rdma": "0"}
    wanted = {"nvidia.com/gpu": 8, "openshift.io/eno5np0rdma": 1, "openshift.io/eno6np0rdma": 1}
    assert resources_short(allocatable, wanted) == [
        "nvidia.com/gpu (wants 8, has 4)", "openshift.io/eno5np0rdma (wants 1, has 0)",
        "openshift.io/eno6np0rdma (wants 1, has 0)"]
    assert resources_short(allocatable, {"nvidia.com/gpu": 4}) == []


def test_resources_short_compares_cpu_and_memory_as_quantities():
    # A GPU node of the local cluster (inventories/local, profile h100-sriov).
    allocatable = {"cpu": "64", "memory": "1055315188Ki", "nvidia.com/gpu": "4"}
    assert resources_short(allocatable, {"cpu": "32", "memory": "256Gi"}) == []
    assert resources_short(allocatable, {"cpu": "64500m", "memory": "1Ei"}) == [
        "cpu (wants 64500m, has 64)", "memory (wants 1Ei, has 1055315188Ki)"]
    # The infra node's CPUs are 31500m: 32 do not fit, 31.5 do.
    assert resources_short({"cpu": "31500m"}, {"cpu": "32"}) == ["cpu (wants 32, has 31500m)"]
    assert resources_short({"cpu": "31500m"}, {"cpu": "31.5"}) == []
    with pytest.raises(AnsibleFilterError, match="whole number or a Kubernetes quantity, got 'lots'"):
        resources_short(allocatable, {"memory": "lots"})


def test_nodes_short_groups_the_nodes_that_lack_the_same_and_names_the_variables():
    def node(name, gpus, memory="1055315188Ki"):
        return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": gpus, "memory": memory}}}
    nodes = [node("a", "4"), node("b", "4"), node("c", "8"), node("d", "4", "64Gi"), node("cordoned", "0")]
    asked_by = {"nvidia.com/gpu": "cluster_gpus_per_node", "memory": "cluster_pod_memory"}
    wanted = {"nvidia.com/gpu": 8, "memory": "256Gi", "openshift.io/rdma": 1}
    refusal = nodes_short(nodes, ["a", "b", "c", "d"], wanted, asked_by)
    assert refusal == (
        "named nodes cannot host a pod (nothing was changed): "
        "nodes a, b: nvidia.com/gpu (wants 8, has 4), openshift.io/rdma (wants 1, has 0); fix: lower "
        "cluster_gpus_per_node to what the nodes can allocate, or check the device plugins that offer the rest (the "
        "GPU operator, the SR-IOV device plugin and the sriov role's policies), or take the nodes out of "
        "cluster_gpu_nodes; "
        "node c: openshift.io/rdma (wants 1, has 0); fix: check the device plugins that offer the rest (the GPU "
        "operator, the SR-IOV device plugin and the sriov role's policies), or take the node out of "
        "cluster_gpu_nodes; "
        "node d: memory (wants 256Gi, has 64Gi), nvidia.com/gpu (wants 8, has 4), openshift.io/rdma (wants 1, has 0); "
        "fix: lower cluster_gpus_per_node, cluster_pod_memory to what the node can allocate, or check the device "
        "plugins that offer the rest (the GPU operator, the SR-IOV device plugin and the sriov role's policies), or "
        "take the node out of cluster_gpu_nodes")
    assert nodes_short(nodes, ["c"], {"nvidia.com/gpu": 8}, asked_by) == ""


@pytest.mark.parametrize("text, value", [
    ("32", 32.0), ("500m", 0.5), ("256Gi", 256 * 2.0 ** 30), ("1055315188Ki", 1055315188 * 1024.0),
    ("1e3", 1000.0), ("1.5G", 1.5e9), ("1Ei", 2.0 ** 60), (8, 8.0),
    ("lots", None), ("10 Gi", None), ("1e3Gi", None), ("", None), (True, None),
])
def test_kubernetes_quantities(text, value):
    assert parse_quantity(text) == value


def test_a_job_mode_failure_names_the_pod_its_operator_deleted_before_its_log_was_read():
    """Volcano's TerminateJob deletes the pods still Running when the first
    one fails: when the failing rank's pod is among them, its log is gone and
    the pod left shows only the echo; the message names the deleted one."""
    from ansible_collections.mlinfra.multinode.plugins.filter.train_failure_line import FilterModule as FailureFilters
    from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.train_jobs import pod_endings, pod_states
    failure_line = FailureFilters().filters()["train_failure_line"]

    def pod(index, phase, exit_code=None):
        terminated = {"terminated": {"exitCode": exit_code, "reason": "Error"}} if exit_code is not None else {}
        return {"metadata": {"name": "v-worker-%d" % index, "uid": "u%d" % index,
                             "labels": {"volcano.sh/task-index": str(index)}},
                "spec": {"nodeName": "n%d" % index},
                "status": {"phase": phase, "containerStatuses": [{"name": "trainer", "state": terminated}]}}
    running = [pod(0, "Running"), pod(1, "Running")]
    left = [pod(0, "Failed", 1)]
    logs = {"v-worker-0": "[rank0]: RuntimeError: Connection closed by peer"}
    statuses = pod_endings(pod_states(left, "volcano"), logs)
    line = failure_line(statuses, run_id="v", state="failed", pod_logs=[{"pod": "v-worker-0", "stdout": logs["v-worker-0"]}],
                        logs_dir="/l/v", note="its operator said Volcano Job Terminated;", pods_then=running,
                        pods_now=left)
    assert line == ("run v failed: its operator said Volcano Job Terminated; pod v-worker-1 was deleted while the run "
                    "ran and is not back; v-worker-0 (rank 0) failed (exit status 1): Error; last lines of v-worker-0: "
                    "[rank0]: RuntimeError: Connection closed by peer; logs: /l/v/")
    # Without the run's earlier pods, nothing is said of the deleted one.
    assert "v-worker-1" not in failure_line(statuses, run_id="v", state="failed", pod_logs=[], logs_dir="/l/v")
