"""render.yml writes what deploy.yml applies; for the real clusters' inventories
(barcelona, moc, oke) the local cluster's API server accepts every manifest in
a server-side dry run (its CRDs carry the SR-IOV, Multus and OpenShift
schemas). The namespaces themselves are created for real (a namespaced dry
run needs its namespace; the SR-IOV operator's one included) and deleted
afterwards."""

import json
from pathlib import Path

import pytest
import yaml
from ansible_cli import run_doc_command, run_playbook
from kubernetes import client
from rendering import dry_run_apply, render

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# One file per role, written even when the role has nothing to apply.
FILES = ["autodetect", "image", "sriov", "statefulset", "train"]


@pytest.mark.parametrize("inventory, extra", [
    ("barcelona", {}),
    ("moc", {}),
    ("oke", {}),
    ("moc", {"cluster_rdma_network_type": "macvlan"}),
], ids=["barcelona", "moc", "oke", "moc-macvlan"])
def test_every_manifest_of_the_inventory_is_accepted(dyn, real_namespaces, tmp_path, inventory, extra):
    documents = render(inventory, tmp_path, extra)
    assert sorted(documents) == FILES
    everything = [doc for docs in documents.values() for doc in docs]
    for doc in everything:
        if doc["kind"] == "Namespace":
            real_namespaces(doc["metadata"]["name"])
        elif doc["metadata"].get("namespace"):
            real_namespaces(doc["metadata"]["namespace"])
    accepted = [dry_run_apply(dyn, doc) for doc in everything]
    assert [(a.kind, a.metadata.name) for a in accepted] == [(d["kind"], d["metadata"]["name"]) for d in everything]
    kinds = {doc["kind"] for doc in everything}
    assert {"StatefulSet", "Service", "ServiceAccount", "ConfigMap"} <= kinds
    statefulset = next(doc for doc in everything if doc["kind"] == "StatefulSet")
    namespace = statefulset["metadata"]["namespace"]
    if inventory == "oke":
        assert statefulset["spec"]["template"]["spec"]["hostNetwork"] is True
        # Host networking attaches nothing, and Kubernetes runs a prebuilt image.
        assert documents["sriov"] == [] and documents["image"] == []
        assert (tmp_path / "sriov.yaml").read_text() == "" and (tmp_path / "image.yaml").read_text() == ""
        return

    attached = json.loads(statefulset["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    nics = [network["name"] for network in attached]
    if extra.get("cluster_rdma_network_type") == "macvlan":
        assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in documents["sriov"]] == [
            ("NetworkAttachmentDefinition", nic, namespace) for nic in nics]
        assert {json.loads(d["spec"]["config"])["type"] for d in documents["sriov"]} == {"macvlan"}
    else:
        # The policies, then the networks the pods attach to by name, in
        # the operator's namespace, each serving the pods' namespace.
        assert [(d["kind"], d["metadata"]["name"]) for d in documents["sriov"]] == (
            [("SriovNetworkNodePolicy", nic) for nic in nics] + [("SriovNetwork", nic) for nic in nics])
        assert {d["metadata"]["namespace"] for d in documents["sriov"]} == {"openshift-sriov-network-operator"}
        assert {d["spec"]["networkNamespace"] for d in documents["sriov"] if d["kind"] == "SriovNetwork"} == {namespace}

    # The build pushes to the image the pods run, from the Containerfile,
    # with the autodetect ConfigMaps as its context. The Build itself is not
    # rendered (roles/image/tasks/manifests.yml says why).
    assert [d["kind"] for d in documents["image"]] == ["ImageStream", "BuildConfig"]
    stream, buildconfig = documents["image"]
    image = statefulset["spec"]["template"]["spec"]["containers"][0]["image"]
    registry_namespace, name_and_tag = image.split("/")[-2:]
    assert stream["metadata"]["namespace"] == buildconfig["metadata"]["namespace"] == registry_namespace == namespace
    assert buildconfig["spec"]["output"]["to"] == {"kind": "ImageStreamTag", "name": name_and_tag}
    assert stream["metadata"]["name"] == name_and_tag.split(":")[0]
    assert buildconfig["spec"]["source"]["dockerfile"] == (ROOT / "files" / "Containerfile").read_text()
    assert [c["configMap"]["name"] for c in buildconfig["spec"]["source"]["configMaps"]] == [
        d["metadata"]["name"] for d in documents["autodetect"]]


@pytest.mark.parametrize("mode, kinds", [
    ("job", [("v1", "Service"), ("batch/v1", "Job")]),
    ("pytorchjob", [("kubeflow.org/v1", "PyTorchJob")]),
    ("volcano", [("batch.volcano.sh/v1alpha1", "Job")]),
])
def test_a_training_run_of_each_job_start_mode_is_accepted(dyn, real_namespaces, tmp_path, mode, kinds):
    """oke (host networking, a shared workspace, the seeds' Volcano and
    PyTorchJob set-up): the run's objects pass a server-side dry run, and so
    does the pod each operator would make from its template (the CRDs here
    keep templates unvalidated, as the operators' own CRDs do)."""
    documents = render("oke", tmp_path, {"train_start_mode": mode, "train_run_id": "Llama3.Run-7"})
    objects = documents["train"]
    assert [(doc["apiVersion"], doc["kind"]) for doc in objects] == kinds
    namespace = objects[0]["metadata"]["namespace"]
    real_namespaces(namespace)
    for doc in objects:
        assert dry_run_apply(dyn, doc).metadata.name == "llama3-run-7"
    run = objects[-1]
    spec = run["spec"]
    template = (spec.get("template") or spec.get("pytorchReplicaSpecs", {}).get("Worker", {}).get("template")
                or spec["tasks"][0]["template"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama3-run-7-probe", "namespace": namespace,
                                                           "labels": template["metadata"]["labels"]},
           "spec": template["spec"]}
    # Pod admission looks the service account up: deploy.yml makes it.
    account = template["spec"]["serviceAccountName"]
    try:
        client.CoreV1Api(dyn.client).create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    except client.ApiException as err:
        assert err.status == 409
    assert dry_run_apply(dyn, pod).spec.hostNetwork is True
    statefulset = next(doc for doc in documents["statefulset"] if doc["kind"] == "StatefulSet")
    # The StatefulSet's pod, made a run's: same image, devices, volumes.
    assert template["spec"]["volumes"] == statefulset["spec"]["template"]["spec"]["volumes"]
    assert template["spec"]["initContainers"] == statefulset["spec"]["template"]["spec"]["initContainers"]
    container = template["spec"]["containers"][0]
    assert container["name"] == ("pytorch" if mode == "pytorchjob" else "trainer")
    assert container["command"][:2] == ["/bin/bash", "-c"] and "start --wait" in container["command"][2]
    launch = container["command"][3:]
    assert launch[:3] == ["mlinfra train", "mlinfra-runs", "Llama3.Run-7"]
    assert launch[launch.index("--nnodes") + 1] == "2" and launch[launch.index("--nproc-per-node") + 1] == "8"
    assert launch[launch.index("--config") + 1] == "/opt/mlinfra/files/train/llama3_8b.toml"


def test_the_dry_run_does_reject_a_wrong_manifest(dyn, real_namespaces, tmp_path):
    """The control: the same path refuses what the API server would refuse."""
    documents = render("moc", tmp_path)
    statefulset = next(doc for doc in documents["statefulset"] if doc["kind"] == "StatefulSet")
    real_namespaces(statefulset["metadata"]["namespace"])
    statefulset["spec"]["podManagementPolicy"] = "Sometimes"
    with pytest.raises(client.ApiException) as err:
        dry_run_apply(dyn, statefulset)
    assert err.value.status == 422 and "spec.podManagementPolicy" in err.value.body


def test_render_needs_no_cluster_but_still_validates_the_inventory(tmp_path):
    run = run_playbook("render.yml", "moc", {"render_dir": str(tmp_path), "cluster_network_mode": "infiniband"})
    assert run.failed
    assert "cluster_network_mode" in " ".join(run.failure_messages())
    assert not list(tmp_path.iterdir())


def test_rendering_twice_writes_the_same_files(tmp_path):
    """Render is deterministic: a second render of an unchanged inventory
    differs in no byte, so a diff of two renders shows only real changes."""
    first, second = tmp_path / "first", tmp_path / "second"
    for directory in (first, second):
        run = run_doc_command("ansible-playbook playbooks/render.yml -i inventories/<cluster> [-e render_dir=DIR]", "moc",
                              render_dir=str(directory))
        assert not run.failed, run.failure_messages() or run.stderr
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in second.iterdir()) == [
        name + ".yaml" for name in FILES]
    for path in sorted(first.iterdir()):
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name
        # moc trains in the running pods (train_start_mode exec): no run objects.
        assert (path.stat().st_size == 0) == (path.name == "train.yaml"), path.name
    # What the user reads last: how to apply them, and why server-side,
    # which holds while the code's ConfigMap is too large for the
    # last-applied annotation of a client-side apply.
    said = run.last_words()
    assert "apply them server-side, `oc apply --server-side -f %s`" % second in said, said
    code = next(doc for doc in yaml.safe_load_all((second / "autodetect.yaml").read_text())
                if doc["metadata"]["name"].endswith("-pod-runtime"))
    assert len(json.dumps(code)) > 262144
