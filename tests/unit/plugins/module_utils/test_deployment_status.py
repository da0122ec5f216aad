"""What status.yml shows (plugins/module_utils/report/deployment_status.py):
the table of the pods and what each detected, the lines below it and the one
line it ends with, from objects shaped as the API gives them.
tests/integration/test_deploy.py reads the same on the local cluster."""

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.deployment_status import deployment_status


def statefulset(ready, replicas):
    return {"metadata": {"name": "h-kim"}, "spec": {"replicas": replicas}, "status": {"readyReplicas": ready}}


def pod(name, node=None, phase="Running", ready=True, image="registry/trainer:1"):
    return {"metadata": {"name": name},
            "spec": dict({"containers": [{"name": "trainer", "image": image}]}, **({"nodeName": node} if node else {})),
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def named(name, node=None):
    return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}


DETECTED = [
    {"pod": "h-kim-0", "json": {"transport": "rdma", "rdma_ports": ["mlx5_0/1", "mlx5_1/1"], "gpus": 8, "gpudirect": True,
                                "env": {"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "NCCL_IB_GID_INDEX": "3", "OMP_NUM_THREADS": "8"}}},
    {"pod": "h-kim-1", "json": None},
]


def test_a_deployment_is_a_table_of_its_pods_and_what_each_detected():
    shown = deployment_status("ml", "h-kim", "moc", [statefulset(1, 2)],
                              [pod("h-kim-1", phase="Pending", ready=False), pod("h-kim-0", "gpu-a")],
                              [named("workspace-h-kim-0")], [], DETECTED, {"agree": True, "mismatches": []})
    assert shown["lines"] == [
        "StatefulSet ml/h-kim: 1 of 2 pod(s) Ready",
        "POD      NODE           STATE          IMAGE               TRANSPORT  RDMA-PORTS  GPUS  GPUDIRECT",
        "h-kim-0  gpu-a          Running/Ready  registry/trainer:1  rdma       2           8     yes",
        "h-kim-1  (unscheduled)  Pending        registry/trainer:1  -          -           -     -",
        # OMP_NUM_THREADS follows from the columns; the NCCL variables, sorted.
        "h-kim-0: NCCL_IB_GID_INDEX=3 NCCL_IB_HCA==mlx5_0,mlx5_1",
        "workspace claims: workspace-h-kim-0",
        "privileged probe pods: none",
    ]
    assert shown["summary"] == "StatefulSet ml/h-kim: 1 of 2 pod(s) Ready; 0 privileged probe pod(s) left"


def test_nothing_deployed_names_the_command_and_the_probes_left_behind():
    shown = deployment_status("ml", "h-kim", "moc", [], [], [], [named("h-kim-probe-1", "gpu-b"), named("h-kim-probe-0")],
                              [], None)
    assert shown["lines"] == [
        "StatefulSet ml/h-kim: not deployed (ansible-playbook playbooks/deploy.yml -i inventories/moc)",
        "workspace claims: none",
        "privileged probe pods: h-kim-probe-0 on (unscheduled), h-kim-probe-1 on gpu-b (verify-rdma.yml or soak.yml "
        "runs, or was interrupted; teardown.yml deletes them)",
    ]
    assert shown["summary"] == ("StatefulSet ml/h-kim: not deployed (ansible-playbook playbooks/deploy.yml -i "
                                "inventories/moc); 2 privileged probe pod(s) left")


def test_pods_that_differ_are_named_below_the_table_and_in_the_last_line():
    agreement = {"agree": False, "mismatches": [
        {"field": "transport", "level": "fail", "message": "transport: h-kim-0 rdma, h-kim-1 tcp"},
        {"field": "gpus", "level": "warn", "message": "gpus: h-kim-0 8, h-kim-1 4"}]}
    shown = deployment_status("ml", "h-kim", "moc", [statefulset(2, 2)], [pod("h-kim-0", "a"), pod("h-kim-1", "b")],
                              [], [], [], agreement)
    assert shown["lines"][-2:] == ["pods differ: transport: h-kim-0 rdma, h-kim-1 tcp",
                                   "pods differ: gpus: h-kim-0 8, h-kim-1 4"]
    assert shown["summary"] == ("StatefulSet ml/h-kim: 2 of 2 pod(s) Ready; the pods differ in transport, gpus; "
                                "0 privileged probe pod(s) left")
    # Without pods there is nothing to differ.
    gone = deployment_status("ml", "h-kim", "moc", [statefulset(0, 0)], [], [], [], [], agreement)
    assert not [line for line in gone["lines"] if line.startswith("pods differ")]
    assert gone["summary"] == "StatefulSet ml/h-kim: 0 of 0 pod(s) Ready; 0 privileged probe pod(s) left"


def test_teardown_names_the_claims_it_kept_with_their_sizes_and_how_to_delete_them():
    from ansible_collections.mlinfra.multinode.plugins.module_utils.report.deployment_status import claims_line
    claims = [{"metadata": {"name": "workspace-h-kim-1"}, "spec": {"resources": {"requests": {"storage": "100Gi"}}}},
              {"metadata": {"name": "workspace-h-kim-0"}, "spec": {}}]
    assert claims_line("ml", claims, False) == (
        "kept 2 workspace claim(s) in ml; delete them with -e purge_workspaces=true (a deploy takes kept claims again "
        "with the size and class they have): workspace-h-kim-0 (?), workspace-h-kim-1 (100Gi)")
    assert claims_line("ml", claims[:1], True) == "deleted 1 workspace claim(s) in ml: workspace-h-kim-1 (100Gi)"
