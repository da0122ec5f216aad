"""tools/localcluster/operators.py: the webhook configurations the local
cluster applies for an operator are the operator's own release manifests
(read from its pinned Go module), patched as its kustomization patches them,
each webhook pointed at 127.0.0.1 with the cluster's CA; the operators'
pins agree with the CRDs the cluster installs."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1].parent
SPEC = importlib.util.spec_from_file_location("mlinfra_localcluster_operators",
                                              ROOT / "tools" / "localcluster" / "operators.py")
operators = importlib.util.module_from_spec(SPEC)
# Registered before it runs: its dataclasses look their module up.
sys.modules[SPEC.name] = operators
SPEC.loader.exec_module(operators)
# What each operator is (beside it, and on the path once it is loaded).
catalog = sys.modules["operator_catalog"]
GO = ROOT / "tools" / "localcluster" / "go"


def required(moddir, module):
    text = (GO / moddir / "go.mod").read_text()
    return re.search(r"^\s*(?:require\s+)?%s (v\S+)" % re.escape(module), text, re.M).group(1)


@pytest.mark.parametrize("name", sorted(operators.OPERATORS))
def test_the_controller_runs_the_version_whose_crds_the_cluster_installs(name):
    operator = operators.OPERATORS[name]
    assert required(operator.moddir, operator.module) == required("crds", operator.module)


def test_jobsets_webhooks_are_its_own_served_on_loopback_and_only_for_its_pods():
    operator = operators.OPERATORS["jobset"]
    manifests, patches = operators.read_webhook_sources(GO, operator)
    configured = operators.webhook_configurations(operator, manifests, patches, 9443, "Q0E=")
    assert [(doc["kind"], doc["metadata"]["name"]) for doc in configured] == [
        ("MutatingWebhookConfiguration", "jobset-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "jobset-validating-webhook-configuration")]
    webhooks = dict((hook["name"], hook) for doc in configured for hook in doc["webhooks"])
    assert sorted(webhooks) == ["mjobset.kb.io", "mpod.kb.io", "vjobset.kb.io", "vpod.kb.io"]
    for hook in webhooks.values():
        assert hook["clientConfig"]["caBundle"] == "Q0E="
        assert re.match(r"^https://127\.0\.0\.1:9443/(mutate|validate)-", hook["clientConfig"]["url"])
        assert hook["failurePolicy"] == "Fail"
    # The kustomization's patches: the pod webhooks see the JobSet's pods
    # only. Without them every pod the cluster makes would go through the
    # JobSet operator, and none could be made while it is stopped.
    for name in ("mpod.kb.io", "vpod.kb.io"):
        assert webhooks[name]["objectSelector"] == {
            "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
    assert webhooks["vjobset.kb.io"]["clientConfig"]["url"].endswith("/validate-jobset-x-k8s-io-v1alpha2-jobset")
    # The manifests read are left as they were.
    assert "service" in manifests[0]["webhooks"][0]["clientConfig"]


def test_trainers_webhooks_take_its_kustomizations_added_selectors():
    operator = operators.OPERATORS["trainer"]
    manifests, patches = operators.read_webhook_sources(GO, operator)
    configured = operators.webhook_configurations(operator, manifests, patches, 9443, "Q0E=")
    webhooks = dict((hook["name"], hook) for doc in configured for hook in doc["webhooks"])
    assert sorted(webhooks) == ["defaulter.trainjob.trainer.kubeflow.org",
                                "validator.clustertrainingruntime.trainer.kubeflow.org",
                                "validator.trainingruntime.trainer.kubeflow.org",
                                "validator.trainjob.trainer.kubeflow.org"]
    # "add" patches: a runtime labelled so is left unvalidated, as in a release.
    for name in ("validator.clustertrainingruntime.trainer.kubeflow.org",
                 "validator.trainingruntime.trainer.kubeflow.org"):
        assert webhooks[name]["objectSelector"]["matchExpressions"][0]["key"] == \
            "trainer.kubeflow.org/webhook-validation"
    assert "objectSelector" not in webhooks["validator.trainjob.trainer.kubeflow.org"]


def test_the_training_operator_keeps_only_the_webhook_of_the_kind_it_runs():
    """Its release configures five kinds' webhooks; the local cluster runs
    its PyTorchJob controller only, and a webhook nobody serves would refuse
    every object of its kind."""
    operator = operators.OPERATORS["training-operator"]
    manifests, patches = operators.read_webhook_sources(GO, operator)
    (configured,) = operators.webhook_configurations(operator, manifests, patches, 9443, "Q0E=")
    assert configured["metadata"]["name"] == "training-operator-validator.training-operator.kubeflow.org"
    (hook,) = configured["webhooks"]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:9443/validate-kubeflow-org-v1-pytorchjob"
    assert len(manifests[0]["webhooks"]) == 5


def test_patches_other_than_replace_and_add_are_refused():
    operator = operators.OPERATORS["jobset"]
    manifest = {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}, "webhooks": [{"a": 1}]}
    with pytest.raises(operators.OperatorError, match="jobset: only replace and add patches are understood"):
        operators.webhook_configurations(operator, [manifest], {"MutatingWebhookConfiguration": [
            {"op": "remove", "path": "/webhooks/0"}]}, 1, "")
    added = {"kind": "X", "metadata": {"name": "m"}, "list": [1, 2]}
    operators._patch(added, {"op": "add", "path": "/list/-", "value": 3})
    operators._patch(added, {"op": "add", "path": "/list/0", "value": 0})
    assert added["list"] == [0, 1, 2, 3]


def test_an_unknown_operator_is_refused_naming_those_there_are():
    with pytest.raises(operators.OperatorError, match="no operator kueue-x: the local cluster runs jobset, kueue, "
                                                      "sriov-network-operator, trainer, training-operator, volcano, "):
        catalog.known(["jobset", "kueue-x"])


def test_volcanos_webhooks_are_those_its_chart_installs_by_their_own_names():
    """Volcano's webhook manager finds its configurations by name to add
    its CA: they keep the names its chart gives them, one per admission the
    chart's values enable, and the manager is told to serve those."""
    operator = operators.OPERATORS["volcano-admission"]
    manifests, patches = operators.read_webhook_sources(GO, operator)
    configured = operators.webhook_configurations(operator, manifests, patches, 8443, "Q0E=")
    root = operators.module_dir(GO, operator)
    enabled = catalog.volcano_chart_values(root)["custom"]["enabled_admissions"].split(",")
    names = sorted(doc["metadata"]["name"] for doc in configured)
    assert names == sorted("volcano-admission-service" + path.replace("/", "-") for path in enabled)
    urls = sorted(hook["clientConfig"]["url"] for doc in configured for hook in doc["webhooks"])
    assert urls == sorted("https://127.0.0.1:8443" + path for path in enabled)
    # Rendered for a release in volcano-system, as its install guide has it.
    jobs = [hook for doc in configured for hook in doc["webhooks"] if hook["name"] in (
        "mutatejob.volcano.sh", "validatejob.volcano.sh")]
    assert len(jobs) == 2
    for hook in jobs:
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["volcano-system", "kube-system"]
    args, files = operator.configure({"webhook": 8443, "health": 1, "metrics": 2}, Path("/d"), root)
    assert "--enabled-admission=" + ",".join(enabled) in args and "--listen-address=127.0.0.1" in args
    assert files == {}


@pytest.mark.parametrize("template, words", [
    ("{{- if .Values.custom.x }}\na: 1\n", "1 if without its end"),
    ("a: 1\n{{- end }}\n", "line 2: an end without its if"),
    ("{{- if .Capabilities.APIVersions }}\n{{- end }}\n", "cannot render the condition"),
    ("a: {{ .Values.custom.x | default 3 }}\n", "line 1: cannot render"),
])
def test_a_chart_template_beyond_what_is_understood_is_refused(template, words):
    with pytest.raises(operators.OperatorError, match=words):
        operators.helm_template(template, {"x": "y"}, operators.CHART_RELEASE)


def test_a_chart_template_renders_its_conditions_values_and_release():
    template = ("{{- if .Values.custom.on }}\nname: {{ .Release.Name }}-svc\nns: {{ .Release.Namespace }}\n"
                "{{- if .Values.custom.list | regexMatch \"/b\" }}\nb: yes\n{{- end }}\n"
                "{{- if .Values.custom.list | regexMatch \"/z\" }}\nz: yes\n{{- end }}\n"
                "labels:\n  {{- toYaml .Values.custom.labels | nindent 2 }}\n{{- end }}\n"
                "{{- if .Values.custom.off }}\noff: yes\n{{- end }}\n")
    rendered = operators.helm_template(template, {"on": True, "list": "/a,/b", "labels": {"k": "v"}, "off": None},
                                       {"Name": "vol", "Namespace": "vs"})
    assert rendered == "name: vol-svc\nns: vs\nb: yes\nlabels:\n  k: v\n"


def test_a_group_names_its_processes_in_order_and_builds_once():
    assert catalog.known(["volcano", "jobset", "volcano-scheduler"]) == [
        "volcano-admission", "volcano-controllers", "volcano-scheduler", "jobset"]
    assert catalog.build_names(catalog.known(["volcano", "jobset"])) == ["volcano", "jobset"]


def test_the_sriov_operator_runs_where_the_local_inventory_puts_it_as_its_release_installs_it():
    """Started with the cluster (build.sh builds it with the control plane,
    not through --operators), in the local inventory's operator namespace,
    with the supported-nic-ids ConfigMap its release ships, its bindata/
    beside it, and no listener beyond loopback (its metrics off, its probes
    on 127.0.0.1; its webhooks are another program)."""
    import yaml
    operator = operators.OPERATORS["sriov-network-operator"]
    assert catalog.WITH_THE_CLUSTER == ("sriov-network-operator",)
    assert catalog.build_names(["sriov-network-operator", "kueue"]) == ["kueue"]
    local = yaml.safe_load((ROOT / "inventories" / "local" / "group_vars" / "all" / "sriov.yml").read_text())
    assert operator.environment["NAMESPACE"] == local["sriov_operator_namespace"]
    assert operator.environment["RESOURCE_PREFIX"] == "openshift.io"
    root = operators.module_dir(GO, operator)
    namespace, configmap = operator.objects(root)
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": local["sriov_operator_namespace"]}}
    assert (configmap["kind"], configmap["metadata"]) == (
        "ConfigMap", {"name": "supported-nic-ids", "namespace": local["sriov_operator_namespace"]})
    assert configmap["data"]["Nvidia_mlx5_ConnectX-4"] == "15b3 1013 1014"
    assert operators.core_object_path(configmap) == (
        "/api/v1/namespaces/%s/configmaps/supported-nic-ids" % local["sriov_operator_namespace"])
    assert all((root / link).is_dir() for link in operator.module_links)
    args, files = operator.configure({"webhook": 1, "health": 2, "metrics": 3}, Path("/d"), root)
    assert args == ["--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:2"] and files == {}


def test_kueues_webhooks_take_its_kustomizations_patch_and_replacements():
    """Kueue's kustomization gives its pod webhook a namespace selector
    (kube-system and kueue-system left alone) and copies it to every
    workload kind's webhook; its own kinds' webhooks keep none."""
    operator = operators.OPERATORS["kueue"]
    manifests, patches = operators.read_webhook_sources(GO, operator)
    configured = operators.webhook_configurations(operator, manifests, patches, 9443, "Q0E=")
    webhooks = dict((hook["name"], hook) for doc in configured for hook in doc["webhooks"])
    expected = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "kueue-system"]}]}
    for name in ("vpod.kb.io", "mpod.kb.io", "mjobset.kb.io", "vjob.kb.io", "vtrainjob.kb.io", "mstatefulset.kb.io"):
        assert webhooks[name]["namespaceSelector"] == expected, name
    for name in ("vclusterqueue.kb.io", "mworkload.kb.io", "vresourceflavor.kb.io"):
        assert "namespaceSelector" not in webhooks[name], name
    # All of it from the kustomization: the manifests themselves have none.
    raw = (operators.module_dir(GO, operator) / operator.webhook_manifests[0]).read_text()
    assert "namespaceSelector" not in raw


def test_a_kustomization_beyond_what_is_understood_is_refused():
    manifest = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}, "webhooks": [{"name": "a"}]}
    with pytest.raises(operators.OperatorError, match="only inline patches are understood"):
        operators.kustomized([manifest], {"patches": [{"path": "patch.yaml"}]})
    with pytest.raises(operators.OperatorError, match="cannot follow the field path 'spec.x'"):
        operators.kustomized([manifest], {"replacements": [{
            "source": {"kind": "ValidatingWebhookConfiguration", "name": "v", "fieldPath": "spec.x"}, "targets": []}]})
