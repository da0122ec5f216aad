"""Every inventory x security mode x network mode x start mode that render.yml
supports, accepted by the operators' own schemas on the local cluster (the
SR-IOV operator's, Multus', OpenShift's, Volcano's, the Kubeflow Training
Operator's and Trainer's, JobSet's CRDs, served at their pinned versions) in
a server-side dry run, together with the pod each run's controller would
make from its template.

render.yml runs once per inventory x security mode x network mode (with the
shared workspace that the Job start modes need), writing one start mode's
run in turn; the other start modes' runs are made from the same rendered
StatefulSet and launcher arguments by the function render.yml's filter calls
(train_jobs.manifests), so every start mode of every combination is judged
while each is written by render.yml itself at least three times. What the
operators' admission webhooks would refuse is refused before this
(test_admission_rules.py); the webhooks themselves do not run here."""

import copy
import itertools

import pytest
from kubernetes import client
from rendering import dry_run_apply, render

from ansible_collections.mlinfra.multinode.plugins.module_utils import train_jobs

pytestmark = pytest.mark.integration

INVENTORIES = ["barcelona", "moc", "oke", "local"]
SECURITY_MODES = ["privileged", "ipc_lock"]
NETWORK_MODES = {"rdma": {}, "tcp": {"cluster_network_mode": "tcp", "cluster_rdma_nics": []}}
START_MODES = list(train_jobs.MODES)
COMBINATIONS = list(itertools.product(INVENTORIES, SECURITY_MODES, NETWORK_MODES))
RUN_ID = "Matrix.Run-1"


def pod_templates(run_object):
    """The pod templates a run's object holds, wherever its kind keeps them."""
    spec = run_object["spec"]
    if run_object["kind"] == "PyTorchJob":
        return [replica["template"] for replica in spec["pytorchReplicaSpecs"].values()]
    if run_object["kind"] == "TrainingRuntime":
        return [job["template"]["spec"]["template"] for job in spec["template"]["spec"]["replicatedJobs"]]
    if run_object["kind"] == "JobSet":
        return [job["template"]["spec"]["template"] for job in spec["replicatedJobs"]]
    if "tasks" in spec:
        return [task["template"] for task in spec["tasks"]]
    return [spec["template"]] if "template" in spec else []


def launch_of(run_objects):
    """(run_dir, run_id, launcher arguments) of a rendered run, read back from
    its container's command (/bin/bash -c SCRIPT mlinfra-train DIR ID ARGS)."""
    workload = run_objects[-1]
    if workload["kind"] == "TrainJob":
        command = workload["spec"]["trainer"]["command"]
    else:
        containers = pod_templates(workload)[0]["spec"]["containers"]
        command = [c for c in containers if c["name"] in ("trainer", "pytorch")][0]["command"]
    return command[4], command[5], command[6:]


def as_pod(template, namespace, name):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "labels": template["metadata"].get("labels", {})},
           "spec": copy.deepcopy(template["spec"])}
    if not any(container.get("command") for container in pod["spec"]["containers"]):
        # A runtime's node container gets its command from the TrainJob.
        pod["spec"]["containers"][0]["command"] = ["true"]
    return pod


@pytest.mark.parametrize("inventory, security, network", COMBINATIONS,
                         ids=["-".join(combination) for combination in COMBINATIONS])
def test_every_start_mode_of_every_combination_is_accepted(
        dyn, real_namespaces, tmp_path, inventory, security, network):
    rendered_mode = START_MODES[COMBINATIONS.index((inventory, security, network)) % len(START_MODES)]
    extra = dict(NETWORK_MODES[network], cluster_security_mode=security, cluster_storage_mode="shared",
                 train_start_mode=rendered_mode, train_run_id=RUN_ID)
    documents = render(inventory, tmp_path, extra)
    statefulset = next(doc for doc in documents["statefulset"] if doc["kind"] == "StatefulSet")
    namespace = statefulset["metadata"]["namespace"]
    run_dir, run_id, launch_args = launch_of(documents["train"])
    assert run_id == RUN_ID
    replicas = int(launch_args[launch_args.index("--nnodes") + 1])
    runs = {mode: train_jobs.manifests(statefulset, mode, run_id, replicas, launch_args, run_dir,
                                       launch_args[launch_args.index("--rdzv-port") + 1])
            for mode in START_MODES}
    # What render.yml wrote is what the function gives.
    assert runs[rendered_mode] == documents["train"]

    everything = [doc for stem in ("sriov", "autodetect", "image", "statefulset") for doc in documents[stem]]
    for doc in everything:
        if doc["kind"] == "Namespace":
            real_namespaces(doc["metadata"]["name"])
        elif doc["metadata"].get("namespace"):
            real_namespaces(doc["metadata"]["namespace"])
    real_namespaces(namespace)
    account = statefulset["spec"]["template"]["spec"]["serviceAccountName"]
    try:
        client.CoreV1Api(dyn.client).create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    except client.ApiException as err:
        assert err.status == 409
    for doc in everything:
        assert dry_run_apply(dyn, doc).metadata.name == doc["metadata"]["name"]
    for mode, objects in runs.items():
        for doc in objects:
            assert dry_run_apply(dyn, doc).metadata.name == doc["metadata"]["name"], mode
            for index, template in enumerate(pod_templates(doc)):
                pod = dry_run_apply(dyn, as_pod(template, namespace, "%s-%s-%d" % (mode, doc["kind"].lower(), index)))
                assert bool(pod.spec.hostNetwork) == (inventory == "oke"), mode

    if security == "ipc_lock":
        trainer = [c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == "trainer"][0]
        assert trainer["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert not trainer["securityContext"].get("privileged")
    sriov_kinds = {doc["kind"] for doc in documents["sriov"]}
    if network == "tcp" or inventory == "oke":
        assert sriov_kinds == set()
    else:
        assert sriov_kinds & {"SriovNetwork", "NetworkAttachmentDefinition"}
