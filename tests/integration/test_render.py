"""render.yml writes what deploy.yml applies; for the real clusters' inventories
(barcelona, moc, oke) the local cluster's API server accepts every manifest in
a server-side dry run (its CRDs carry the SR-IOV, Multus and OpenShift
schemas). The namespaces themselves are created for real (a namespaced dry
run needs its namespace) and deleted afterwards."""

import pytest
import yaml
from ansible_cli import run_playbook
from kubernetes import client, dynamic

pytestmark = pytest.mark.integration

FIELD_MANAGER = "mlinfra-render-test"


def render(inventory, directory):
    run = run_playbook("render.yml", inventory, {"render_dir": str(directory)})
    assert not run.failed, run.failure_messages() or run.stderr
    documents = {}
    for path in sorted(directory.glob("*.yaml")):
        documents[path.stem] = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return documents


def dry_run_apply(dyn, doc):
    resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    kwargs = {"namespace": doc["metadata"]["namespace"]} if resource.namespaced else {}
    return resource.server_side_apply(body=doc, name=doc["metadata"]["name"], field_manager=FIELD_MANAGER,
                                      force_conflicts=True, dry_run="All", **kwargs)


@pytest.fixture
def dyn(api_client):
    return dynamic.DynamicClient(api_client)


@pytest.fixture
def real_namespaces(api_client):
    """Creates the namespaces a test asks for; deletes those it created."""
    core = client.CoreV1Api(api_client)
    created = []

    def ensure(name):
        try:
            core.read_namespace(name)
        except client.ApiException as err:
            assert err.status == 404
            core.create_namespace({"metadata": {"name": name}})
            created.append(name)

    yield ensure
    for name in created:
        core.delete_namespace(name)


@pytest.mark.parametrize("inventory", ["barcelona", "moc", "oke"])
def test_every_manifest_of_the_inventory_is_accepted(dyn, real_namespaces, tmp_path, inventory):
    documents = render(inventory, tmp_path)
    assert {"autodetect", "statefulset"} <= set(documents)
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
    if inventory == "oke":
        assert statefulset["spec"]["template"]["spec"]["hostNetwork"] is True
    else:
        assert "k8s.v1.cni.cncf.io/networks" in statefulset["spec"]["template"]["metadata"]["annotations"]


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
