"""playbooks/site.yml, README's first command, against the local cluster:
the whole chain from GPU nodes to a training summary."""

import json
import uuid

import pytest
from ansible_cli import remove_namespace, run_doc_command
from test_train import assert_summary_line
from kubernetes import client

pytestmark = pytest.mark.integration

# The local inventory's nodes that fail verify-rdma by design.
FAULTY = {"moc-r4pcc04u16-nairr", "moc-r4pcc04u25-nairr", "moc-r4pcc04u36-nairr"}


def test_the_chain_leaves_failing_nodes_out_and_ends_with_the_training_summary(api_client, tmp_path):
    settings = {"cluster_namespace": "site-%s" % uuid.uuid4().hex[:6], "train_logs_dir": str(tmp_path / "train"),
                "verify_report_dir": str(tmp_path / "verify"), "train_run_id": "chain"}
    core = client.CoreV1Api(api_client)
    try:
        run = run_doc_command("ansible-playbook playbooks/site.yml -i inventories/local", inventory_values=settings)
        assert not run.failed, run.failure_messages()
        # 1. Every node checked; the faulty ones reported, labelled, not fatal.
        node_verdict = run.results("Pass only a fabric fit to train on")[0]["msg"]
        assert node_verdict.startswith("6 node(s) and 0 pod(s) checked: FAIL, "), node_verdict
        assert "; 3 failing (node moc-r4pcc04u16-nairr, " in node_verdict, node_verdict
        labels = {node.metadata.name: node.metadata.labels.get("mlinfra.io/rdma-verified")
                  for node in core.list_node().items}
        assert {name for name, verified in labels.items() if verified == "false"} == FAULTY
        # 2. and 3. The pods went on verified nodes only, and passed.
        pods = core.list_namespaced_pod(settings["cluster_namespace"], label_selector="app.kubernetes.io/name=h-kim")
        nodes = {pod.spec.node_name for pod in pods.items}
        assert len(nodes) == 2 and not nodes & FAULTY
        pod_verdict = run.results("Pass only a fabric fit to train on")[1]["msg"]
        assert pod_verdict.startswith("0 node(s) and 2 pod(s) checked: PASS, "), pod_verdict
        assert " not checked: " in pod_verdict and " failing (" not in pod_verdict, pod_verdict
        # 4. The chain ends with the run's summary (only skipped tasks after it).
        tasks = run.document["plays"][-1]["tasks"]
        report = [index for index, task in enumerate(tasks) if task["task"]["name"].endswith("Report the run")]
        assert len(report) == 1 and all(task["hosts"]["localhost"].get("skipped") for task in tasks[report[0] + 1:])
        # What the user reads last: where it ran, how fast, the loss falling.
        said = run.last_words()
        assert said == tasks[report[0]]["hosts"]["localhost"]["msg"]
        assert_summary_line(said, "chain", tmp_path / "train" / "chain")
        # The last screen: each verdict of the chain after the recap
        # (verdict_block), the training run's summary last.
        block = run.stdout.split("mlinfra.multinode: what this run found\n", 1)[1].splitlines()
        assert block[0] == "- Verify the GPU nodes and pods of the cluster: " + " ".join(node_verdict.split())
        assert "- Verify the GPU nodes and pods of the cluster: " + " ".join(pod_verdict.split()) in block
        assert block[-1] == "- Train on the GPU pods of the cluster: " + " ".join(said.split())
        summary = json.loads((tmp_path / "train" / "chain" / "summary.json").read_text())
        assert summary["throughput"]["throughput"] > 0
        assert all(status["first_loss"] > status["latest_loss"] for status in summary["status"])
        # 5. deploy.yml alone afterwards places the pods as site.yml did:
        # nothing changes, no pod moves.
        uids = {pod.metadata.uid for pod in pods.items}
        again = run_doc_command("ansible-playbook playbooks/deploy.yml -i inventories/<cluster> [-e replicas=N]",
                                inventory_values=settings)
        assert not again.failed and again.changed == 0, again.failure_messages()
        pods = core.list_namespaced_pod(settings["cluster_namespace"], label_selector="app.kubernetes.io/name=h-kim")
        assert {pod.metadata.uid for pod in pods.items} == uids
        # 6. The failed nodes take no pod: more replicas than the nodes that
        # passed is refused before anything changes, naming them.
        scaled = run_doc_command("ansible-playbook playbooks/scale.yml -i inventories/<cluster> -e replicas=N",
                                 inventory_values=settings, replicas=4)
        assert scaled.failed and scaled.changed == 0
        (message,) = scaled.failure_messages()
        assert message.startswith(
            "replicas=4 but only 3 of the 6 cluster_gpu_nodes can take a pod: moc-r4pcc04u16-nairr, "
            "moc-r4pcc04u25-nairr failed verify-rdma.yml (mlinfra.io/rdma-verified=false, "), message
        assert "; moc-r4pcc04u36-nairr is cordoned (unschedulable); nothing was changed; fix: " in message
    finally:
        remove_namespace(api_client, settings["cluster_namespace"])
