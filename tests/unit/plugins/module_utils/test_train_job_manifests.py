"""The Job start modes' objects (plugins/module_utils/workload/train_jobs.py), made
from the StatefulSet that playbooks/render.yml renders for the real
inventories (oke: host networking and shared storage; moc: a claim per pod),
and the container's bash script run for real against a stub launcher."""

import copy
import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload import train_jobs as tj
from ansible_collections.mlinfra.multinode.plugins.module_utils.train.launch_cli import build_parser as launcher_parser

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE_PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")

RUN_ID = "Llama3_8B run.01"
JOB = "llama3-8b-run-01"
RUN_DIR = "mlinfra-runs"
# What the train role passes, with arguments a shell would split or unquote.
LAUNCH_ARGS = ["--nnodes", "2", "--nproc-per-node", "8", "--rdzv-port", "29500", "--workload", "torchtitan",
               "--config", "/workspace/llama3 8b.toml", "--", "it's", "$HOME", "a;b", ""]


def render_statefulset(tmp_path_factory, inventory):
    out = tmp_path_factory.mktemp("render-" + inventory)
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "playbooks/render.yml", "-i", "inventories/" + inventory,
                           "-e", "render_dir=%s" % out], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.fail("rendering inventories/%s failed:\n%s" % (inventory, proc.stdout[-4000:]))
    with open(str(out / "statefulset.yaml")) as handle:
        docs = [doc for doc in yaml.safe_load_all(handle) if doc]
    sets = [doc for doc in docs if doc.get("kind") == "StatefulSet"]
    assert len(sets) == 1, [doc.get("kind") for doc in docs]
    return sets[0]


@pytest.fixture(scope="module")
def oke(tmp_path_factory):
    statefulset = render_statefulset(tmp_path_factory, "oke")
    # What the tests below rely on the oke render to have.
    spec = statefulset["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and "volumeClaimTemplates" not in statefulset["spec"]
    assert "workspace" in [volume["name"] for volume in spec["volumes"]]
    return statefulset


@pytest.fixture(scope="module")
def moc(tmp_path_factory):
    statefulset = render_statefulset(tmp_path_factory, "moc")
    assert [claim["metadata"]["name"] for claim in statefulset["spec"]["volumeClaimTemplates"]] == ["workspace"]
    return statefulset


PORT = 29611


def make(statefulset, mode, replicas=2, **kwargs):
    return tj.manifests(statefulset, mode, RUN_ID, replicas, LAUNCH_ARGS, RUN_DIR, PORT, **kwargs)


def pod_spec(obj):
    if obj["kind"] == "PyTorchJob":
        return obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    if obj["apiVersion"].startswith("batch.volcano.sh/"):
        return obj["spec"]["tasks"][0]["template"]
    if obj["kind"] in ("JobSet", "TrainingRuntime"):
        return obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"] \
            if obj["kind"] == "TrainingRuntime" else obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return obj["spec"]["template"]


def container(template, name):
    found = [c for c in template["spec"]["containers"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in template["spec"]["containers"]]
    return found[0]


def input_trainer(statefulset):
    return container(statefulset["spec"]["template"], "trainer")


# ------------------------------------------------------------------ job_name

@pytest.mark.parametrize("run_id, name", [
    ("abc", "abc"),
    ("ABC", "abc"),
    (RUN_ID, JOB),
    ("a__b..c", "a-b-c"),
    ("-x-", "x"),
    ("x/y:z", "x-y-z"),
    ("2026-01-01", "run-2026-01-01"),
    ("_7", "run-7"),
    ("-9", "run-9"),
    ("__", "run"),
    (u"\u00e9t\u00e9", "t"),
    (u"\u00c91", "run-1"),
    ("a" * 50, "a" * 40),
    # Cut at 40 characters, then no trailing '-'.
    ("a" * 39 + "_" + "b" * 10, "a" * 39),
    ("1" * 50, "run-" + "1" * 36),
])
def test_job_name(run_id, name):
    assert tj.job_name(run_id) == name


@pytest.mark.parametrize("run_id", ["x", "Z" * 100, "9" * 100, "--a--", "a-" * 30, "run 1 (retry)", "..", "\u4e2d"])
def test_job_name_is_a_dns_label_short_enough_for_the_pods_host_names(run_id):
    name = tj.job_name(run_id)
    assert re.match(r"^[a-z]([a-z0-9-]*[a-z0-9])?$", name), name
    assert len(name) <= 40
    assert len(name + "-worker-999") <= 63


# --------------------------------------------------------------- job (indexed)

def test_job_mode_is_a_headless_service_and_an_indexed_job(oke):
    objects = make(oke, "job")
    assert [(obj["apiVersion"], obj["kind"]) for obj in objects] == [("v1", "Service"), ("batch/v1", "Job")]
    service, job = objects
    namespace = oke["metadata"]["namespace"]
    for obj in objects:
        assert obj["metadata"]["name"] == JOB
        assert obj["metadata"]["namespace"] == namespace
        assert obj["metadata"]["labels"][tj.RUN_LABEL] == JOB
        assert obj["metadata"]["annotations"] == {tj.RUN_ID_ANNOTATION: RUN_ID}
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {tj.RUN_LABEL: JOB}
    assert service["spec"]["ports"] == [{"name": "rendezvous", "port": PORT, "protocol": "TCP"}]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 2
    assert spec["backoffLimit"] == 0
    assert spec["ttlSecondsAfterFinished"] == 86400


def test_job_replicas_and_ttl_are_passed_through(oke):
    service, job = tj.manifests(oke, "job", RUN_ID, "5", LAUNCH_ARGS, RUN_DIR, "29400", ttl_seconds="60")
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 5
    assert job["spec"]["ttlSecondsAfterFinished"] == 60
    assert service["spec"]["ports"][0]["port"] == 29400


def test_job_pod_template_is_the_statefulsets_made_a_runs_pod(oke):
    before = copy.deepcopy(oke)
    template = pod_spec(make(oke, "job")[1])
    assert oke == before, "the input StatefulSet was modified"
    source = oke["spec"]["template"]["spec"]
    spec = template["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["subdomain"] == JOB
    assert "hostname" not in spec
    # One pod of the run per node.
    terms = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms and all(term["labelSelector"] == {"matchLabels": {tj.RUN_LABEL: JOB}} for term in terms)
    assert [term["topologyKey"] for term in terms] == \
        [term["topologyKey"] for term in source["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]]
    # Unchanged from the StatefulSet's pods.
    for key in ("initContainers", "volumes", "hostNetwork", "dnsPolicy", "tolerations", "serviceAccountName",
                "terminationGracePeriodSeconds"):
        assert spec[key] == source[key], key
    assert spec["affinity"]["nodeAffinity"] == source["affinity"]["nodeAffinity"]
    assert spec["hostNetwork"] is True
    trainer = container(template, "trainer")
    original = input_trainer(oke)
    for key in ("image", "securityContext", "resources", "volumeMounts", "ports", "workingDir"):
        assert trainer[key] == original[key], key
    assert set(trainer) == set(original) - {"readinessProbe"}
    assert "args" not in trainer
    names = [var["name"] for var in trainer["env"]]
    assert "MASTER_ADDR" not in names and "MASTER_PORT" not in names
    assert trainer["env"] == [var for var in original["env"] if var["name"] not in ("MASTER_ADDR", "MASTER_PORT")]
    assert "POD_NAME" in names


def test_job_pods_carry_the_runs_labels_not_the_statefulsets_selector(oke):
    job = make(oke, "job")[1]
    labels = pod_spec(job)["metadata"]["labels"]
    assert labels == job["metadata"]["labels"]
    assert labels[tj.RUN_LABEL] == JOB
    assert labels["app.kubernetes.io/component"] == "train"
    selector = oke["spec"]["selector"]["matchLabels"]
    assert any(labels.get(key) != value for key, value in selector.items()), \
        "the run's pods would be selected by the StatefulSet"
    # The StatefulSet's other labels are kept.
    assert labels["app.kubernetes.io/part-of"] == oke["metadata"]["labels"]["app.kubernetes.io/part-of"]


def test_job_command_is_bash_with_the_script_then_the_launch_args_unchanged(oke):
    trainer = container(pod_spec(make(oke, "job")[1]), "trainer")
    command = trainer["command"]
    assert command[:2] == ["/bin/bash", "-c"]
    assert '/files/bin/mlinfra" train start --wait' in command[2] and "JOB_COMPLETION_INDEX" in command[2]
    assert command[3:] == ["mlinfra train", RUN_DIR, RUN_ID] + LAUNCH_ARGS


def test_launch_args_are_strings(oke):
    job = tj.manifests(oke, "job", RUN_ID, 2, ["--nnodes", 2, "--rdzv-port", 29500], RUN_DIR, 29500)[1]
    assert container(pod_spec(job), "trainer")["command"][-4:] == ["--nnodes", "2", "--rdzv-port", "29500"]


# --------------------------------------------------------------- pytorchjob

def test_pytorchjob_mode(oke):
    before = copy.deepcopy(oke)
    objects = make(oke, "pytorchjob", replicas=3)
    assert oke == before
    assert len(objects) == 1
    job = objects[0]
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert job["metadata"]["name"] == JOB
    elastic = job["spec"]["elasticPolicy"]
    assert elastic["minReplicas"] == elastic["maxReplicas"] == 3
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3
    assert worker["restartPolicy"] == "Never"
    template = worker["template"]
    assert template["spec"]["restartPolicy"] == "Never"
    assert "subdomain" not in template["spec"]
    assert [c["name"] for c in template["spec"]["containers"]] == ["pytorch"]
    pytorch = container(template, "pytorch")
    assert "readinessProbe" not in pytorch
    assert {"name": "REPLICA_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['training.kubeflow.org/replica-index']"}}} in pytorch["env"]
    assert "MASTER_ADDR" not in [var["name"] for var in pytorch["env"]]
    assert pytorch["command"][3:] == ["mlinfra train", RUN_DIR, RUN_ID] + LAUNCH_ARGS
    # The operator's rendezvous endpoint on the run's port, not its 23456.
    assert pytorch["ports"] == [{"name": "pytorchjob-port", "containerPort": PORT, "protocol": "TCP"}]
    assert elastic["rdzvPort"] == PORT
    assert template["spec"]["initContainers"] == oke["spec"]["template"]["spec"]["initContainers"]
    assert template["spec"]["volumes"] == oke["spec"]["template"]["spec"]["volumes"]


# ------------------------------------------------------------------ volcano

def test_volcano_mode(oke):
    before = copy.deepcopy(oke)
    objects = make(oke, "volcano", replicas=4, volcano_queue="research")
    assert oke == before
    assert len(objects) == 1
    job = objects[0]
    assert job["apiVersion"].split("/", maxsplit=1)[0] == "batch.volcano.sh" and job["kind"] == "Job"
    spec = job["spec"]
    assert spec["minAvailable"] == 4
    assert spec["queue"] == "research"
    assert spec["schedulerName"] == "volcano"
    assert "svc" in spec["plugins"]
    assert [(task["name"], task["replicas"]) for task in spec["tasks"]] == [("worker", 4)]
    template = spec["tasks"][0]["template"]
    assert template["spec"]["restartPolicy"] == "Never"
    trainer = container(template, "trainer")
    assert "readinessProbe" not in trainer
    assert trainer["command"][3:] == ["mlinfra train", RUN_DIR, RUN_ID] + LAUNCH_ARGS
    assert make(oke, "volcano")[0]["spec"]["queue"] == "default"


# ------------------------------------------------------------------ jobset

def test_jobset_mode_is_one_replicated_job_of_indexed_pods_that_fails_on_a_failed_pod(oke):
    before = copy.deepcopy(oke)
    objects = make(oke, "jobset", replicas=3, ttl_seconds=600)
    assert oke == before
    assert [(obj["apiVersion"], obj["kind"]) for obj in objects] == [("jobset.x-k8s.io/v1alpha2", "JobSet")]
    spec = objects[0]["spec"]
    assert objects[0]["metadata"]["name"] == JOB
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert spec["failurePolicy"] == {"maxRestarts": 0} and spec["successPolicy"] == {"operator": "All"}
    assert spec["ttlSecondsAfterFinished"] == 600
    assert [(rj["name"], rj["replicas"]) for rj in spec["replicatedJobs"]] == [("node", 1)]
    job = spec["replicatedJobs"][0]["template"]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"], job["backoffLimit"]) == ("Indexed", 3, 3, 0)
    template = job["template"]
    assert template["metadata"]["labels"][tj.RUN_LABEL] == JOB
    assert template["spec"]["restartPolicy"] == "Never" and "subdomain" not in template["spec"]
    trainer = container(template, "trainer")
    assert trainer["command"][3:] == ["mlinfra train", RUN_DIR, RUN_ID] + LAUNCH_ARGS
    assert template["spec"]["volumes"] == oke["spec"]["template"]["spec"]["volumes"]
    assert template["spec"]["initContainers"] == oke["spec"]["template"]["spec"]["initContainers"]


# ---------------------------------------------------------------- trainjob

def test_trainjob_mode_is_the_deployments_runtime_and_the_runs_trainjob(oke):
    before = copy.deepcopy(oke)
    runtime, trainjob = make(oke, "trainjob", replicas=4)
    assert oke == before
    app, namespace = oke["metadata"]["name"], oke["metadata"]["namespace"]
    assert (runtime["apiVersion"], runtime["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")
    assert runtime["metadata"]["name"] == app and runtime["metadata"]["namespace"] == namespace
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    [node] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node" and node["replicas"] == 1
    assert node["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    assert "completions" not in node["template"]["spec"] and node["template"]["spec"]["backoffLimit"] == 0
    template = node["template"]["spec"]["template"]
    # The runtime serves every run: no run's label, no run's command.
    assert tj.RUN_LABEL not in template["metadata"]["labels"]
    main = container(template, "node")
    assert "command" not in main and "args" not in main
    assert main["image"] == input_trainer(oke)["image"]
    assert main["securityContext"] == input_trainer(oke)["securityContext"]
    assert template["spec"]["hostNetwork"] is True
    assert template["spec"]["volumes"] == oke["spec"]["template"]["spec"]["volumes"]
    assert template["spec"]["initContainers"] == oke["spec"]["template"]["spec"]["initContainers"]
    assert template["spec"]["affinity"]["nodeAffinity"] == oke["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    anti = template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {term["labelSelector"]["matchLabels"]["app.kubernetes.io/name"] for term in anti} == {app + "-train"}

    assert (trainjob["apiVersion"], trainjob["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert trainjob["metadata"]["name"] == JOB
    spec = trainjob["spec"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": app}
    assert spec["trainer"]["numNodes"] == 4 and spec["trainer"]["numProcPerNode"] == 8
    assert spec["trainer"]["command"][3:] == ["mlinfra train", RUN_DIR, RUN_ID] + LAUNCH_ARGS
    [patch] = spec["runtimePatches"]
    assert patch["manager"] == "mlinfra.io/train"
    [patched] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert patched == {"name": "node", "template": {"spec": {"template": {
        "metadata": {"labels": {tj.RUN_LABEL: JOB}}}}}}


# ------------------------------------------------------------------- kueue

@pytest.mark.parametrize("mode", ["job", "pytorchjob", "jobset", "trainjob"])
def test_a_queue_name_labels_the_runs_workload_for_kueue(oke, mode):
    objects = make(oke, mode, queue_name="team-a")
    assert objects[-1]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    # Only the workload: not the Service nor the runtime.
    assert all("kueue.x-k8s.io/queue-name" not in obj["metadata"]["labels"] for obj in objects[:-1])
    assert all("kueue.x-k8s.io/queue-name" not in obj["metadata"]["labels"] for obj in make(oke, mode))


def test_a_kueue_queue_for_a_volcano_run_is_refused(oke):
    with pytest.raises(tj.TrainJobError, match="train_volcano_queue"):
        make(oke, "volcano", queue_name="team-a")


def test_a_queue_name_kueue_would_refuse_is_refused_with_its_fix(oke):
    with pytest.raises(tj.TrainJobError, match=r"queue-name.*Kueue's admission webhook.*fix: train_queue_name"):
        make(oke, "job", queue_name="Team A")


@pytest.mark.parametrize("mode", ["jobset", "trainjob"])
def test_the_longest_run_name_leaves_room_for_the_jobsets_pod_names(oke, mode):
    """JobSet refuses pod names over 63 characters (<name>-node-0-<index>-<5>):
    names cut at 40 leave room for any node count one would run."""
    objects = tj.manifests(oke, mode, "r" * 80, 100000, LAUNCH_ARGS, RUN_DIR, PORT)
    assert objects[-1]["metadata"]["name"] == "r" * 40


# ------------------------------------------------- the container's script, run

STUB = """import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}))
"""


@pytest.mark.parametrize("mode, pod, variables, rdzv, local", [
    ("job", JOB + "-1-x7k2p", {"JOB_COMPLETION_INDEX": "1"}, JOB + "-0." + JOB, JOB + "-1." + JOB),
    ("pytorchjob", JOB + "-worker-1", {"REPLICA_INDEX": "1"}, JOB + "-worker-0", JOB + "-worker-1"),
    ("volcano", "a-worker-1", {"VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "a-worker-0.a,a-worker-1.a"},
     "a-worker-0.a", "a-worker-1.a"),
    ("jobset", JOB + "-node-0-1-x7k2p", {"JOB_COMPLETION_INDEX": "1"}, JOB + "-node-0-0." + JOB,
     JOB + "-node-0-1." + JOB),
    ("trainjob", JOB + "-node-0-1-x7k2p", {"JOB_COMPLETION_INDEX": "1"}, JOB + "-node-0-0." + JOB,
     JOB + "-node-0-1." + JOB),
])
def test_container_script_runs_the_launcher_with_the_modes_rank_and_addresses(
        oke, tmp_path, mode, pod, variables, rdzv, local):
    objects = make(oke, mode)
    if mode == "trainjob":
        # Trainer puts the TrainJob's command into the runtime's node container.
        main = {"command": objects[-1]["spec"]["trainer"]["command"]}
    else:
        main = container(pod_spec(objects[-1]), tj.container_name(mode))
    plugins = tmp_path / "opt" / "plugins"
    plugins.mkdir(parents=True)
    bindir = tmp_path / "opt" / "files" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "mlinfra").write_text(STUB)
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    # Nothing else of the pod's environment (no BASH_ENV); python3 from PATH.
    env = dict(variables, PATH=os.environ["PATH"], MLINFRA_PLUGINS_DIR=str(plugins), POD_NAME=pod)
    proc = subprocess.run(main["command"], env=env, cwd=str(workdir), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    run_dir = "%s/%s/%s" % (RUN_DIR, RUN_ID, pod)
    assert got["argv"] == ["train", "start", "--wait", "--run-dir", run_dir, "--run-id", RUN_ID, "--node-rank", "1",
                           "--rdzv-host", rdzv, "--local-addr", local, "--resolve-timeout", "600"] + LAUNCH_ARGS
    assert got["cwd"] == str(workdir)
    # The runs' directory exists (the launcher makes the pod's own).
    assert (workdir / RUN_DIR / RUN_ID).is_dir()


def test_container_script_takes_node_rank_0_and_the_resolve_timeout(oke, tmp_path):
    job = tj.manifests(oke, "job", "r0", 2, ["--", "x"], "runs", 29500, resolve_timeout=45)[1]
    (tmp_path / "plugins").mkdir()
    bindir = tmp_path / "files" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "mlinfra").write_text(STUB)
    env = {"PATH": os.environ["PATH"], "MLINFRA_PLUGINS_DIR": str(tmp_path / "plugins"), "POD_NAME": "r0-0-abcde",
           "JOB_COMPLETION_INDEX": "0"}
    proc = subprocess.run(container(pod_spec(job), "trainer")["command"], env=env, cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["argv"] == [
        "train", "start", "--wait", "--run-dir", "runs/r0/r0-0-abcde", "--run-id", "r0", "--node-rank", "0",
        "--rdzv-host", "r0-0.r0", "--local-addr", "r0-0.r0", "--resolve-timeout", "45", "--", "x"]


# ------------------------------------------------------------------ refusals

@pytest.mark.parametrize("mode", tj.MODES)
def test_per_pod_storage_is_refused(moc, mode):
    before = copy.deepcopy(moc)
    with pytest.raises(tj.TrainJobError, match="cluster_storage_mode: shared"):
        make(moc, mode)
    assert moc == before


def test_per_pod_render_with_a_shared_claim_keeps_the_pods_annotations(moc):
    # The same pods with a shared workspace (as cluster_storage_mode: shared
    # renders it): the NIC attachments of the moc pods are kept.
    shared = copy.deepcopy(moc)
    del shared["spec"]["volumeClaimTemplates"]
    shared["spec"]["template"]["spec"]["volumes"].append(
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "h-kim-workspace"}})
    template = pod_spec(make(shared, "job")[1])
    assert template["metadata"]["annotations"] == moc["spec"]["template"]["metadata"]["annotations"]
    assert "hostNetwork" not in template["spec"]


@pytest.mark.parametrize("mode", ["exec", "mpijob", "", "Job"])
def test_unknown_mode_is_refused(oke, mode):
    with pytest.raises(tj.TrainJobError, match="use one of job, pytorchjob, volcano"):
        make(oke, mode)


@pytest.mark.parametrize("replicas", [0, -1, "0"])
def test_no_replicas_is_refused(oke, replicas):
    with pytest.raises(tj.TrainJobError, match="at least one pod"):
        make(oke, "job", replicas=replicas)


def test_template_without_trainer_is_refused(oke):
    other = copy.deepcopy(oke)
    input_trainer(other)["name"] = "main"
    with pytest.raises(tj.TrainJobError, match="no 'trainer' container"):
        make(other, "job")


# ------------------------------------------------------- pod_index, pod_states

@pytest.mark.parametrize("metadata, index", [
    ({"name": "j-0-abcde", "labels": {"batch.kubernetes.io/job-completion-index": "3"}}, 3),
    ({"name": "j-worker-0", "labels": {"training.kubeflow.org/replica-index": "2"}}, 2),
    ({"name": "j-worker-0", "annotations": {"volcano.sh/task-index": "4"}}, 4),
    ({"name": "x-worker-3"}, 3),
    ({"name": "x-worker-12", "labels": None, "annotations": None}, 12),
    ({"name": "j-2-abcde"}, 2),
    ({"name": "run-2024-worker-0"}, 0),
    ({"name": "run-2024-1-x7k2p"}, 1),
    ({"name": "x-5", "labels": {"batch.kubernetes.io/job-completion-index": "a"}}, 5),
    ({"name": "nothing"}, None),
    ({}, None),
])
def test_pod_index(metadata, index):
    assert tj.pod_index({"metadata": metadata}) == index


def pod(name, phase=None, containers=(), index=None, node=None, **status):
    labels = {"batch.kubernetes.io/job-completion-index": str(index)} if index is not None else {}
    result = {"metadata": {"name": name, "labels": labels, "uid": "uid-" + name}, "status": dict(status)}
    if node:
        result["spec"] = {"nodeName": node}
    if phase is not None:
        result["status"]["phase"] = phase
    if containers:
        result["status"]["containerStatuses"] = list(containers)
    return result


def terminated(name, code, reason, message=None):
    state = {"exitCode": code, "reason": reason}
    if message:
        state["message"] = message
    return {"name": name, "state": {"terminated": state}}


def test_pod_states_of_a_job():
    pods = [
        pod("j-2-ccccc", "Failed", [terminated("sidecar", 0, "Completed"), terminated("trainer", 1, "Error")],
            index=2),
        pod("j-0-aaaaa", "Succeeded", [terminated("trainer", 0, "Completed")], index=0, node="gpu-a"),
        pod("j-3-ddddd", "Pending", index=3),
        pod("j-1-bbbbb", "Running", [{"name": "trainer", "state": {"running": {"startedAt": "t"}}}], index=1),
        pod("j-4-eeeee", "Failed", reason="Evicted", message="The node was low on resource: memory.", index=4),
        pod("stray"),
    ]
    states = tj.pod_states(pods, "job")
    # The uid and node of each, for a soak's facts (no node before it is scheduled).
    assert [(state["uid"], state["node"]) for state in states] == [
        ("uid-j-0-aaaaa", "gpu-a"), ("uid-j-1-bbbbb", None), ("uid-j-2-ccccc", None), ("uid-j-3-ddddd", None),
        ("uid-j-4-eeeee", None), ("uid-stray", None)]
    assert [dict((key, value) for key, value in state.items() if key not in ("uid", "node")) for state in states] == [
        {"pod": "j-0-aaaaa", "index": 0, "phase": "Succeeded", "state": "succeeded", "exit_code": 0,
         "reason": "Completed", "message": None},
        {"pod": "j-1-bbbbb", "index": 1, "phase": "Running", "state": "running", "exit_code": None,
         "reason": None, "message": None},
        {"pod": "j-2-ccccc", "index": 2, "phase": "Failed", "state": "failed", "exit_code": 1,
         "reason": "Error", "message": None},
        {"pod": "j-3-ddddd", "index": 3, "phase": "Pending", "state": "running", "exit_code": None,
         "reason": None, "message": None},
        {"pod": "j-4-eeeee", "index": 4, "phase": "Failed", "state": "failed", "exit_code": None,
         "reason": "Evicted", "message": "The node was low on resource: memory."},
        # No phase yet counts as Pending; no index sorts last.
        {"pod": "stray", "index": None, "phase": "Pending", "state": "running", "exit_code": None,
         "reason": None, "message": None},
    ]


def test_pod_states_read_the_modes_container():
    statuses = [terminated("trainer", 0, "Completed"), terminated("pytorch", 137, "OOMKilled", "out of memory")]
    pods = [pod("j-worker-1", "Failed", statuses), pod("j-worker-0", "Succeeded", [terminated("pytorch", 0, "Done")])]
    states = tj.pod_states(pods, "pytorchjob")
    assert [(s["pod"], s["index"], s["state"], s["exit_code"], s["reason"], s["message"]) for s in states] == [
        ("j-worker-0", 0, "succeeded", 0, "Done", None),
        ("j-worker-1", 1, "failed", 137, "OOMKilled", "out of memory"),
    ]
    for mode in ("job", "volcano"):
        assert [(s["exit_code"], s["reason"]) for s in tj.pod_states(pods, mode)] == [(None, None), (0, "Completed")]


def test_pod_states_of_nothing():
    assert tj.pod_states([], "job") == []


# ------------------------------------------------------------------ teardown

def test_teardown_deletes_every_kind_of_object_a_run_makes_by_the_labels_it_has(oke):
    """roles/train/tasks/teardown.yml deletes, by the runs' labels, each kind
    of train_job_kinds and train_run_extra_kinds (roles/train/vars): every
    object of every start mode is of one of those kinds and carries them."""
    with open(os.path.join(REPO, "roles", "train", "vars", "main.yml")) as handle:
        train_vars = yaml.safe_load(handle)
    deleted = {(kind["api_version"], kind["kind"])
               for kind in list(train_vars["train_job_kinds"].values()) + train_vars["train_run_extra_kinds"]}
    app = oke["metadata"]["name"]
    made = set()
    for mode in tj.MODES:
        for obj in make(oke, mode):
            made.add((obj["apiVersion"], obj["kind"]))
            labels = obj["metadata"]["labels"]
            assert labels["app.kubernetes.io/name"] == app + "-train", (mode, obj["kind"])
            assert labels["app.kubernetes.io/managed-by"] == "mlinfra.multinode", (mode, obj["kind"])
    assert made == deleted


# ------------------------------------------------------------------ pod_endings

def test_pod_endings_read_the_launcher_s_status_the_api_and_the_metrics():
    pods = tj.pod_states([
        pod("j-0-aaaaa", "Succeeded", [terminated("trainer", 0, "Completed")], index=0, node="gpu-a"),
        pod("j-1-bbbbb", "Failed", [terminated("trainer", 1, "Error", "rank 1 died")], index=1),
        pod("j-2-ccccc", "Pending", index=2)], "job")
    status = {"node_rank": 0, "seconds": 12.5, "run_dir": "/workspace/runs/r", "port_counters": {"mlx5_0/1": {}}}
    log = "\n".join(["[rank0]: step:  1  loss:  5.5000  tps: 1,000  tflops: 1.0  mfu: 1.00%",
                     "[rank0]: step: 30  loss:  3.1000  tps: 2,000  tflops: 2.0  mfu: 2.00%",
                     json.dumps(status)])
    endings = tj.pod_endings(pods, {"j-0-aaaaa": log, "j-1-bbbbb": "Traceback ...\nRuntimeError: boom"})
    assert [ending["pod"] for ending in endings] == ["j-0-aaaaa", "j-1-bbbbb", "j-2-ccccc"]
    first, second, third = (ending["json"] for ending in endings)
    # The launcher's own last line, and the metrics of TorchTitan's lines.
    assert dict((key, first[key]) for key in status) == status
    assert (first["state"], first["exit_code"], first["error"]) == ("succeeded", 0, None)
    assert first["metrics"]["step"] == 30 and (first["first_loss"], first["latest_loss"]) == (5.5, 3.1)
    assert first["log_tail"] == log.splitlines()
    # No status line: the node rank is the pod's index; the API says why it failed.
    assert (second["node_rank"], second["seconds"], second["state"], second["exit_code"]) == (1, None, "failed", 1)
    assert second["error"] == "Error: rank 1 died" and second["metrics"] is None
    # Never started: no log at all.
    assert (third["node_rank"], third["state"], third["log_tail"], third["error"]) == (2, "running", [], None)


# ------------------------------------------------------------------ launch_args

LAUNCH = {"train_start_mode": "exec", "replicas": 2, "cluster_host_network": False, "train_rdzv_host": "",
          "train_nproc_per_pod": 8, "train_rdzv_port": 29500, "train_local_addr": "", "train_workload": "torchtitan",
          "train_config": "", "train_default_config": "/opt/llama3_8b.toml", "train_script": "", "train_args": [],
          "train_overrides": {}, "train_float8": False}


def started(args):
    return launcher_parser().parse_args(["start", "--run-dir", "/r", "--run-id", "r"] + args)


def test_launch_args_of_torchtitan_with_its_shortcuts_and_overrides_winning():
    settings = dict(LAUNCH, train_steps=100, train_compile="yes", train_tp=2, train_float8="true",
                    train_overrides={"training.steps": 50, "activation_checkpoint.mode": "full"})
    args = tj.launch_args(settings, pods=["p-0", "p-1", "p-2"])
    options = started(args)
    assert (options.nnodes, options.nproc_per_node, options.rdzv_port, options.rdzv_host) == (3, 8, 29500, None)
    assert (options.workload, options.config) == ("torchtitan", "/opt/llama3_8b.toml")
    assert options.override == [
        "training.steps=50", "compile.enable=true", "parallelism.tensor_parallel_degree=2",
        "model.converters=quantize.linear.float8", "quantize.linear.float8.enable_fsdp_float8_all_gather=true",
        "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp=true", "activation_checkpoint.mode=full"]
    assert "--" not in args


def test_launch_args_of_the_demo_put_its_shortcuts_after_train_args():
    settings = dict(LAUNCH, train_workload="demo", train_args=["--steps", "30", "--log-freq", 5], train_steps=24,
                    train_seq_len=64, train_start_mode="job", replicas=4)
    args = tj.launch_args(settings, pods=["ignored"])
    assert args[args.index("--"):] == ["--", "--steps", "30", "--log-freq", "5", "--steps", "24", "--seq-len", "64"]
    options = started(args[:args.index("--")])
    assert (options.nnodes, options.workload, options.override) == (4, "demo", [])


def test_launch_args_rendezvous_on_pod_0_s_node_with_host_networking_in_exec_mode_only():
    host = dict(LAUNCH, cluster_host_network=True, train_workload="script", train_script="train.py")
    assert started(tj.launch_args(host, ["p-0"], "gpu-07")).rdzv_host == "gpu-07"
    assert started(tj.launch_args(dict(host, train_rdzv_host="10.0.0.9"), ["p-0"], "gpu-07")).rdzv_host == "10.0.0.9"
    assert started(tj.launch_args(dict(host, train_start_mode="job"), ["p-0"], "gpu-07")).rdzv_host is None
    assert started(tj.launch_args(dict(host, cluster_host_network=False), ["p-0"], "gpu-07")).rdzv_host is None
    options = started(tj.launch_args(dict(host, train_local_addr="10.1.1.1"), ["p-0"]))
    assert (options.workload, options.script, options.local_addr) == ("script", "train.py", "10.1.1.1")
