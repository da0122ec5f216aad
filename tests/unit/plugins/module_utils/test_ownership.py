"""module_utils/cluster/ownership.py: whose a live object is, what a deploy would
touch (the claims a StatefulSet makes included), and what the user reads
when deploy.yml refuses. The manifests are the collection's own, rendered
from the local inventory's settings."""

import pytest
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import ownership
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import workload_manifests
from manifest_checks import inventory_settings

SETTINGS = inventory_settings("local")
APP = SETTINGS["cluster_app_name"]


@pytest.mark.parametrize("labels,owned", [
    ({"app.kubernetes.io/managed-by": "mlinfra.multinode", "app.kubernetes.io/instance": APP}, True),
    # Another deployment of the collection in the same namespace.
    ({"app.kubernetes.io/managed-by": "mlinfra.multinode", "app.kubernetes.io/instance": "other"}, False),
    # Made before the instance label: the deployment's names.
    ({"app.kubernetes.io/managed-by": "mlinfra.multinode", "app.kubernetes.io/name": APP}, True),
    ({"app.kubernetes.io/managed-by": "mlinfra.multinode", "app.kubernetes.io/name": APP + "-probe"}, True),
    ({"app.kubernetes.io/managed-by": "mlinfra.multinode", "app.kubernetes.io/name": "other"}, False),
    # The right name, made by someone else (Helm, by hand).
    ({"app.kubernetes.io/name": APP}, False),
    ({"app.kubernetes.io/name": APP, "app.kubernetes.io/managed-by": "Helm"}, False),
    ({}, False),
    (None, False),
])
def test_whose_an_object_is(labels, owned):
    assert ownership.is_owned(labels, APP) is owned


def test_every_object_the_statefulset_role_renders_is_the_deployments():
    manifests = workload_manifests(SETTINGS)
    objects = manifests["base"] + manifests["claims"] + [manifests["statefulset"]]
    for manifest in objects:
        assert ownership.is_owned(manifest["metadata"].get("labels"), APP), manifest["kind"]
    for template in manifests["statefulset"]["spec"].get("volumeClaimTemplates", []):
        assert ownership.is_owned(template["metadata"]["labels"], APP)
    pod_labels = manifests["statefulset"]["spec"]["template"]["metadata"]["labels"]
    assert ownership.is_owned(pod_labels, APP)


def test_the_refs_name_the_claims_the_statefulset_makes():
    manifests = workload_manifests(dict(SETTINGS, replicas=2, cluster_storage_mode="per-pod"))
    refs = ownership.object_refs(manifests["base"] + [manifests["statefulset"]])
    namespace = SETTINGS["cluster_namespace"]
    assert [ownership.describe(ref) for ref in refs][-3:] == [
        "StatefulSet %s/%s" % (namespace, APP),
        "PersistentVolumeClaim %s/workspace-%s-0" % (namespace, APP),
        "PersistentVolumeClaim %s/workspace-%s-1" % (namespace, APP)]
    (namespace_ref,) = [ref for ref in refs if ref["kind"] == "Namespace"]
    assert namespace_ref == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    # Only what names the object: a deletion takes them as they are.
    assert all(set(ref) == {"apiVersion", "kind", "metadata"} for ref in refs)


def test_sorted_out_and_the_refusal_names_each_object_and_the_fix():
    refs = [{"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "team-alice"}}
            for kind, name in (("ConfigMap", "h-kim-autodetect-code"), ("ServiceAccount", "h-kim"),
                               ("Service", "h-kim-headless"))]
    live = [{"team": "alice"}, ownership.owner_labels("h-kim"), None]
    result = ownership.sort_out(refs, live, "h-kim")
    assert [r["metadata"]["name"] for r in result["owned"]] == ["h-kim"]
    assert [r["metadata"]["name"] for r in result["absent"]] == ["h-kim-headless"]
    assert result["foreign"][0]["metadata"]["labels"] == {"team": "alice"}
    assert ownership.takeover_message(result["foreign"], "h-kim", "team-alice", "deploy.yml") == (
        "deploy.yml would change objects that this deployment (cluster_app_name=h-kim in namespace team-alice) did "
        "not create: ConfigMap team-alice/h-kim-autodetect-code (no app.kubernetes.io labels); they lack "
        "app.kubernetes.io/instance=h-kim and app.kubernetes.io/managed-by=mlinfra.multinode. Nothing was changed. "
        "Fix: give the deployment names of its own (another cluster_app_name or cluster_namespace), or have their "
        "owner remove them")


@pytest.mark.parametrize("labels,allow,holds_owned,refused", [
    (None, False, False, False),                                    # absent: deploy.yml creates it
    (ownership.owner_labels("h-kim"), False, False, False),         # created by this deployment
    ({"team": "alice"}, False, False, True),
    ({"team": "alice"}, True, False, False),                        # cluster_allow_existing_namespace
    ({}, False, True, False),                                       # made by a version before the labels
    (ownership.owner_labels("other"), False, False, True),          # another deployment's
])
def test_whose_namespace(labels, allow, holds_owned, refused):
    problem = ownership.namespace_problem(labels, "h-kim", "team-alice", allow, holds_owned)
    assert (problem is not None) is refused
    if refused:
        assert problem.startswith("namespace team-alice exists and was not created by this deployment")
        assert "-e cluster_allow_existing_namespace=true" in problem
