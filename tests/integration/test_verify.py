"""verify-rdma.yml run by ansible-playbook against the local cluster: the
probe pods run the node checks against each fake node's recorded snapshot
(tests/fixtures/nodes), so the verdicts are those of the recorded nodes."""

import json
import uuid

import pytest
from ansible_cli import remove_namespace, run_doc_command, run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

HEALTHY = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr", "moc-r4pcc04u12-nairr"]
# The faulty nodes of the local inventory, the check each fails and words of its remedy.
FAULTY = {
    "moc-r4pcc04u16-nairr": ("gpudirect_rdma", "nvidia_peermem is not loaded", "driver.rdma.enabled=true"),
    "moc-r4pcc04u25-nairr": ("iommu_passthrough", "IOMMU translates DMA", "iommu=pt"),
    "moc-r4pcc04u36-nairr": ("rdma_link", "mlx5_10/1 DOWN", "cable and switch port"),
}
APP = "h-kim"


@pytest.fixture
def verify_ns(api_client):
    name = "ver-%s" % uuid.uuid4().hex[:6]
    yield name
    remove_namespace(api_client, name)


def probe_pods(api_client, namespace):
    return [p for p in client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/name=%s-probe" % APP).items if not p.metadata.deletion_timestamp]


def reports(directory):
    """The run's JSON and Markdown reports (one run per directory)."""
    found = sorted(directory.glob("verify-*.json")), sorted(directory.glob("verify-*.md"))
    return [json.loads(path.read_text()) for path in found[0]], [path.read_text() for path in found[1]]


def test_node_checks_report_exactly_the_recorded_faults(api_client, verify_ns, tmp_path):
    run = run_doc_command("ansible-playbook playbooks/verify-rdma.yml -i inventories/<cluster> -e verify_pod_checks=false "
                          "-e verify_label_nodes=true", inventory_values={"cluster_namespace": verify_ns,
                                                                          "verify_report_dir": str(tmp_path)},
                          verify_pod_checks=False, verify_label_nodes=True)
    assert run.failed
    # What the user reads last names each failing node, its check and its fix.
    message = run.last_words()
    assert message == " ".join(run.failure_messages())
    for node, (check, words, fix) in FAULTY.items():
        assert "node %s FAIL: %s: " % (node, check) in message and words in message and fix in message, message
    for node in HEALTHY:
        assert node not in message
    (report,), (markdown,) = reports(tmp_path)
    assert report["verdict"] == "fail" and report["mode"] == "rdma" and report["pods"] == []
    # The recorded nodes' lossless settings are not known: said even of a FAIL.
    assert markdown.splitlines()[0] == "# RDMA verification of local: FAIL, 1 not checked: lossless RoCE"
    assert report["words"] == "FAIL, 1 not checked: lossless RoCE"
    for node, (check, words, fix) in FAULTY.items():
        # Its section under "Findings and fixes": the finding, then its fix.
        section = markdown.split("### node %s\n" % node, 1)[1].split("\n### ", 1)[0]
        assert "- **%s** (fail): " % check in section and words in section, section
        assert "  - Fix: " in section and fix in section.split("  - Fix: ", 1)[1], section
    verdicts = dict((n["node"], n) for n in report["nodes"])
    assert sorted(verdicts) == sorted(HEALTHY + list(FAULTY))
    for node in HEALTHY:
        assert verdicts[node]["status"] == "pass" and verdicts[node]["checks"] == []
        assert verdicts[node]["words"] == "PASS, 1 not checked: lossless RoCE"
        # All pass but roce_lossless: the recorded nodes' PFC and ECN are not known.
        assert verdicts[node]["summary"] == {"pass": 13, "skip": 1, "warn": 0, "fail": 0, "total": 14}
    for node, (check, words, fix) in FAULTY.items():
        (finding,) = verdicts[node]["checks"]
        assert (finding["name"], finding["status"]) == (check, "fail")
        assert words in finding["message"] and fix in finding["remediation"]
        assert "| %s | FAIL, 1 not checked: lossless RoCE | %s |" % (node, check) in markdown
    assert "### node moc-r4pcc04u25-nairr" in markdown
    # The probes are gone, with their service account (and its binding to the
    # privileged SCC on OpenShift); the latest report is the one just written.
    assert probe_pods(api_client, verify_ns) == []
    assert [a.metadata.name for a in client.CoreV1Api(api_client).list_namespaced_service_account(verify_ns).items
            if a.metadata.name != "default"] == []
    assert client.RbacAuthorizationV1Api(api_client).list_namespaced_role_binding(verify_ns).items == []
    assert json.loads((tmp_path / "latest.json").read_text()) == report


def test_healthy_nodes_and_pods_pass_and_runs_are_compared(api_client, verify_ns, tmp_path):
    healthy = {"cluster_namespace": verify_ns, "cluster_gpu_nodes": HEALTHY, "verify_report_dir": str(tmp_path)}
    deployed = run_playbook("deploy.yml", "local", healthy)
    assert not deployed.failed, deployed.failure_messages()
    run = run_doc_command("ansible-playbook playbooks/verify-rdma.yml -i inventories/<cluster> [-e verify_pod_checks=false] "
                          "[-e verify_bench_pairwise=true] [-e verify_label_nodes=true]", inventory_values=healthy,
                          verify_label_nodes=True)
    assert not run.failed, run.failure_messages()
    (passed,) = run.results("Pass only a fabric fit to train on")
    # A pass that says what it did not check: the recorded nodes' lossless
    # settings and the pods' capabilities could not be read, and the
    # benchmark (gloo here) had no gate, no NCCL log and no RDMA byte.
    words = "PASS, 5 not checked: lossless RoCE, IPC_LOCK, transport, gate, network traffic"
    assert passed["msg"].startswith("3 node(s) and 2 pod(s) checked: %s; report: " % words), passed["msg"]
    assert run.last_words() == passed["msg"]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["verdict"] == "pass" and report["words"] == words
    markdown = (tmp_path / ("verify-%s.md" % report["time"].replace(":", ""))).read_text()
    assert markdown.splitlines()[0] == "# RDMA verification of local: " + words
    for pod in report["pods"]:
        assert "| %s | %s | PASS, 2 not checked: lossless RoCE, IPC_LOCK | rdma | 4 |" % (pod["pod"], pod["node"]) \
            in markdown
    unchecked = markdown.split("## Not checked\n", 1)[1].split("\n## ", 1)[0]
    assert "- **roce_lossless**: lossless settings not known: " in unchecked
    assert all(node in unchecked for node in HEALTHY)
    # Every node's rails and topology settings, every pod's own rails and CPUs.
    rails = markdown.split("## Rails, placement and lossless RoCE\n", 1)[1].split("\n## ", 1)[0]
    for node in HEALTHY:
        assert "| node %s | GPU0-mlx5_6 PXB, GPU1-mlx5_7 PXB, GPU2-mlx5_10 PXB, GPU3-mlx5_11 PXB | - | " % node in rails
    for pod in report["pods"]:
        assert "| pod %s on %s | GPU0-mlx5_6 PXB," % (pod["pod"], pod["node"]) in rails
    # The probes stayed for the benchmark and read their nodes' whole ports
    # just before and after it; their binding to the privileged SCC went as
    # soon as they were created, before any check ran in them.
    ran = run.tasks_run()
    assert ran.index("Delete the probes' binding to the privileged SCC, their pods admitted") < ran.index(
        "Run the node checks in every probe at once")
    steps = ("Read the nodes' port counters in their probes, before", "Run the benchmark in every pod at once",
             "Read the nodes' port counters in their probes, after", "Delete the probe pods")
    assert [name for name in ran if name in steps] == list(steps)
    # Every probed node, the benchmark's two and the third.
    assert sorted({row["node"] for row in report["bench"]["node_counters"]}) == sorted(HEALTHY)
    ports = markdown.split("The nodes' RDMA ports during the benchmark, as their probes read them", 1)[1]
    for node in HEALTHY:
        # The recorded nodes' counters stand still: nothing moved, no finding.
        assert "| %s | mlx5_6/1 | net1 | 0.0 | none | - |" % node in ports.split("\n## ", 1)[0]
    assert probe_pods(api_client, verify_ns) == []
    assert report["verdict"] == "pass" and report["previous"] == {"time": None, "changes": [], "bandwidth": []}
    assert [n["status"] for n in report["nodes"]] == ["pass"] * 3
    assert [p["pod"] for p in report["pods"]] == [APP + "-0", APP + "-1"]
    for pod in report["pods"]:
        assert pod["node"] in HEALTHY and pod["status"] == "pass"
        # In the pod: the node checks plus IPC_LOCK (unknown in a recorded
        # snapshot, so skipped, never passed; as PFC and ECN), /dev/infiniband,
        # the pod's rails and its CPUs' placement.
        assert pod["summary"] == {"pass": 16, "skip": 2, "warn": 0, "fail": 0, "total": 18}
        assert pod["nccl"]["transport"] == "rdma" and pod["nccl"]["rdma_ports"] == 4 and pod["nccl"]["gpudirect"]
    core = client.CoreV1Api(api_client)
    try:
        for node in HEALTHY:
            labels = core.read_node(node).metadata.labels
            assert labels["mlinfra.io/rdma-verified"] == "true"
            assert labels["mlinfra.io/rdma-verified-date"] == report["time"][:10]
    finally:
        for node in HEALTHY:
            core.patch_node(node, {"metadata": {"labels": {"mlinfra.io/rdma-verified": None,
                                                           "mlinfra.io/rdma-verified-date": None}}})
    # A second run is compared with the first (the pods and the benchmark
    # again; the nodes' checks are the first run's to compare).
    again = run_playbook("verify-rdma.yml", "local", dict(healthy, verify_node_checks=False))
    assert not again.failed, again.failure_messages()
    second = json.loads((tmp_path / "latest.json").read_text())
    if second["time"] != report["time"]:  # runs within one second share their report files
        assert second["previous"]["time"] == report["time"] and second["previous"]["changes"] == []
        # The benchmark ran both times: its bandwidth is compared, whatever the noise, without a verdict.
        assert [line.split(":")[0] for line in second["previous"]["bandwidth"]] == ["all_reduce average busbw"]
    markdowns = sorted(tmp_path.glob("verify-*.md"))
    assert "## Since the previous run" in markdowns[-1].read_text()


def test_a_verdict_that_changed_since_the_previous_run_is_named(api_client, verify_ns, tmp_path):
    # u36 has a port down: in tcp mode that is no failure, in rdma mode it is.
    nodes = HEALTHY[:1] + ["moc-r4pcc04u36-nairr"]
    base = {"cluster_namespace": verify_ns, "verify_pod_checks": False, "verify_report_dir": str(tmp_path),
            "cluster_gpu_nodes": nodes}
    first = run_playbook("verify-rdma.yml", "local", dict(base, cluster_network_mode="tcp", cluster_rdma_nics=[]))
    assert not first.failed, first.failure_messages()
    previous = json.loads((tmp_path / "latest.json").read_text())
    assert previous["verdict"] in ("pass", "warn")
    second = run_playbook("verify-rdma.yml", "local", base)
    assert second.failed
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["previous"]["time"] == previous["time"]
    before = {n["node"]: n["status"] for n in previous["nodes"]}
    assert report["previous"]["changes"] == ["node moc-r4pcc04u36-nairr: %s -> fail" % before["moc-r4pcc04u36-nairr"]]
    markdown = (tmp_path / ("verify-%s.md" % report["time"].replace(":", ""))).read_text()
    assert "moc-r4pcc04u36-nairr: %s -> fail" % before["moc-r4pcc04u36-nairr"] in markdown


def test_before_deploy_the_pods_are_reported_not_checked(api_client, verify_ns, tmp_path):
    # The nodes chosen by label, as the GPU operator labels them: the API
    # server matches the six GPU nodes (not the infra worker); two are
    # excluded by name and the cordoned one is left out, which leaves HEALTHY.
    run = run_playbook("verify-rdma.yml", "local", {
        "cluster_namespace": verify_ns, "cluster_gpu_nodes": [], "cluster_gpu_node_selector": "nvidia.com/gpu.present=true",
        "cluster_gpu_nodes_exclude": ["moc-r4pcc04u16-nairr", "moc-r4pcc04u25-nairr"], "verify_report_dir": str(tmp_path)})
    assert run.failed
    assert ("cluster_gpu_node_selector 'nvidia.com/gpu.present=true' matched 6 nodes; chose 3: %s; left out 3: "
            "moc-r4pcc04u16-nairr, moc-r4pcc04u25-nairr (named in cluster_gpu_nodes_exclude); moc-r4pcc04u36-nairr "
            "(cordoned (unschedulable))" % ", ".join(HEALTHY)) in run.stdout
    message = " ".join(run.failure_messages())
    assert "no training pods: StatefulSet %s/%s is not deployed" % (verify_ns, APP) in message
    assert "-e verify_pod_checks=false" in message
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["verdict"] == "not-checked"
    assert [(n["node"], n["status"]) for n in report["nodes"]] == [(node, "pass") for node in HEALTHY]


def test_check_mode_creates_no_probes_and_passes_nothing(api_client, verify_ns, tmp_path):
    run = run_playbook("verify-rdma.yml", "local", {"cluster_namespace": verify_ns, "cluster_gpu_nodes": HEALTHY,
                                                    "verify_pod_checks": False, "verify_report_dir": str(tmp_path)},
                       check=True)
    assert run.failed
    assert "check mode creates no probe pods" in " ".join(run.failure_messages())
    assert probe_pods(api_client, verify_ns) == []
    assert list(tmp_path.iterdir()) == []


# Each variable alone (timeouts, rates, choices, the nodes) is refused by the
# settings check: tests/unit/plugins/module_utils/test_inventory_settings.py
# and test_hostile_input.py; these are the benchmark's checks together.
@pytest.mark.parametrize("extra,words", [
    ({"verify_probe_timeout": 0}, "verify_probe_timeout is out of range (got 0)"),
    # A gate above the largest size measured would never apply: an error, not a silent pass.
    ({"verify_bench_min_busbw": ["16G=194"]}, "the largest size measured is 1M"),
    ({"verify_bench_min_busbw": ["194"]}, "expected SIZE=GBPS"),
    ({"verify_bench_ops": ["allreduce"]}, "op 'allreduce' is not one of"),
    ({"verify_bench_line_rate_fraction": 0}, "verify_bench_line_rate_fraction above 0 (is 0)"),
])
def test_bad_settings_fail_before_any_probe(api_client, verify_ns, tmp_path, extra, words):
    run = run_playbook("verify-rdma.yml", "local",
                       dict(extra, cluster_namespace=verify_ns, verify_report_dir=str(tmp_path)))
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert words in messages, messages
    assert probe_pods(api_client, verify_ns) == []
    assert list(tmp_path.iterdir()) == []


def test_deploy_keeps_pods_off_nodes_verify_rdma_failed_and_can_require_passed_ones(api_client, verify_ns):
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    nodes = HEALTHY[:2]
    settings = {"cluster_namespace": verify_ns, "cluster_gpu_nodes": nodes}
    labels = {"mlinfra.io/rdma-verified": "true", "mlinfra.io/rdma-verified-date": "2026-11-23"}
    try:
        core.patch_node(nodes[0], {"metadata": {"labels": labels}})
        core.patch_node(nodes[1], {"metadata": {"labels": dict(labels, **{"mlinfra.io/rdma-verified": "false"})}})
        # By default: a node verify-rdma.yml failed takes no pod, so two
        # replicas have one node.
        refused = run_playbook("deploy.yml", "local", settings)
        assert refused.failed
        (message,) = refused.failure_messages()
        assert message.startswith("replicas=2 but only 1 of the 2 cluster_gpu_nodes can take a pod: %s failed "
                                  "verify-rdma.yml (mlinfra.io/rdma-verified=false, 2026-11-23); nothing was changed; "
                                  "fix: lower replicas (-e replicas=1), or repair the nodes and run ansible-playbook "
                                  "playbooks/verify-rdma.yml -i inventories/local -e verify_label_nodes=true"
                                  % nodes[1]), message
        # Asked for verified nodes only: the unlabelled one is left out too.
        core.patch_node(nodes[1], {"metadata": {"labels": {key: None for key in labels}}})
        strict = dict(settings, statefulset_require_verified_nodes=True)
        refused = run_playbook("deploy.yml", "local", strict)
        assert refused.failed
        (message,) = refused.failure_messages()
        assert ("only 1 of the 2 cluster_gpu_nodes can take a pod: %s is not labelled mlinfra.io/rdma-verified=true, "
                "which statefulset_require_verified_nodes asks for" % nodes[1]) in message, message
        # Refused before anything was made: not even the namespace.
        assert verify_ns not in [item.metadata.name for item in core.list_namespace().items]
        for node in nodes:
            core.patch_node(node, {"metadata": {"labels": labels}})
        deployed = run_playbook("deploy.yml", "local", strict)
        assert not deployed.failed, deployed.failure_messages()
        terms = apps.read_namespaced_stateful_set(APP, verify_ns).spec.template.spec.affinity.node_affinity \
            .required_during_scheduling_ignored_during_execution.node_selector_terms
        assert {"key": "mlinfra.io/rdma-verified", "operator": "In", "values": ["true"]} in \
            [expression.to_dict() for expression in terms[0].match_expressions]
    finally:
        for node in nodes:
            core.patch_node(node, {"metadata": {"labels": {key: None for key in labels}}})


def test_another_owners_probe_account_is_refused_before_any_probe(api_client, verify_ns, tmp_path):
    """A namespace the deployment may use (cluster_allow_existing_namespace)
    that holds someone's ServiceAccount of the probes' name: verify-rdma.yml
    refuses before shipping code or starting a privileged pod, and leaves it
    as it was."""
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": verify_ns}})
    core.create_namespaced_service_account(verify_ns, {"metadata": {"name": APP + "-probe", "labels": {"team": "bob"}}})
    run = run_playbook("verify-rdma.yml", "local", {"cluster_namespace": verify_ns, "cluster_gpu_nodes": HEALTHY,
                                                    "cluster_allow_existing_namespace": True, "verify_pod_checks": False,
                                                    "verify_report_dir": str(tmp_path)})
    changed = [task["task"]["name"] for play in run.document["plays"] for task in play["tasks"]
               if task["hosts"].get("localhost", {}).get("changed")]
    # On the controller, its report directory is made first; on the cluster, nothing.
    assert run.failed and set(changed) <= {"mlinfra.multinode.cluster : Make the directories this play writes its "
                                           "results to"}, changed
    (message,) = run.failure_messages()
    assert message.startswith("verify-rdma.yml would change objects that this deployment (cluster_app_name={app} in "
                              "namespace {ns}) did not create: ServiceAccount {ns}/{app}-probe (no app.kubernetes.io labels)"
                              .format(app=APP, ns=verify_ns)), message
    assert core.read_namespaced_service_account(APP + "-probe", verify_ns).metadata.labels == {"team": "bob"}
    assert core.list_namespaced_pod(verify_ns).items == []
    assert [item.metadata.name for item in core.list_namespaced_config_map(verify_ns).items
            if item.metadata.name.startswith(APP)] == []
