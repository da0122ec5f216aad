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
    with pytest.raises(operators.OperatorError, match="no operator kueue-x: the local cluster runs jobset, trainer, training-operator"):
        operators.known(["jobset", "kueue-x"])
