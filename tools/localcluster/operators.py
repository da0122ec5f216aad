"""The operators the local cluster runs on demand beside its control plane.

Each is built by build.sh from the Go module pinned under go/<operator>/ (as
the control plane is) and runs as a local process of this machine with the
cluster's admin kubeconfig, everything it serves on 127.0.0.1. Its admission
webhooks are served for real: the webhook configurations are the operator's
own release manifests, read from its module and patched as its kustomization
patches them, with the in-cluster Service they name replaced by
``https://127.0.0.1:<port><path>`` and the CA this cluster generates for
that address (``operators/pki``), so defaulting and validation are the
operator's own code.

State, below the cluster's directory: ``operators/<name>.json`` (pid and
ports), ``operators/<name>/`` (its configuration and serving certificate),
``logs/<name>.log``.

Standard library, PyYAML and the ``openssl`` command.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml


class OperatorError(RuntimeError):
    """An operator that cannot be built, configured or started; says why."""


@dataclass(frozen=True)
class Operator:
    """What the local cluster needs to know to run one operator."""

    name: str
    # The Go module whose release manifests hold the webhook configurations,
    # and the directory of go/ that pins its version.
    module: str
    moddir: str
    binary: str
    # Webhook configuration manifests (paths in the module) and, per kind,
    # the RFC 6902 patch of its kustomization ("replace" and "add").
    webhook_manifests: tuple[str, ...]
    webhook_patches: dict[str, str] = field(default_factory=dict)
    # Where, below its directory, it reads its serving certificate (tls.crt,
    # tls.key). Its TMPDIR is its directory, so controller-runtime's default
    # ($TMPDIR/k8s-webhook-server/serving-certs) serves one that has no flag.
    cert_dir: str = ""
    # The webhooks to keep (by name; all if empty): those of the kinds whose
    # CRDs the cluster installs and whose controllers the operator runs.
    webhooks: tuple[str, ...] = ()
    # (ports, operator's directory) -> (command-line arguments, files to write there)
    configure: Callable[[dict, Path], tuple[list[str], dict[str, str]]] = None


def _jobset_configuration(ports: dict, directory: Path) -> tuple[list[str], dict[str, str]]:
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        # One process, no Deployment to take over from it.
        "leaderElection": {"leaderElect": False},
        # The local cluster's CA signs the serving certificate; the operator's
        # own rotation would write it into a Secret of a namespace it runs in.
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(directory)},
        "health": {"healthProbeBindAddress": "127.0.0.1:%d" % ports["health"]},
        "metrics": {"bindAddress": "0"},
    }
    args = ["--config", str(directory / "config.yaml"), "--metrics-bind-address=0"]
    return args, {"config.yaml": yaml.safe_dump(config, sort_keys=False)}


def _trainer_configuration(ports: dict, directory: Path) -> tuple[list[str], dict[str, str]]:
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        # As for JobSet: the cluster's CA signs its certificate, no Secret.
        "certManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"]},
        "health": {"healthProbeBindAddress": "127.0.0.1:%d" % ports["health"]},
        "metrics": {"bindAddress": "0"},
    }
    return ["--config", str(directory / "config.yaml")], {"config.yaml": yaml.safe_dump(config, sort_keys=False)}


def _training_operator_configuration(ports: dict, directory: Path) -> tuple[list[str], dict[str, str]]:
    # Flags only (it reads no configuration file); --webhook-host and
    # --webhook-cert-dir are the local patch's (go/training-operator/patches).
    return ["--enable-scheme=pytorchjob", "--webhook-host=127.0.0.1", "--webhook-server-port=%d" % ports["webhook"],
            "--webhook-cert-dir=%s" % directory, "--health-probe-bind-address=127.0.0.1:%d" % ports["health"],
            "--metrics-bind-address=0", "--leader-elect=false"], {}


OPERATORS = {
    "jobset": Operator(
        name="jobset", module="sigs.k8s.io/jobset", moddir="jobset", binary="jobset-controller",
        webhook_manifests=("config/components/webhook/manifests.yaml",),
        webhook_patches={"MutatingWebhookConfiguration": "config/components/webhook/patches/mutating-patch.yaml",
                         "ValidatingWebhookConfiguration": "config/components/webhook/patches/validating-patch.yaml"},
        configure=_jobset_configuration),
    "trainer": Operator(
        name="trainer", module="github.com/kubeflow/trainer/v2", moddir="trainer",
        binary="trainer-controller-manager",
        webhook_manifests=("manifests/base/webhook/manifests.yaml",),
        webhook_patches={"MutatingWebhookConfiguration": "manifests/base/webhook/patch_mutating.yaml",
                         "ValidatingWebhookConfiguration": "manifests/base/webhook/patch_validating.yaml"},
        cert_dir="k8s-webhook-server/serving-certs", configure=_trainer_configuration),
    "training-operator": Operator(
        name="training-operator", module="github.com/kubeflow/training-operator", moddir="training-operator",
        binary="training-operator",
        webhook_manifests=("manifests/base/webhook/manifests.yaml",),
        webhook_patches={"ValidatingWebhookConfiguration": "manifests/base/webhook/patch.yaml"},
        webhooks=("validator.pytorchjob.training-operator.kubeflow.org",),
        configure=_training_operator_configuration),
}


def known(names: list[str]) -> list[str]:
    """The names, checked; raises OperatorError naming an unknown one."""
    unknown = [name for name in names if name not in OPERATORS]
    if unknown:
        raise OperatorError("no operator %s: the local cluster runs %s"
                            % (", ".join(unknown), ", ".join(sorted(OPERATORS))))
    return names


# --------------------------------------------------------------------------
# Webhook configurations, as data
# --------------------------------------------------------------------------

def _patch(document: dict, operation: dict) -> None:
    """One RFC 6902 "replace" or "add" of a JSON pointer such as
    /webhooks/1/objectSelector (the two kinds the operators' kustomizations use)."""
    if operation.get("op") not in ("replace", "add"):
        raise OperatorError("only replace and add patches are understood, not %r" % (operation,))
    parts = [part.replace("~1", "/").replace("~0", "~") for part in operation["path"].lstrip("/").split("/")]
    target = document
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last, value = parts[-1], operation["value"]
    if not isinstance(target, list):
        target[last] = value
    elif operation["op"] == "add":
        target.insert(len(target) if last == "-" else int(last), value)
    else:
        target[int(last)] = value


def webhook_configurations(operator: Operator, manifests: list[dict], patches: dict[str, list[dict]],
                           port: int, ca_bundle: str) -> list[dict]:
    """The operator's webhook configurations as the local cluster applies
    them: its release manifests, its kustomization's patches applied, each
    named after the operator (as its kustomization's name prefix does), each
    webhook pointed at ``https://127.0.0.1:<port><path>`` with the CA (only
    the webhooks the operator lists, when it lists them)."""
    found = []
    for document in manifests:
        document = json.loads(json.dumps(document))
        for operation in patches.get(document["kind"], []):
            try:
                _patch(document, operation)
            except OperatorError as error:
                raise OperatorError("%s: %s" % (operator.name, error)) from None
        document["metadata"] = {"name": "%s-%s" % (operator.name, document["metadata"]["name"]),
                                "labels": {"app.kubernetes.io/managed-by": "mlinfra-localcluster",
                                           "localcluster.mlinfra.io/operator": operator.name}}
        if operator.webhooks:
            document["webhooks"] = [hook for hook in document.get("webhooks", []) if hook["name"] in operator.webhooks]
        for webhook in document.get("webhooks", []):
            service = webhook["clientConfig"].pop("service")
            webhook["clientConfig"] = {"url": "https://127.0.0.1:%d%s" % (port, service.get("path", "/")),
                                       "caBundle": ca_bundle}
        found.append(document)
    return found


# --------------------------------------------------------------------------
# Running them
# --------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def module_dir(go_dir: Path, operator: Operator) -> Path:
    """Where the pinned version of the operator's module is in Go's module
    cache (build.sh has downloaded it)."""
    found = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", operator.module], cwd=go_dir / operator.moddir,
                           capture_output=True, text=True, check=False)
    path = Path(found.stdout.strip())
    if found.returncode != 0 or not path.is_dir():
        raise OperatorError("%s: cannot find %s in the Go module cache (%s); build it first: tools/localcluster/"
                            "build.sh --operators %s" % (operator.name, operator.module,
                                                         found.stderr.strip()[-300:], operator.name))
    return path


def read_webhook_sources(go_dir: Path, operator: Operator) -> tuple[list[dict], dict[str, list[dict]]]:
    root = module_dir(go_dir, operator)
    manifests = [doc for path in operator.webhook_manifests
                 for doc in yaml.safe_load_all((root / path).read_text()) if doc]
    patches = {kind: yaml.safe_load((root / path).read_text()) for kind, path in operator.webhook_patches.items()}
    return manifests, patches


def ensure_ca(pki: Path) -> None:
    """A CA of this cluster's operators and a serving certificate for
    127.0.0.1 that it signs (made once per cluster)."""
    if (pki / "serving.crt").exists():
        return
    if shutil.which("openssl") is None:
        raise OperatorError("the operators' webhooks need a certificate: install openssl (Debian: apt-get install "
                            "openssl)")
    pki.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        done = subprocess.run(["openssl", *args], cwd=pki, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OperatorError("openssl %s failed: %s" % (args[0], done.stderr.strip()[-500:]))

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=mlinfra-localcluster-ca",
            "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "serving.key",
            "-out", "serving.csr")
    (pki / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "3650", "-extfile", "san.cnf", "-out", "serving.crt")


def _alive(pid: int, binary: str) -> bool:
    try:
        return os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()) == binary
    except OSError:
        return False


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=2) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


def state_path(state_dir: Path, name: str) -> Path:
    """Where the pid and ports of a started operator are kept."""
    return state_dir / (name + ".json")


def running_state(state_dir: Path, name: str) -> dict | None:
    """{pid, ports} of the operator if it runs, else None."""
    try:
        found = json.loads(state_path(state_dir, name).read_text())
    except (OSError, ValueError):
        return None
    return found if _alive(found["pid"], OPERATORS[name].binary) else None


def running_pids(state_dir: Path) -> dict[str, int]:
    """The pid of each operator that runs, by name."""
    return dict((name, found["pid"]) for name in OPERATORS for found in [running_state(state_dir, name)] if found)


class Runner:
    """Starts, stops and lists the operators of one local cluster.

    ``api`` applies and deletes objects (localcluster.Api); ``log`` prints a
    progress line."""

    def __init__(self, state_dir: Path, log_dir: Path, bin_dir: Path, go_dir: Path, kubeconfig: Path, api,
                 log: Callable[[str], None]):
        self.state_dir, self.log_dir, self.bin_dir = state_dir, log_dir, bin_dir
        self.go_dir, self.kubeconfig, self.api, self.log = go_dir, kubeconfig, api, log

    def state(self, name: str) -> dict | None:
        return running_state(self.state_dir, name)

    def start(self, name: str, timeout: float = 120) -> None:
        """Starts the operator unless it runs; returns once it is ready and
        the API server calls its webhooks."""
        operator = OPERATORS[name]
        running = self.state(name)
        if running and _ready(running["ports"]["health"]):
            self._apply_webhooks(operator, running["ports"]["webhook"])
            return
        binary = self.bin_dir / operator.binary
        if not binary.exists():
            raise OperatorError("%s is not built: tools/localcluster/build.sh --operators %s" % (binary, name))
        pki = self.state_dir / "pki"
        ensure_ca(pki)
        directory = self.state_dir / name
        cert_dir = directory / operator.cert_dir
        cert_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(pki / "serving.crt", cert_dir / "tls.crt")
        shutil.copy(pki / "serving.key", cert_dir / "tls.key")
        ports = {"webhook": free_port(), "health": free_port()}
        args, files = operator.configure(ports, directory)
        for file_name, text in files.items():
            (directory / file_name).write_text(text)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / (name + ".log")
        started = time.monotonic()
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen([str(binary), *args], cwd=directory, stdout=log_file, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       env=dict(os.environ, KUBECONFIG=str(self.kubeconfig), TMPDIR=str(directory)))
        state_path(self.state_dir, name).write_text(json.dumps({"pid": process.pid, "ports": ports}))
        while not _ready(ports["health"]):
            if process.poll() is not None or time.monotonic() - started > timeout:
                self.stop(name)
                tail = log_path.read_text(errors="replace").splitlines()[-15:]
                raise OperatorError("%s %s within %.0f s; the last lines of %s:\n%s" % (
                    name, "exited" if process.returncode is not None else "was not ready", timeout, log_path,
                    "\n".join(tail)))
            time.sleep(0.2)
        self._apply_webhooks(operator, ports["webhook"])
        self.log("%s ready in %.1fs (pid %d, webhooks on 127.0.0.1:%d)" % (
            name, time.monotonic() - started, process.pid, ports["webhook"]))

    def _apply_webhooks(self, operator: Operator, port: int) -> None:
        ca_bundle = base64.b64encode((self.state_dir / "pki" / "ca.crt").read_bytes()).decode()
        manifests, patches = read_webhook_sources(self.go_dir, operator)
        for document in webhook_configurations(operator, manifests, patches, port, ca_bundle):
            self.api.apply("/apis/admissionregistration.k8s.io/v1/%ss/%s" % (
                document["kind"].lower(), document["metadata"]["name"]), document)

    def stop(self, name: str) -> None:
        """Its webhook configurations first (the API server would call a
        webhook no one serves and refuse what it guards), then the process."""
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            path = "/apis/admissionregistration.k8s.io/v1/" + kind
            for item in self.api.get(path, labelSelector="localcluster.mlinfra.io/operator=" + name)["items"]:
                self.api.delete("%s/%s" % (path, item["metadata"]["name"]))
        running = self.state(name)
        if running:
            os.killpg(running["pid"], signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _alive(running["pid"], OPERATORS[name].binary) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(running["pid"], OPERATORS[name].binary):
                os.killpg(running["pid"], signal.SIGKILL)
        state_path(self.state_dir, name).unlink(missing_ok=True)
