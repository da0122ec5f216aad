"""What each operator the local cluster can run is, and how it is started.

One ``Operator`` per process: its binary (built by build.sh from the Go
module pinned under go/<moddir>/), where its release keeps its webhook
configurations, and the command line and files that make it serve
everything on 127.0.0.1 with the certificate the cluster gives it, with no
leader election and no certificate rotation of its own (one process, no
Deployment, no Secret). An operator of several processes (Volcano) is a
group of them, started together under the group's name.

operators.py runs them. Standard library and PyYAML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml


class OperatorError(RuntimeError):
    """An operator that cannot be built, configured or started; says why."""


@dataclass(frozen=True)
class Operator:
    """What the local cluster needs to know to run one operator process."""

    name: str
    # The Go module whose release holds the webhook configurations (and the
    # files the process reads), the directory of go/ that pins its version
    # and the name build.sh --operators builds it by.
    module: str
    moddir: str
    binary: str
    # (ports, its directory, the module's directory) -> (command-line
    # arguments, files to write in its directory)
    configure: Callable[[dict, Path, Path], tuple[list[str], dict[str, str]]]
    # Webhook configuration manifests (paths in the module) and, per kind,
    # the RFC 6902 patch of its kustomization ("replace" and "add").
    webhook_manifests: tuple[str, ...] = ()
    webhook_patches: dict[str, str] = field(default_factory=dict)
    # Or the kustomization itself, whose inline strategic-merge patches and
    # replacements of webhook fields are applied.
    webhook_kustomization: str = ""
    # Or a Helm chart's template of them and the chart's values file.
    webhook_chart: tuple[str, str] = ()
    # Whether the configurations keep their release names (the operator
    # reads them by name) instead of being prefixed with the operator's.
    webhook_names_kept: bool = False
    # The webhooks to keep (by name; all if empty): those of the kinds whose
    # CRDs the cluster installs and whose controllers the operator runs.
    webhooks: tuple[str, ...] = ()
    # Where, below its directory, it reads its serving certificate (tls.crt,
    # tls.key, and the CA as ca.crt). Its TMPDIR is its directory, so
    # controller-runtime's default ($TMPDIR/k8s-webhook-server/serving-certs)
    # serves one that has no flag.
    cert_dir: str = ""
    # Its health endpoint on ports["health"], and whether it is served over
    # TLS (with the cluster's certificate).
    health_path: str = "/readyz"
    health_tls: bool = False
    # Whether it is given the kubeconfig as --kubeconfig (it does not read
    # $KUBECONFIG, which every process gets).
    kubeconfig_flag: bool = False
    component: str = ""
    # Its environment beyond KUBECONFIG and TMPDIR (what its Deployment's
    # env would give it).
    environment: dict[str, str] = field(default_factory=dict)
    # Paths of its module linked into its working directory, for a process
    # that reads its release's files relative to it.
    module_links: tuple[str, ...] = ()
    # (its module's directory) -> objects applied before it starts, as its
    # release installs them beside its Deployment (a namespace, a ConfigMap
    # it reads at start).
    objects: Callable[[Path], list[dict]] = lambda _root: []

    @property
    def build_name(self) -> str:
        return self.component or self.name


def _jobset(ports: dict, directory: Path, _root: Path) -> tuple[list[str], dict[str, str]]:
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(directory)},
        "health": {"healthProbeBindAddress": "127.0.0.1:%d" % ports["health"]},
        "metrics": {"bindAddress": "0"},
    }
    args = ["--config", str(directory / "config.yaml"), "--metrics-bind-address=0"]
    return args, {"config.yaml": yaml.safe_dump(config, sort_keys=False)}


def _trainer(ports: dict, directory: Path, _root: Path) -> tuple[list[str], dict[str, str]]:
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"]},
        "health": {"healthProbeBindAddress": "127.0.0.1:%d" % ports["health"]},
        "metrics": {"bindAddress": "0"},
    }
    return ["--config", str(directory / "config.yaml")], {"config.yaml": yaml.safe_dump(config, sort_keys=False)}


def _training_operator(ports: dict, directory: Path, _root: Path) -> tuple[list[str], dict[str, str]]:
    # Flags only (it reads no configuration file); --webhook-host and
    # --webhook-cert-dir are the local patch's (go/training-operator/patches).
    return ["--enable-scheme=pytorchjob", "--webhook-host=127.0.0.1", "--webhook-server-port=%d" % ports["webhook"],
            "--webhook-cert-dir=%s" % directory, "--health-probe-bind-address=127.0.0.1:%d" % ports["health"],
            "--metrics-bind-address=0", "--leader-elect=false"], {}


# Volcano installs through its Helm chart; its processes read the chart's
# configuration files, and its webhook manager serves the admissions the
# chart's values enable (and whose configurations the chart makes).
VOLCANO_CHART = "installer/helm/chart/volcano"


def volcano_chart_values(root: Path) -> dict:
    return yaml.safe_load((root / VOLCANO_CHART / "values.yaml").read_text())


def _volcano_common(ports: dict) -> list[str]:
    return ["--leader-elect=false", "--enable-healthz=true", "--healthz-address=127.0.0.1:%d" % ports["health"],
            "--listen-address=127.0.0.1:%d" % ports["metrics"], "--logtostderr"]


def _volcano_admission(ports: dict, directory: Path, root: Path) -> tuple[list[str], dict[str, str]]:
    # The webhook URL only satisfies its check that one of URL and Service
    # is given; the configurations (with our URL) are applied by the cluster.
    return ["--enabled-admission=%s" % volcano_chart_values(root)["custom"]["enabled_admissions"],
            "--tls-cert-file=%s" % (directory / "tls.crt"), "--tls-private-key-file=%s" % (directory / "tls.key"),
            "--ca-cert-file=%s" % (directory / "ca.crt"),
            "--admission-conf=%s" % (root / VOLCANO_CHART / "config" / "volcano-admission.conf"),
            "--listen-address=127.0.0.1", "--port=%d" % ports["webhook"],
            "--webhook-url=https://127.0.0.1:%d" % ports["webhook"],
            "--enable-healthz=true", "--healthz-address=127.0.0.1:%d" % ports["health"], "--logtostderr"], {}


def _volcano_controllers(ports: dict, directory: Path, _root: Path) -> tuple[list[str], dict[str, str]]:
    # The controllers of the kinds whose CRDs the cluster installs (the
    # default, all of them, would wait for CronJobs, JobFlows and more).
    return _volcano_common(ports) + [
        "--controllers=job-controller,pg-controller,queue-controller,gc-controller"], {}


def _volcano_scheduler(ports: dict, directory: Path, root: Path) -> tuple[list[str], dict[str, str]]:
    return _volcano_common(ports) + [
        "--scheduler-conf=%s" % (root / VOLCANO_CHART / "config" / "volcano-scheduler.conf"),
        "--cache-dump-dir=%s" % directory], {}


def _kueue(ports: dict, directory: Path, _root: Path) -> tuple[list[str], dict[str, str]]:
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(directory)},
        "health": {"healthProbeBindAddress": "127.0.0.1:%d" % ports["health"]},
        "metrics": {"bindAddress": "0"},
        # The start modes' kinds (Volcano queues its own Jobs); a workload
        # without a queue-name label is left alone, as by default.
        "integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob", "jobset.x-k8s.io/jobset",
                                        "trainer.kubeflow.org/trainjob"]},
        # Its visibility API would serve on every interface and needs an
        # APIService in front of it.
        "featureGates": {"VisibilityOnDemand": False},
    }
    return ["--config", str(directory / "config.yaml")], {"config.yaml": yaml.safe_dump(config, sort_keys=False)}


# The SR-IOV Network Operator runs in the local inventory's
# sriov_operator_namespace (test_localcluster_operators.py holds them equal), as
# OpenShift installs it, and prefixes resource names as OpenShift's does.
SRIOV_NAMESPACE = "openshift-sriov-network-operator"
SRIOV_RESOURCE_PREFIX = "openshift.io"


def _sriov_network_operator(ports: dict, _directory: Path, _root: Path) -> tuple[list[str], dict[str, str]]:
    # Only its managers' flags: its webhooks are another program (the
    # operator deploys it as a DaemonSet once a SriovOperatorConfig exists,
    # and the local cluster creates none), so nothing listens on 9443.
    return ["--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:%d" % ports["health"]], {}


def _sriov_objects(root: Path) -> list[dict]:
    """Its namespace and the supported-nic-ids ConfigMap its manager reads
    at start, from the manifests of its release."""
    configmap = yaml.safe_load((root / "deploy" / "configmap.yaml").read_text())
    configmap["metadata"]["namespace"] = SRIOV_NAMESPACE
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SRIOV_NAMESPACE}}, configmap]


OPERATORS = {operator.name: operator for operator in (
    Operator(name="jobset", module="sigs.k8s.io/jobset", moddir="jobset", binary="jobset-controller",
             configure=_jobset,
             webhook_manifests=("config/components/webhook/manifests.yaml",),
             webhook_patches={
                 "MutatingWebhookConfiguration": "config/components/webhook/patches/mutating-patch.yaml",
                 "ValidatingWebhookConfiguration": "config/components/webhook/patches/validating-patch.yaml"}),
    Operator(name="trainer", module="github.com/kubeflow/trainer/v2", moddir="trainer",
             binary="trainer-controller-manager", configure=_trainer,
             webhook_manifests=("manifests/base/webhook/manifests.yaml",),
             webhook_patches={"MutatingWebhookConfiguration": "manifests/base/webhook/patch_mutating.yaml",
                              "ValidatingWebhookConfiguration": "manifests/base/webhook/patch_validating.yaml"},
             cert_dir="k8s-webhook-server/serving-certs"),
    Operator(name="training-operator", module="github.com/kubeflow/training-operator", moddir="training-operator",
             binary="training-operator", configure=_training_operator,
             webhook_manifests=("manifests/base/webhook/manifests.yaml",),
             webhook_patches={"ValidatingWebhookConfiguration": "manifests/base/webhook/patch.yaml"},
             webhooks=("validator.pytorchjob.training-operator.kubeflow.org",)),
    Operator(name="kueue", module="sigs.k8s.io/kueue", moddir="kueue", binary="kueue-controller-manager",
             configure=_kueue, webhook_manifests=("config/components/webhook/manifests.yaml",),
             webhook_kustomization="config/components/webhook/kustomization.yaml"),
    # With no SriovOperatorConfig its policy and config controllers wait;
    # its network controllers render a NetworkAttachmentDefinition from
    # each SriovNetwork (from bindata/ in its working directory).
    Operator(name="sriov-network-operator", module="github.com/k8snetworkplumbingwg/sriov-network-operator",
             moddir="sriov-network-operator", binary="sriov-network-operator", configure=_sriov_network_operator,
             environment={"NAMESPACE": SRIOV_NAMESPACE, "RESOURCE_PREFIX": SRIOV_RESOURCE_PREFIX,
                          "CLUSTER_TYPE": "kubernetes", "OPERATOR_NAME": "sriov-network-operator"},
             module_links=("bindata",), objects=_sriov_objects),
    Operator(name="volcano-admission", module="volcano.sh/volcano", moddir="volcano", component="volcano",
             binary="vc-webhook-manager", configure=_volcano_admission,
             webhook_chart=(VOLCANO_CHART + "/templates/webhooks.yaml", VOLCANO_CHART + "/values.yaml"),
             webhook_names_kept=True, health_path="/healthz", health_tls=True, kubeconfig_flag=True),
    Operator(name="volcano-controllers", module="volcano.sh/volcano", moddir="volcano", component="volcano",
             binary="vc-controller-manager", configure=_volcano_controllers, health_path="/healthz",
             kubeconfig_flag=True),
    Operator(name="volcano-scheduler", module="volcano.sh/volcano", moddir="volcano", component="volcano",
             binary="vc-scheduler", configure=_volcano_scheduler, health_path="/healthz",
             kubeconfig_flag=True),
)}

# Started with the cluster itself: the local inventory's RDMA attachments
# are SriovNetworks, whose NetworkAttachmentDefinitions the sriov role
# waits for. build.sh builds it with the control plane.
WITH_THE_CLUSTER = ("sriov-network-operator",)

# Names that start several processes, in the order they start (Volcano's
# webhooks first: its scheduler creates its default queue through them).
GROUPS = {"volcano": ("volcano-admission", "volcano-controllers", "volcano-scheduler")}


def known(names: list[str]) -> list[str]:
    """The processes the names stand for (a group's in its order), checked;
    raises OperatorError naming an unknown one."""
    unknown = [name for name in names if name not in OPERATORS and name not in GROUPS]
    if unknown:
        raise OperatorError("no operator %s: the local cluster runs %s" % (
            ", ".join(unknown), ", ".join(sorted(set(OPERATORS) | set(GROUPS)))))
    found = []
    for name in names:
        for process in GROUPS.get(name, (name,)):
            if process not in found:
                found.append(process)
    return found


def build_names(names: list[str]) -> list[str]:
    """What build.sh --operators builds for these processes (build.sh
    builds those started with the cluster anyway)."""
    return list(dict.fromkeys(OPERATORS[name].build_name for name in names if name not in WITH_THE_CLUSTER))
