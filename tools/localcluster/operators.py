"""The operators the local cluster runs on demand beside its control plane.

Each (operator_catalog.py says which and how) is built by build.sh from the
Go module pinned under go/<operator>/ (as the control plane is) and runs as
a local process of this machine with the cluster's admin kubeconfig,
everything it serves on 127.0.0.1. Its admission webhooks are served for
real: the webhook configurations are the operator's own release manifests,
read from its module and patched as its kustomization patches them (or
rendered from its Helm chart's template with the chart's values), with the
in-cluster Service they name replaced by ``https://127.0.0.1:<port><path>``
and the CA this cluster generates for that address (``operators/pki``), so
defaulting and validation are the operator's own code.

State, below the cluster's directory: ``operators/<name>.json`` (pid and
ports), ``operators/<name>/`` (its configuration and serving certificate),
``logs/<name>.log``.

Standard library, PyYAML and the ``openssl`` command.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import yaml

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from operator_catalog import OPERATORS, Operator, OperatorError  # noqa: E402  (beside this file)


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


def _webhook_field(document: dict, path: str, value=None, create: bool = False):
    """Reads (or, given a value, sets) a kustomize field path of a webhook
    configuration such as ``webhooks.[name=vpod.kb.io].namespaceSelector``."""
    selector, closed, rest = path.partition("].")
    if not selector.startswith("webhooks.[name=") or not closed or not rest or "." in rest:
        raise OperatorError("cannot follow the field path %r" % path)
    name = selector[len("webhooks.[name="):]
    for webhook in document.get("webhooks") or []:
        if webhook.get("name") == name:
            if value is None:
                return webhook.get(rest)
            if rest in webhook or create:
                webhook[rest] = json.loads(json.dumps(value))
            return value
    raise OperatorError("no webhook %s in %s" % (name, document["metadata"]["name"]))


def kustomized(manifests: list[dict], kustomization: dict) -> list[dict]:
    """The manifests with a kustomization's inline strategic-merge patches of
    webhooks (merged by webhook name) and its replacements of webhook fields
    applied, as ``kustomize build`` applies those Kueue's release uses; any
    other kind of patch is an error, never skipped."""
    documents = json.loads(json.dumps(manifests))
    by_kind_name = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}
    for patch in kustomization.get("patches") or []:
        if "patch" not in patch or "path" in patch:
            raise OperatorError("only inline patches are understood, not %r" % (patch,))
        change = yaml.safe_load(patch["patch"])
        target = by_kind_name[(change["kind"], change["metadata"]["name"])]
        for webhook in change.get("webhooks") or []:
            merged = [hook for hook in target["webhooks"] if hook["name"] == webhook["name"]]
            if not merged:
                raise OperatorError("patch names no webhook %s of %s" % (webhook["name"], change["metadata"]["name"]))
            merged[0].update(webhook)
    for replacement in kustomization.get("replacements") or []:
        source = replacement["source"]
        value = _webhook_field(by_kind_name[(source["kind"], source["name"])], source["fieldPath"])
        for target in replacement["targets"]:
            document = by_kind_name[(target["select"]["kind"], target["select"]["name"])]
            for path in target["fieldPaths"]:
                _webhook_field(document, path, value, (target.get("options") or {}).get("create", False))
    return documents


def webhook_configurations(operator: Operator, manifests: list[dict], patches: dict[str, list[dict]],
                           port: int, ca_bundle: str) -> list[dict]:
    """The operator's webhook configurations as the local cluster applies
    them: its release manifests, its kustomization's patches applied, each
    named after the operator (as its kustomization's name prefix does) unless
    the operator reads them by their release names, each
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
        name = document["metadata"]["name"]
        document["metadata"] = {"name": name if operator.webhook_names_kept else "%s-%s" % (operator.name, name),
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


_HELM_IF = re.compile(r"^\s*\{\{-?\s*if\s+(.*?)\s*-?\}\}\s*$")
_HELM_END = re.compile(r"^\s*\{\{-?\s*end\s*-?\}\}\s*$")
_HELM_CONDITION = re.compile(r'^\.Values\.custom\.(\w+)(?:\s*\|\s*regexMatch\s+"([^"]*)")?$')
_HELM_TO_YAML = re.compile(r"^\s*\{\{-?\s*toYaml\s+\.Values\.custom\.(\w+)\s*\|\s*nindent\s+(\d+)\s*-?\}\}\s*$")
_HELM_RELEASE = re.compile(r"\{\{-?\s*\.Release\.(Name|Namespace)\s*-?\}\}")


def helm_template(text: str, custom: dict, release: dict[str, str]) -> str:
    """A Helm chart template rendered with the chart's values, for the few
    constructs a webhook template of Volcano's uses: ``if`` on a value of
    ``.Values.custom`` (or its ``regexMatch``), ``end``, ``toYaml`` of a
    value with ``nindent``, and the release's Name and Namespace. Anything
    else is an error naming the line, never a guess."""
    lines, active = [], [True]
    for number, line in enumerate(text.splitlines(), 1):
        opened = _HELM_IF.match(line)
        if opened:
            condition = _HELM_CONDITION.match(opened.group(1))
            if not condition:
                raise OperatorError("line %d: cannot render the condition %r" % (number, opened.group(1)))
            value = custom.get(condition.group(1))
            holds = (bool(re.search(condition.group(2), value or "")) if condition.group(2) is not None
                     else bool(value))
            active.append(active[-1] and holds)
        elif _HELM_END.match(line):
            if len(active) == 1:
                raise OperatorError("line %d: an end without its if" % number)
            active.pop()
        elif not active[-1]:
            continue
        elif _HELM_TO_YAML.match(line):
            name, indent = _HELM_TO_YAML.match(line).groups()
            if custom.get(name):
                lines += [" " * int(indent) + part for part in yaml.safe_dump(custom[name]).splitlines()]
        else:
            line = _HELM_RELEASE.sub(lambda found: release[found.group(1)], line)
            if "{{" in line:
                raise OperatorError("line %d: cannot render %r" % (number, line.strip()))
            lines.append(line)
    if len(active) != 1:
        raise OperatorError("%d if without its end" % (len(active) - 1))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Running them
# --------------------------------------------------------------------------

def core_object_path(document: dict) -> str:
    """The API path of a core (v1) object: a Namespace, or a namespaced
    object of a plural the kind's lower case plus s names (ConfigMap)."""
    kind, metadata = document["kind"], document["metadata"]
    if kind == "Namespace":
        return "/api/v1/namespaces/" + metadata["name"]
    return "/api/v1/namespaces/%s/%ss/%s" % (metadata["namespace"], kind.lower(), metadata["name"])


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
                                                         found.stderr.strip()[-300:], operator.build_name))
    return path


# The release a chart's configurations are rendered for (they exclude its
# namespace from what they judge, as a Helm install there does).
CHART_RELEASE = {"Name": "volcano", "Namespace": "volcano-system"}


def read_webhook_sources(go_dir: Path, operator: Operator) -> tuple[list[dict], dict[str, list[dict]]]:
    root = module_dir(go_dir, operator)
    texts = [(root / path).read_text() for path in operator.webhook_manifests]
    if operator.webhook_chart:
        template, values = operator.webhook_chart
        custom = yaml.safe_load((root / values).read_text()).get("custom") or {}
        try:
            texts.append(helm_template((root / template).read_text(), custom, CHART_RELEASE))
        except OperatorError as error:
            raise OperatorError("%s: %s: %s" % (operator.name, template, error)) from None
    manifests = [doc for text in texts for doc in yaml.safe_load_all(text) if doc]
    if operator.webhook_kustomization:
        try:
            manifests = kustomized(manifests, yaml.safe_load((root / operator.webhook_kustomization).read_text()))
        except (OperatorError, KeyError) as error:
            raise OperatorError("%s: %s: %s" % (operator.name, operator.webhook_kustomization, error)) from None
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


def _ready(operator: Operator, port: int, ca_file: Path) -> bool:
    """Whether its health endpoint answers 200 (over TLS, checked against
    the cluster's CA, where it serves it so)."""
    scheme = "https" if operator.health_tls else "http"
    context = ssl.create_default_context(cafile=str(ca_file)) if operator.health_tls else None
    try:
        with urllib.request.urlopen("%s://127.0.0.1:%d%s" % (scheme, port, operator.health_path), timeout=2,
                                    context=context) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
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
        pki = self.state_dir / "pki"
        running = self.state(name)
        if running and _ready(operator, running["ports"]["health"], pki / "ca.crt"):
            self._apply_webhooks(operator, running["ports"]["webhook"])
            return
        binary = self.bin_dir / operator.binary
        if not binary.exists():
            raise OperatorError("%s is not built: tools/localcluster/build.sh --operators %s" % (
                binary, operator.build_name))
        ensure_ca(pki)
        directory = self.state_dir / name
        cert_dir = directory / operator.cert_dir
        cert_dir.mkdir(parents=True, exist_ok=True)
        for source, target in (("serving.crt", "tls.crt"), ("serving.key", "tls.key"), ("ca.crt", "ca.crt")):
            shutil.copy(pki / source, cert_dir / target)
        ports = {"webhook": free_port(), "health": free_port(), "metrics": free_port()}
        root = module_dir(self.go_dir, operator)
        args, files = operator.configure(ports, directory, root)
        if operator.kubeconfig_flag:
            args.append("--kubeconfig=%s" % self.kubeconfig)
        for file_name, text in files.items():
            (directory / file_name).write_text(text)
        for link in operator.module_links:
            (directory / link).unlink(missing_ok=True)
            (directory / link).symlink_to(root / link)
        for document in operator.objects(root):
            self.api.apply(core_object_path(document), document)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / (name + ".log")
        started = time.monotonic()
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen([str(binary), *args], cwd=directory, stdout=log_file, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       env=dict(os.environ, KUBECONFIG=str(self.kubeconfig), TMPDIR=str(directory),
                                                **operator.environment))
        state_path(self.state_dir, name).write_text(json.dumps({"pid": process.pid, "ports": ports}))

        def wait(until: Callable[[], bool], what: str) -> None:
            while not until():
                if process.poll() is not None or time.monotonic() - started > timeout:
                    self.stop(name)
                    tail = log_path.read_text(errors="replace").splitlines()[-15:]
                    raise OperatorError("%s %s within %.0f s; the last lines of %s:\n%s" % (
                        name, "exited" if process.returncode is not None else "was not " + what, timeout, log_path,
                        "\n".join(tail)))
                time.sleep(0.2)

        wait(lambda: _ready(operator, ports["health"], pki / "ca.crt"), "ready")
        # Some serve their webhooks only once their configurations exist
        # (Volcano's adds its CA to them first): applied, then waited for.
        if self._apply_webhooks(operator, ports["webhook"]):
            wait(lambda: _listening(ports["webhook"]), "serving its webhooks")
        self.log("%s ready in %.1fs (pid %d%s)" % (
            name, time.monotonic() - started, process.pid,
            ", webhooks on 127.0.0.1:%d" % ports["webhook"] if operator.webhook_manifests or operator.webhook_chart
            else ""))

    def _apply_webhooks(self, operator: Operator, port: int) -> int:
        """Applies its webhook configurations; returns how many."""
        ca_bundle = base64.b64encode((self.state_dir / "pki" / "ca.crt").read_bytes()).decode()
        manifests, patches = read_webhook_sources(self.go_dir, operator)
        documents = webhook_configurations(operator, manifests, patches, port, ca_bundle)
        for document in documents:
            self.api.apply("/apis/admissionregistration.k8s.io/v1/%ss/%s" % (
                document["kind"].lower(), document["metadata"]["name"]), document)
        return len(documents)

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
