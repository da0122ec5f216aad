#!/usr/bin/env python3
"""A real local Kubernetes control plane with fake GPU nodes, for tests and demos.

kube-apiserver, kube-controller-manager, kube-scheduler and etcd run as local
processes (started by `kwokctl --runtime binary` from the binaries that
build.sh compiles), every one listening on 127.0.0.1 only. kwok plays the
kubelet of every node. The nodes come from the local inventory
(inventories/local/group_vars/all/local_cluster.yml).

`exec` into a pod runs a command on this machine, in an environment that
stands for the pod's node; see podsync below. Everything lives under
<repo>/.work/localcluster/, or the directory that MLINFRA_LOCALCLUSTER_DIR
names (the test suite's own cluster lives in .work/localcluster-test, beside
one a user may have running); nothing outside it (in particular not
~/.kube/config) is touched. Each cluster's components take free ports of
their own (kwokctl picks them), so two clusters run side by side.

    localcluster.py up          build if needed, start, wait until ready (idempotent)
    localcluster.py down        stop and delete the cluster
    localcluster.py status      print the state; exit status 0 only if it is up and healthy
    localcluster.py kubeconfig  print the path of the kubeconfig
    localcluster.py kubectl ... run the pinned kubectl against the cluster
    localcluster.py podsync     (internal) the pod sync loop that `up` starts

Only the Python standard library and PyYAML are needed.

podsync: kwok runs an `exec` locally with the environment and working
directory of the kwok Exec object named like the pod (kwok.x-k8s.io/v1alpha1;
kwok passes nothing about the pod or its node to the command). The pod sync
loop watches pods; when one is bound to a node it writes that pod's Exec and
Logs objects (owned by the pod, so they go with it) with
    MLINFRA_NODE_NAME  the node
    MLINFRA_HOST_ROOT  <repo>/tests/fixtures/nodes/<the node's snapshot>
    PATH               <snapshot>/usr/bin:<repo>/files/bin:<repo>/.work/venv-workload/bin:<PATH of `up`>
plus the container's own env (literal values and downward-API fields), and
only then marks the pod (annotation localcluster.mlinfra.io/exec); kwok's pod
stage (kwok/stages.yaml) makes a pod Running and Ready only once it carries
that mark.

A batch pod (restartPolicy Never, owned by a Job of any kind) whose container
runs the collection's launcher (`bash -c '... $MLINFRA_PLUGINS_DIR ...'`, the
train role's Job start modes) has that command run on this machine too, in
the same environment, its output as the container's log; when it ends the
pod sync sets the pod Succeeded or Failed with the command's exit code, as a
kubelet would (annotation localcluster.mlinfra.io/runs-command keeps kwok's
own completion of Job pods away from it). Any other container's command is
not run.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import yaml

HERE = Path(__file__).resolve().parent
# upstream_crds.py beside this file, also when this file is loaded by path
# (the tests do) rather than run.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import faults  # noqa: E402  (needs the path above)
import operator_catalog  # noqa: E402  (needs the path above)
import operators  # noqa: E402  (needs the path above)
import upstream_crds  # noqa: E402  (needs the path above)
ROOT = HERE.parent.parent
# The cluster's state directory; the inventory (inventories/local) reads the
# same variable to find the kubeconfig in it.
LOCATION_VARIABLE = "MLINFRA_LOCALCLUSTER_DIR"
WORK = Path(os.environ.get(LOCATION_VARIABLE) or ROOT / ".work" / "localcluster").absolute()
NAME = "mlinfra"
KWOK_WORKDIR = WORK / "kwok"
CLUSTER_DIR = KWOK_WORKDIR / "clusters" / NAME
KUBECONFIG = WORK / "kubeconfig"
CONFIG = WORK / "kwokctl.yaml"
PODS_DIR = WORK / "pods"
VOLUMES_DIR = WORK / "volumes"
SHIMS_DIR = WORK / "shims"
LOG_DIR = WORK / "logs"
SYNC_PID = WORK / "podsync.pid"
SYNC_PATH = WORK / "podsync.path"
SYNC_CODE = WORK / "podsync.code"
OPERATORS_DIR = WORK / "operators"
GO_DIR = HERE / "go"
INVENTORY_VARS = ROOT / "inventories" / "local" / "group_vars" / "all"
SNAPSHOTS_DIR = ROOT / "tests" / "fixtures" / "nodes"
FILES_BIN = ROOT / "files" / "bin"
# The cgroup (of the cpu controller) under which the faults slow pods: one per
# state directory, so that clusters side by side keep to their own.
FAULTS_CGROUP = "mlinfra-localcluster-" + hashlib.sha256(str(WORK).encode()).hexdigest()[:12]
# The fake pods' "image": python3 and torchrun with torch
# (requirements/workload.in, installed by scripts/setup.sh).
WORKLOAD_BIN = ROOT / ".work" / "venv-workload" / "bin"
STAGES = HERE / "kwok" / "stages.yaml"
# build.sh, and where it keeps the binaries (below MLINFRA_CACHE_DIR, as the
# CRDs are).
BUILD, BIN = HERE / "build.sh", upstream_crds.CACHE_ROOT / "bin" / "current"

FIELD_MANAGER = "mlinfra-localcluster"
# Storage: a default class with pre-made volumes (directories under
# VOLUMES_DIR) that the real PV controller binds claims to, as a cluster's
# provisioner would. Released volumes are wiped and offered again.
STORAGE_CLASS = "local-workspace"
VOLUME_COUNT = 24
ANNOTATION_PREFIX = "localcluster.mlinfra.io/"
EXEC_MARK = ANNOTATION_PREFIX + "exec"
# A pod whose init container failed: left not Ready, not retried.
FAILED_MARK = ANNOTATION_PREFIX + "failed"
# A batch pod whose container command the pod sync runs (and ends).
RUN_MARK = ANNOTATION_PREFIX + "runs-command"
NODE_SNAPSHOT = ANNOTATION_PREFIX + "snapshot"
NODE_INVENTORY = ANNOTATION_PREFIX + "inventory"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kwokctl")


def log(msg: str) -> None:
    print(f"[localcluster {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class ClusterError(RuntimeError):
    pass


# --------------------------------------------------------------------------
# The inventory
# --------------------------------------------------------------------------

def load_inventory_vars() -> dict:
    """Merges inventories/local/group_vars/all/*.yml, as Ansible would."""
    merged: dict = {}
    for path in sorted(INVENTORY_VARS.glob("*.y*ml")):
        data = yaml.safe_load(path.read_text()) or {}
        merged.update(data)
    return merged


def inventory_nodes() -> list[dict]:
    """The Node objects (with status) described by the inventory."""
    inv = load_inventory_vars()
    profiles = inv.get("localcluster_node_profiles") or {}
    nodes = [node_object(entry, profiles) for entry in inv.get("localcluster_nodes") or []]
    if not nodes:
        raise ClusterError(f"no localcluster_nodes in {INVENTORY_VARS}")
    return nodes


def node_object(entry: dict, profiles: dict, inventory: bool = True) -> dict:
    """The Node object (with status) of one localcluster_nodes entry; a node
    not from the inventory (a test's) is left alone by `up`. An entry's
    `fault` (tools/localcluster/faults.py) goes into its annotation."""
    profile = profiles.get(entry.get("profile"), {}) if entry.get("profile") else {}
    if entry.get("profile") and not profile:
        raise ClusterError(f"node {entry['name']}: unknown profile {entry['profile']!r}")

    def merged(key: str) -> dict:
        return {**(profile.get(key) or {}), **(entry.get(key) or {})}

    name = entry["name"]
    labels = {k: str(v) for k, v in merged("labels").items()}
    labels["kubernetes.io/hostname"] = name
    annotations = {k: str(v) for k, v in merged("annotations").items()}
    annotations["kwok.x-k8s.io/node"] = "fake"
    if inventory:
        annotations[NODE_INVENTORY] = "inventories/local"
    if entry.get("snapshot"):
        annotations[NODE_SNAPSHOT] = entry["snapshot"]
    if entry.get("fault"):
        try:
            faults.Fault(entry["fault"])
        except (faults.FaultError, TypeError, ValueError, AttributeError) as err:
            raise ClusterError(f"node {name}: {err}") from None
        annotations[faults.FAULT_ANNOTATION] = json.dumps(entry["fault"], sort_keys=True)
    taints = entry["taints"] if "taints" in entry else (profile.get("taints") or [])
    info = {**(profile.get("node_info") or {}), **(entry.get("node_info") or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": bool(entry.get("unschedulable"))},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "capacity": {k: str(v) for k, v in merged("capacity").items()},
            "allocatable": {k: str(v) for k, v in merged("allocatable").items()},
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": info.get("os_image", ""),
                "kernelVersion": info.get("kernel_version", ""),
                "containerRuntimeVersion": info.get("container_runtime_version", "kwok"),
                "kubeletVersion": kube_version(),
                "kubeProxyVersion": "",
                "machineID": hashlib.sha256(name.encode()).hexdigest()[:32],
                "systemUUID": "",
                "bootID": "",
            },
        },
    }


def snapshot_root(snapshot: str) -> Path:
    return SNAPSHOTS_DIR / snapshot


# --------------------------------------------------------------------------
# Binaries and the kwokctl configuration
# --------------------------------------------------------------------------

def ensure_binaries(with_operators: tuple[str, ...] = ()) -> None:
    """Runs build.sh (and builds what the operators named need): a no-op
    taking well under a second when all is cached."""
    started = time.monotonic()
    builds = operator_catalog.build_names(operator_catalog.known(list(with_operators)))
    extra = ["--operators", ",".join(builds)] if builds else []
    result = subprocess.run(["bash", str(BUILD), *extra], stdout=sys.stderr, stderr=sys.stderr, check=False)
    if result.returncode != 0:
        raise ClusterError(f"{BUILD.relative_to(ROOT)} failed (exit status {result.returncode})")
    missing = [b for b in BINARIES if not (BIN / b).exists()]
    if missing:
        raise ClusterError(f"build.sh left no {', '.join(missing)} in {BIN}")
    if time.monotonic() - started > 5:
        log(f"binaries ready ({time.monotonic() - started:.0f}s)")


def kube_version() -> str:
    gomod = (HERE / "go" / "kubernetes" / "go.mod").read_text()
    for line in gomod.splitlines():
        parts = line.split()
        if "k8s.io/kubernetes" in parts:
            return parts[parts.index("k8s.io/kubernetes") + 1]
    raise ClusterError("cannot find the k8s.io/kubernetes version in go/kubernetes/go.mod")


def kwokctl_config() -> str:
    """The KwokctlConfiguration (and kwok's stages) the cluster is created from."""
    options = {
        "runtime": "binary",
        # kwokctl's default is 0.0.0.0; every component listens on loopback only.
        "bindAddress": "127.0.0.1",
        "kubeApiserverBinary": str(BIN / "kube-apiserver"),
        "kubeControllerManagerBinary": str(BIN / "kube-controller-manager"),
        "kubeSchedulerBinary": str(BIN / "kube-scheduler"),
        "kubectlBinary": str(BIN / "kubectl"),
        "etcdBinary": str(BIN / "etcd"),
        "kwokControllerBinary": str(BIN / "kwok"),
        "kubeVersion": kube_version(),
        # kwok reads these kinds from the API server, so that the pod sync
        # can create them per pod while the cluster runs.
        "enableCRDs": ["Exec", "ClusterExec", "Logs", "ClusterLogs"],
        # Leave ~/.kwok alone.
        "cacheDir": str(KWOK_WORKDIR / "cache"),
    }
    config = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": options,
        "componentsPatches": [{
            "name": "kube-apiserver",
            # Nodes have only an InternalIP (127.0.0.1, where kwok serves
            # exec and logs); never try their names in DNS.
            "extraArgs": [{"key": "kubelet-preferred-address-types", "value": "InternalIP"}],
        }],
    }
    return "---\n" + yaml.safe_dump(config, sort_keys=False) + STAGES.read_text()


# --------------------------------------------------------------------------
# Talking to the API server (standard library only)
# --------------------------------------------------------------------------

class Api:
    """A minimal client for the cluster, with the admin certificate kwokctl made."""

    def __init__(self) -> None:
        kubeconfig = yaml.safe_load((CLUSTER_DIR / "kubeconfig.yaml").read_text())
        self.server = kubeconfig["clusters"][0]["cluster"]["server"]
        user = kubeconfig["users"][0]["user"]
        self.context = ssl.create_default_context(cafile=kubeconfig["clusters"][0]["cluster"]["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])

    def request(self, method: str, path: str, body=None, content_type: str = "application/json",
                timeout: float = 30, query: dict | None = None):
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                status = json.loads(raw)
            except ValueError:
                status = {"message": raw.decode(errors="replace")}
            raise ApiError(err.code, status) from None
        return json.loads(raw) if raw else None

    def get(self, path: str, **query):
        return self.request("GET", path, query=query or None)

    def apply(self, path: str, obj: dict):
        """Server-side apply, as the one field manager of this tool."""
        return self.request("PATCH", path, obj, "application/apply-patch+yaml",
                            query={"fieldManager": FIELD_MANAGER, "force": "true"})

    def merge_patch(self, path: str, patch: dict):
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str):
        return self.request("DELETE", path)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 240):
        query = {"watch": "1", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        req = urllib.request.Request(self.server + path + "?" + urllib.parse.urlencode(query))
        with urllib.request.urlopen(req, context=self.context, timeout=timeout_seconds + 30) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)

    def healthy(self) -> bool:
        try:
            req = urllib.request.Request(self.server + "/readyz")
            with urllib.request.urlopen(req, context=self.context, timeout=5) as resp:
                return resp.read().strip() == b"ok"
        except (OSError, urllib.error.URLError):
            return False


class ApiError(RuntimeError):
    def __init__(self, code: int, status: dict) -> None:
        super().__init__(f"HTTP {code}: {status.get('message', status)}")
        self.code = code
        self.status = status


def pod_replaced(err: ApiError) -> bool:
    """Whether a write that named the pod's uid failed because the pod went
    away or another of its name took its place. A merge patch's uid that no
    longer matches is refused as an invalid change of an immutable field
    (422), not as a conflict; taken for an error, it broke the pod sync's
    watch, and the deletions in the gap were never seen."""
    return err.code in (404, 409) or err.code == 422 and "metadata.uid" in str(err.status.get("message", ""))


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------

def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def pid_cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def component_pids() -> dict[str, int | None]:
    """The pid of each control-plane process of our cluster, None where it is not running."""
    pids: dict[str, int | None] = {}
    for name in COMPONENTS:
        pid = None
        try:
            candidate = int((CLUSTER_DIR / "pids" / f"{name}.pid").read_text().strip())
            # Only a process started from our cluster directory counts.
            if pid_alive(candidate) and str(CLUSTER_DIR) in " ".join(pid_cmdline(candidate)):
                pid = candidate
        except (OSError, ValueError):
            pass
        pids[name] = pid
    return pids


def podsync_pid() -> int | None:
    try:
        pid = int(SYNC_PID.read_text().strip())
    except (OSError, ValueError):
        return None
    cmd = pid_cmdline(pid)
    if pid_alive(pid) and any(a.endswith("localcluster.py") for a in cmd) and "podsync" in cmd:
        return pid
    return None


def state() -> str:
    """absent | stopped | partial | running"""
    if not (CLUSTER_DIR / "kwok.yaml").exists():
        return "absent"
    alive = [p for p in component_pids().values() if p]
    if not alive:
        return "stopped"
    return "running" if len(alive) == len(COMPONENTS) else "partial"


def kwokctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = kwok_environment()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG_DIR / "kwokctl.log", "a") as out:
        out.write(f"\n$ kwokctl {' '.join(args)}\n")
        out.flush()
        result = subprocess.run([str(BIN / "kwokctl"), "--name", NAME, *args],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=WORK, check=False)
    if check and result.returncode != 0:
        tail = (LOG_DIR / "kwokctl.log").read_text().splitlines()[-15:]
        raise ClusterError(f"kwokctl {args[0]} {args[1] if len(args) > 1 else ''} failed:\n" + "\n".join(tail))
    return result


def base_path() -> str:
    """The PATH exec'd commands get after the node's own directories."""
    return os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")


def kwok_environment() -> dict:
    """The environment of kwokctl, inherited by the components it starts.

    kwok looks the command of an exec up on its own PATH (Go's exec.Command),
    before the exec's environment applies: the shims directory comes first so
    that a bare `nvidia-smi` resolves on the node's PATH (see write_shims),
    then files/bin, then the pinned binaries (kwokctl runs the first kubectl
    it finds).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    env["KWOK_WORKDIR"] = str(KWOK_WORKDIR)
    env["PATH"] = os.pathsep.join([str(SHIMS_DIR), str(FILES_BIN), str(BIN), base_path()])
    return env


SHIM = """#!/bin/sh
# Written by tools/localcluster/localcluster.py. kwok resolves the command of
# an exec on its own PATH; this one hands it over to the PATH of the exec,
# which is the node's (<snapshot>/usr/bin first).
shims=$(dirname "$0")
PATH=$(printf '%s' "$PATH" | tr ':' '\\n' | grep -Fvx "$shims" | paste -sd: -)
export PATH
exec "$(basename "$0")" "$@"
"""


def write_shims(snapshot: Path) -> None:
    """A shim in SHIMS_DIR for each command of the node snapshot's usr/bin."""
    SHIMS_DIR.mkdir(parents=True, exist_ok=True)
    bindir = snapshot / "usr" / "bin"
    if not bindir.is_dir():
        return
    for cmd in bindir.iterdir():
        shim = SHIMS_DIR / cmd.name
        if not shim.exists():
            tmp = shim.with_name(f".{cmd.name}.tmp")
            tmp.write_text(SHIM)
            tmp.chmod(0o755)
            tmp.replace(shim)


# --------------------------------------------------------------------------
# up / down / status
# --------------------------------------------------------------------------

def config_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def operator_runner(api: Api | None = None) -> operators.Runner:
    return operators.Runner(OPERATORS_DIR, LOG_DIR, BIN, GO_DIR, CLUSTER_DIR / "kubeconfig.yaml",
                            api or Api(), log)


def up(timeout: float = 120, with_operators: tuple[str, ...] = ()) -> None:
    started = time.monotonic()
    with_operators = tuple(operator_catalog.known(list(with_operators)))
    ensure_binaries(with_operators)
    WORK.mkdir(parents=True, exist_ok=True)
    nodes = inventory_nodes()
    config = kwokctl_config()
    current = state()
    if current != "absent" and (not CONFIG.exists() or config_digest(CONFIG.read_text()) != config_digest(config)):
        log("the cluster's configuration changed: re-creating it")
        down(quiet=True)
        current = "absent"
    if current == "running" and not api_answers(15):
        log("the API server does not answer: restarting the cluster")
        current = "partial"
    if current == "partial":
        log("some control-plane processes are gone: restarting the cluster")
        kwokctl("stop", "cluster")
        current = "stopped"
    for node in nodes:
        write_shims(snapshot_root(node["metadata"]["annotations"].get(NODE_SNAPSHOT, "-")))
    if current == "absent":
        log(f"creating the cluster in {CLUSTER_DIR.relative_to(ROOT)}")
        shutil.rmtree(PODS_DIR, ignore_errors=True)
        shutil.rmtree(VOLUMES_DIR, ignore_errors=True)
        tmp = CONFIG.with_suffix(".tmp")
        tmp.write_text(config)
        tmp.replace(CONFIG)
        kwokctl("create", "cluster", "--config", str(CONFIG), "--kubeconfig", str(KUBECONFIG))
    elif current == "stopped":
        log("starting the stopped cluster")
        kwokctl("start", "cluster")
    api = wait_api(timeout)
    apply_crds(api, timeout)
    apply_storage(api)
    apply_nodes(api, nodes)
    ensure_podsync()
    wait_nodes(api, [n["metadata"]["name"] for n in nodes], timeout)
    runner = operator_runner(api)
    for name in dict.fromkeys(operator_catalog.WITH_THE_CLUSTER + with_operators):
        runner.start(name, timeout)
    verify_loopback_only()
    elapsed = time.monotonic() - started
    if current == "running":
        log(f"already up ({elapsed:.1f}s)")
    else:
        log(f"up in {elapsed:.1f}s: {len(nodes)} nodes Ready; KUBECONFIG={KUBECONFIG}")


def api_answers(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Api().healthy():
                return True
        except (OSError, KeyError, IndexError, yaml.YAMLError):
            pass
        time.sleep(0.5)
    return False


def wait_api(timeout: float) -> Api:
    deadline = time.monotonic() + timeout
    api = None
    while time.monotonic() < deadline:
        if api is None and (CLUSTER_DIR / "kubeconfig.yaml").exists():
            api = Api()
        if api is not None and api.healthy():
            return api
        time.sleep(0.2)
    raise ClusterError(f"kube-apiserver not ready within {timeout:.0f}s; see {CLUSTER_DIR / 'logs'}")


def crd_documents() -> list[dict]:
    """The operators' own CRDs (upstream_crds.py)."""
    try:
        return [entry["crd"] for entry in upstream_crds.load()]
    except upstream_crds.FetchError as err:
        raise ClusterError(str(err)) from None


def apply_crds(api: Api, timeout: float) -> None:
    crds = crd_documents()
    for crd in crds:
        # json round trip: YAML anchors make shared sub-dicts, plain JSON is wanted.
        api.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}",
                  json.loads(json.dumps(crd)))
    deadline = time.monotonic() + timeout
    pending = {c["metadata"]["name"] for c in crds}
    while pending:
        for name in sorted(pending):
            # A CRD just created can show "status": {"conditions": null}:
            # that is "not yet", never a crash (it once was one, in about one
            # start of 25).
            obj = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") or {}
            conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                pending.discard(name)
        if pending:
            if time.monotonic() > deadline:
                raise ClusterError(f"CRDs not Established: {', '.join(sorted(pending))}")
            time.sleep(0.1)
    # The API server's discovery (what kubectl and the python client see)
    # follows the Established condition within a moment; wait for it too.
    groups = {c["spec"]["group"] + "/" + c["spec"]["versions"][0]["name"]: c["spec"]["names"]["plural"] for c in crds}
    for gv, plural in groups.items():
        while True:
            try:
                resources = api.get(f"/apis/{gv}") or {}
                if any(r["name"] == plural for r in resources.get("resources") or []):
                    break
            except ApiError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"{plural}.{gv} not served")
            time.sleep(0.1)


def apply_storage(api: Api) -> None:
    api.apply(f"/apis/storage.k8s.io/v1/storageclasses/{STORAGE_CLASS}", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "reclaimPolicy": "Retain",
        "volumeBindingMode": "Immediate",
    })
    for index in range(VOLUME_COUNT):
        name = f"local-pv-{index:02d}"
        path = VOLUMES_DIR / name
        path.mkdir(parents=True, exist_ok=True)
        try:
            api.get(f"/api/v1/persistentvolumes/{name}")
            continue
        except ApiError as err:
            if err.code != 404:
                raise
        api.apply(f"/api/v1/persistentvolumes/{name}", {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
            "spec": {"capacity": {"storage": "10Ti"}, "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                     "hostPath": {"path": str(path), "type": "DirectoryOrCreate"}},
        })
    recycle_released_volumes(api)


def recycle_released_volumes(api: Api) -> None:
    """Wipe the volumes whose claim was deleted and make them Available."""
    for pv in api.get("/api/v1/persistentvolumes")["items"]:
        meta, spec = pv["metadata"], pv["spec"]
        if pv.get("status", {}).get("phase") != "Released" or \
                meta.get("labels", {}).get("app.kubernetes.io/managed-by") != FIELD_MANAGER:
            continue
        path = Path(spec["hostPath"]["path"])
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        api.merge_patch(f"/api/v1/persistentvolumes/{meta['name']}", {"spec": {"claimRef": None}})


def claim_dir(api: Api, namespace: str, claim_name: str) -> Path | None:
    """The directory of the volume bound to a claim (None while unbound)."""
    claim = api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}")
    pv_name = claim["spec"].get("volumeName")
    if not pv_name:
        return None
    pv = api.get(f"/api/v1/persistentvolumes/{pv_name}")
    host_path = (pv["spec"].get("hostPath") or {}).get("path")
    return Path(host_path) if host_path else None


class MountError(RuntimeError):
    """A volume the kubelet could not mount (as its FailedMount event)."""


def sees_the_host(pod: dict) -> bool:
    """Whether the pod mounts the node's own /sys."""
    return any((volume.get("hostPath") or {}).get("path", "").rstrip("/") == "/sys"
               for volume in pod["spec"].get("volumes") or [])


def volume_host_dirs(api: Api, pod: dict, pdir: Path, snapshot: Path | None) -> dict[str, Path]:
    """Where each of the pod's volumes lives on this machine: a claim is its
    volume's directory (so a workspace outlives its pod, as on a cluster), an
    emptyDir a directory of the pod, a ConfigMap a directory holding its keys
    as files (what the kubelet projects), a hostPath the path in the node's
    snapshot. Other kinds (secrets, projected tokens) are not provided."""
    ns = pod["metadata"]["namespace"]
    dirs = {}
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        own = pdir / "volumes" / name
        if "persistentVolumeClaim" in volume:
            path = claim_dir(api, ns, volume["persistentVolumeClaim"]["claimName"])
            if path is None:
                continue
        elif "emptyDir" in volume:
            own.mkdir(parents=True, exist_ok=True)
            path = own
        elif "configMap" in volume:
            source = volume["configMap"]
            try:
                config_map = api.get(f"/api/v1/namespaces/{ns}/configmaps/{source['name']}")
            except ApiError as err:
                if err.code != 404:
                    raise
                if source.get("optional"):
                    continue
                raise MountError(f'MountVolume.SetUp failed for volume "{name}": '
                                 f'configmap "{source["name"]}" not found') from None
            shutil.rmtree(own, ignore_errors=True)
            own.mkdir(parents=True)
            data = config_map.get("data") or {}
            items = source.get("items") or [{"key": key, "path": key} for key in data]
            for item in items:
                if item["key"] not in data:
                    continue
                target = own / item["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(data[item["key"]])
                target.chmod(item.get("mode", source.get("defaultMode", 0o644)))
            path = own
        elif "hostPath" in volume and snapshot is not None:
            path = snapshot / volume["hostPath"]["path"].lstrip("/")
            if not path.exists():
                own.mkdir(parents=True, exist_ok=True)
                path = own
        else:
            continue
        dirs[name] = path
    return dirs


class ContainerView:
    """A container's file system as far as its volume mounts go: a directory
    with a link at each mount path to the volume's directory, and the mapping
    of the container's absolute paths into it. A path is mapped when it lies
    under a mount path (or leads to one, as /opt/mlinfra/plugins does to
    /opt/mlinfra/plugins/module_utils); anything else (/bin/bash, python3) is
    this machine's own."""

    def __init__(self, root: Path, container: dict, volumes: dict[str, Path]) -> None:
        self.root = root
        self.mount_paths = []
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for mount in sorted(container.get("volumeMounts") or [], key=lambda m: m["mountPath"]):
            host = volumes.get(mount["name"])
            mount_path = "/" + mount["mountPath"].strip("/")
            if host is None:
                continue
            if mount.get("subPath"):
                host = host / mount["subPath"]
                host.mkdir(parents=True, exist_ok=True)
            link = root / mount_path.lstrip("/")
            if any(mount_path.startswith(other + "/") for other in self.mount_paths):
                continue  # a mount inside another mount: not represented
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(host)
            self.mount_paths.append(mount_path)

    def map(self, value: str) -> str:
        if not value.startswith("/"):
            return value
        for mount_path in self.mount_paths:
            if value == mount_path or value.startswith(mount_path + "/") or \
                    mount_path.startswith(value.rstrip("/") + "/"):
                return str(self.root) + value
        return value

    def directory(self, path: str | None) -> Path | None:
        """The real directory behind a container path, if it is mapped."""
        mapped = self.map(path or "")
        return Path(mapped).resolve() if mapped != (path or "") else None

    def shipped_file(self, volumes: dict[str, Path], configmap_volumes: set[str], path: str) -> bool:
        """Whether a container path is a file of one of the pod's ConfigMap volumes."""
        mapped = Path(self.map(path))
        if mapped == Path(path) or not mapped.is_file():
            return False
        real = mapped.resolve()
        return any(real.is_relative_to(volumes[name].resolve()) for name in configmap_volumes if name in volumes)


def apply_node(api: Api, node: dict) -> None:
    name = node["metadata"]["name"]
    api.apply(f"/api/v1/nodes/{name}", {key: value for key, value in node.items() if key != "status"})
    # Capacity, allocatable, addresses and nodeInfo live in the status.
    api.apply(f"/api/v1/nodes/{name}/status", {"apiVersion": "v1", "kind": "Node",
                                               "metadata": {"name": name}, "status": node["status"]})


def apply_nodes(api: Api, nodes: list[dict]) -> None:
    wanted = set()
    for node in nodes:
        wanted.add(node["metadata"]["name"])
        apply_node(api, node)
    for existing in api.get("/api/v1/nodes")["items"]:
        meta = existing["metadata"]
        if meta.get("annotations", {}).get(NODE_INVENTORY) and meta["name"] not in wanted:
            log(f"deleting node {meta['name']} (no longer in the inventory)")
            api.delete(f"/api/v1/nodes/{meta['name']}")


def wait_nodes(api: Api, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ready = set()
        for node in api.get("/api/v1/nodes")["items"]:
            # Ready, and the node lifecycle controller has also lifted its
            # not-ready/unreachable taints (it does so a moment later), so
            # pods schedule as soon as this returns.
            # node.kubernetes.io/unschedulable is the taint of a cordoned
            # node, which is as the inventory wants it.
            lifecycle_taints = [t for t in node.get("spec", {}).get("taints") or []
                                if t["key"].startswith("node.kubernetes.io/")
                                and t["key"] != "node.kubernetes.io/unschedulable"]
            for cond in node.get("status", {}).get("conditions", []):
                if cond["type"] == "Ready" and cond["status"] == "True" and not lifecycle_taints:
                    ready.add(node["metadata"]["name"])
        missing = [n for n in names if n not in ready]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"nodes not Ready (or still tainted not-ready) within {timeout:.0f}s: "
                               f"{', '.join(missing)}")
        time.sleep(0.2)


def listening_sockets(pids: set[int]) -> list[str]:
    """The TCP listening addresses of the given processes, from /proc."""
    inodes = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(addr_hex)
            # /proc prints the address as host-order 32-bit words.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.append(f"{socket.inet_ntop(family, raw)}:{int(port_hex, 16)}")
    return found


def operator_pids() -> dict[str, int]:
    """The operators running for this cluster, by name (none when it is not
    up: reading their state needs no API)."""
    return operators.running_pids(OPERATORS_DIR)


def verify_loopback_only() -> None:
    pids = {p for p in [*component_pids().values(), *operator_pids().values()] if p}
    exposed = [a for a in listening_sockets(pids) if not a.startswith(("127.", "::1"))]
    if exposed:
        raise ClusterError(f"a control-plane process listens beyond loopback: {', '.join(exposed)}")


def down(quiet: bool = False) -> None:
    stop_podsync()
    for pid in operator_pids().values():
        os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(OPERATORS_DIR, ignore_errors=True)
    # What the pods' exec sessions left running (a detached training
    # launch) would outlive the cluster and hold its ports.
    stop_pod_processes(PODS_DIR)
    if (CLUSTER_DIR).exists() and (BIN / "kwokctl").exists():
        kwokctl("delete", "cluster", "--kubeconfig", str(KUBECONFIG), check=False)
    # Whatever kwokctl could not stop (e.g. its pid files are gone): only
    # processes whose command line names our cluster directory.
    for name, pid in component_pids().items():
        if pid:
            os.kill(pid, signal.SIGKILL)
    for path in (CLUSTER_DIR, PODS_DIR, VOLUMES_DIR, SHIMS_DIR, WORK / "faults"):
        shutil.rmtree(path, ignore_errors=True)
    for path in (KUBECONFIG, CONFIG, SYNC_PATH):
        path.unlink(missing_ok=True)
    faults.CpuQuota.remove_all(FAULTS_CGROUP)
    if not quiet:
        log("down")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def status() -> int:
    st = state()
    print(f"cluster   {NAME}: {st} ({CLUSTER_DIR})")
    sync = podsync_pid()
    total = 0
    for name, pid in [*component_pids().items(), ("podsync", sync), *operator_pids().items()]:
        if pid:
            rss = rss_kib(pid)
            total += rss
            print(f"  {name:24} pid {pid:<8} RSS {rss / 1024:6.0f} MiB")
        else:
            print(f"  {name:24} not running")
    if total:
        print(f"  {'total':24} {'':12} RSS {total / 1024:6.0f} MiB")
    if st != "running":
        return 1
    api = Api()
    healthy = api.healthy()
    print(f"api       {api.server}: {'ready' if healthy else 'NOT READY'}")
    ok = healthy and sync is not None
    if healthy:
        for node in api.get("/api/v1/nodes")["items"]:
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
            snap = node["metadata"].get("annotations", {}).get(NODE_SNAPSHOT, "-")
            print(f"  node {node['metadata']['name']:24} {'Ready' if ready else 'NotReady':9} snapshot={snap}")
            ok = ok and ready
    print(f"kubeconfig {KUBECONFIG}")
    return 0 if ok else 1


def is_up() -> bool:
    """True when our cluster is running, its API ready and the pod sync alive."""
    if state() != "running" or podsync_pid() is None:
        return False
    try:
        return Api().healthy()
    except (OSError, KeyError, yaml.YAMLError):
        return False


# --------------------------------------------------------------------------
# The pod sync
# --------------------------------------------------------------------------

def ensure_podsync() -> None:
    # A pod sync started from an older version of this file (or of the
    # faults it plays) is replaced, so `up` after a change runs the changed code.
    code = config_digest(Path(__file__).read_text() + Path(faults.__file__).read_text())
    if podsync_pid():
        if SYNC_CODE.exists() and SYNC_CODE.read_text() == code:
            return
        log("its code changed since the pod sync started: restarting it")
        stop_podsync()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    SYNC_CODE.write_text(code)
    # The PATH exec'd commands get after the node's own directories.
    SYNC_PATH.write_text(base_path())
    with open(LOG_DIR / "podsync.log", "a") as out:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "podsync"],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, LOCATION_VARIABLE: str(WORK)}, cwd=WORK, start_new_session=True)
    SYNC_PID.write_text(f"{proc.pid}\n")


def stop_podsync() -> None:
    pid = podsync_pid()
    if pid:
        os.kill(pid, signal.SIGTERM)
        for _attempt in range(50):
            if not pid_alive(pid):
                break
            time.sleep(0.05)
    SYNC_PID.unlink(missing_ok=True)


def cri_log_line(text: str) -> str:
    """A line in the CRI log format that the kubelet (and kwok) read back."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} stdout F {text}\n"


def field_ref(pod: dict, path: str) -> str | None:
    meta = pod["metadata"]
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": pod["spec"].get("nodeName"),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName"),
        "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return simple[path]
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return (meta.get(source) or {}).get(path[len(prefix) + 2:-2])
    return None


def container_env(pod: dict, container: dict, config_map_data: Callable[[str], dict | None] = lambda name: None
                  ) -> list[dict]:
    """The container's env that can be known before it starts: literal values,
    downward-API fields (not status.podIP) and keys of the pod namespace's
    config maps (config_map_data(name) gives a map's data, None if it has
    none; Volcano's svc plugin hands its hosts over so). A key not there is
    left out (a kubelet would hold the container back unless optional)."""
    env = []
    for var in container.get("env") or []:
        source = var.get("valueFrom") or {}
        value = None
        if "value" in var:
            value = str(var["value"])
        elif source.get("fieldRef"):
            value = field_ref(pod, source["fieldRef"]["fieldPath"])
        elif source.get("configMapKeyRef"):
            ref = source["configMapKeyRef"]
            value = (config_map_data(ref.get("name", "")) or {}).get(ref.get("key"))
        if value is not None:
            env.append({"name": var["name"], "value": value})
    return env


# Kinds whose pods run to an end: a Job (Kubernetes' or Volcano's, which is
# also kind Job) and a PyTorchJob, whose operator makes its pods itself.
BATCH_OWNER_KINDS = {"Job", "PyTorchJob"}


def runs_collection_command(pod: dict, container: dict) -> bool:
    """Whether the pod sync runs this container's command: a batch pod's
    container that starts the collection's launcher through bash."""
    spec, meta = pod["spec"], pod["metadata"]
    owners = {owner.get("kind") for owner in meta.get("ownerReferences") or []}
    command = (container.get("command") or []) + (container.get("args") or [])
    return (spec.get("restartPolicy") == "Never" and bool(owners & BATCH_OWNER_KINDS) and len(command) >= 3
            and os.path.basename(command[0]) == "bash" and command[1] == "-c" and "$MLINFRA_PLUGINS_DIR" in command[2])


def process_running(pid: int) -> bool:
    """Whether pid is a process that has not ended (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def pod_processes(pdir: Path) -> list[int]:
    """The processes of a pod's exec sessions: each is a process of this
    machine that carries its pod's MLINFRA_POD_LOG, which lies in the pod's
    directory (and so do their children)."""
    marker = b"MLINFRA_POD_LOG=" + str(pdir).encode() + b"/"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(item.startswith(marker) for item in environ):
            found.append(int(entry))
    return found


def stop_pod_processes(pdir: Path, grace: float = 2.0) -> list[int]:
    """Ends what a deleted pod's exec sessions left running, as a kubelet
    stops a pod's containers: SIGTERM, SIGKILL after the grace period (a
    detached exec, a training launch, would outlive its pod)."""
    found = pod_processes(pdir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in found:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except OSError:
                pass
        deadline = time.time() + (grace if sig == signal.SIGTERM else 0)
        while alive and time.time() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in alive if process_running(pid)]
        found = alive
    return found


class PodSync:
    # How often a pod whose volume could not be mounted is tried again (a
    # kubelet retries too: the ConfigMap may be created after the pod).
    MOUNT_RETRY_SECONDS = 2.0

    def __init__(self) -> None:
        self.api = Api()
        self.lock = threading.Lock()
        self.waiting_for_mounts: dict[str, tuple[str, str]] = {}
        self.faults = faults.Faults(WORK, pod_processes, faults.CpuQuota.find(FAULTS_CGROUP))
        try:
            self.base_path = SYNC_PATH.read_text().strip()
        except OSError:
            self.base_path = base_path()

    def pod_dir(self, pod: dict) -> Path:
        return PODS_DIR / pod["metadata"]["namespace"] / pod["metadata"]["name"]

    def configure(self, pod: dict) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ns, name, node_name = meta["namespace"], meta["name"], spec["nodeName"]
        node = self.api.get(f"/api/v1/nodes/{node_name}")
        snapshot_name = node["metadata"].get("annotations", {}).get(NODE_SNAPSHOT)
        snapshot = snapshot_root(snapshot_name) if snapshot_name else None

        # The pod's own directory: workspace/ is its working directory (the
        # /workspace of the real image) unless a claim is mounted there,
        # volumes/ its emptyDir and ConfigMap volumes, rootfs/<container>/ each
        # container's view of its mounts, <container>.log its logs.
        pdir = self.pod_dir(pod)
        marker = pdir / ".uid"
        if not marker.exists() or marker.read_text() != meta["uid"]:
            shutil.rmtree(pdir, ignore_errors=True)
            (pdir / "workspace").mkdir(parents=True)
            marker.write_text(meta["uid"])
        if snapshot:
            write_shims(snapshot)
        host_root = snapshot
        try:
            fault = faults.Fault.of_node(node)
        except (faults.FaultError, TypeError, ValueError, AttributeError) as err:
            self.warn(pod, "FaultIgnored", f"node {node_name}'s fault annotation: {err}")
            fault = None
        # A pod that mounts the host's /sys (the verify role's probe) reads the
        # node itself: the faults play on what a pod is given, and neither
        # touch nor count it.
        if sees_the_host(pod):
            fault = None
        if snapshot:
            host_root = self.faults.root_for(node_name, meta["uid"], pdir, snapshot, fault) or snapshot
        try:
            volumes = volume_host_dirs(self.api, pod, pdir, snapshot)
        except MountError as err:
            if meta["uid"] not in self.waiting_for_mounts:
                self.warn(pod, "FailedMount", str(err))
                self.waiting_for_mounts[meta["uid"]] = (ns, name)
            return
        self.waiting_for_mounts.pop(meta["uid"], None)
        configmap_volumes = {v["name"] for v in spec.get("volumes") or [] if "configMap" in v}

        path = [str(FILES_BIN), str(WORKLOAD_BIN), self.base_path]
        if snapshot:
            path.insert(0, str(snapshot / "usr" / "bin"))

        @functools.lru_cache(maxsize=None)
        def config_map_data(map_name: str) -> dict | None:
            try:
                return self.api.get(f"/api/v1/namespaces/{ns}/configmaps/{map_name}").get("data")
            except ApiError:
                return None

        execs, logs, inits, commands = [], [], [], []
        init_names = {c["name"] for c in spec.get("initContainers") or []}
        for container in (spec.get("initContainers") or []) + spec["containers"]:
            logfile = pdir / f"{container['name']}.log"
            view = ContainerView(pdir / "rootfs" / container["name"], container, volumes)
            ours = [
                {"name": "HOSTNAME", "value": name},
                {"name": "MLINFRA_NODE_NAME", "value": node_name},
                {"name": "MLINFRA_POD_NAME", "value": name},
                {"name": "MLINFRA_POD_NAMESPACE", "value": ns},
                {"name": "MLINFRA_POD_LOG", "value": str(logfile)},
                {"name": "PATH", "value": os.pathsep.join(path)},
            ]
            if host_root:
                ours.append({"name": "MLINFRA_HOST_ROOT", "value": str(host_root)})
            # The container's paths (BASH_ENV=/run/mlinfra/nccl.env, ...) point
            # into its volumes here; ours come last: where both set a name, the
            # last value wins.
            env = [{"name": var["name"], "value": view.map(var["value"])}
                   for var in container_env(pod, container, config_map_data)]
            env += ours
            if container["name"] in init_names:
                inits.append((container, view, env, logfile))
            elif runs_collection_command(pod, container):
                commands.append((container, view, env, logfile))
            elif not logfile.exists():
                logfile.write_text(cri_log_line(
                    f"[localcluster] container {container['name']} of pod {ns}/{name} started on node "
                    f"{node_name} (kwok; snapshot {snapshot_name or 'none'}); nothing runs its command"))
            workdir = view.directory(container.get("workingDir") or "/workspace") or pdir / "workspace"
            execs.append({"containers": [container["name"]],
                          "local": {"workDir": str(workdir), "envs": env}})
            logs.append({"containers": [container["name"]], "logsFile": str(logfile), "follow": True})

        # The Exec and Logs objects come first, the init containers after:
        # kwok's server finds an exec through its own watch of Exec objects,
        # which can lag behind its pods' under load ("no exec found for
        # container"); the more happens between the Exec and the mark that
        # makes the pod Ready, the less a client that execs as soon as the
        # pod is Ready can see of that lag. The init container's log can be
        # read (kubectl logs -c) when it fails, as on a kubelet.
        owner = [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": meta["uid"]}]
        labels = {"app.kubernetes.io/managed-by": FIELD_MANAGER}
        for kind, plural, spec_body in (("Exec", "execs", {"execs": execs}), ("Logs", "logs", {"logs": logs})):
            self.api.apply(f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{ns}/{plural}/{name}", {
                "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": kind,
                "metadata": {"name": name, "namespace": ns, "ownerReferences": owner, "labels": labels},
                "spec": spec_body,
            })
        for container, view, env, logfile in inits:
            code = self.run_init_container(container, view, volumes, configmap_volumes, env, logfile)
            if code:
                self.warn(pod, "BackOff", f"init container {container['name']} exited with {code}; "
                                          f"kubectl logs {name} -c {container['name']} -n {ns}")
                self.api.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}",
                                     {"metadata": {"uid": meta["uid"], "annotations": {FAILED_MARK: "BackOff"}}})
                return
        # The uid makes the patch fail if the pod was replaced meanwhile (409,
        # or 422 "metadata.uid: field is immutable" from a merge patch).
        marks = {EXEC_MARK: node_name}
        if commands:
            marks[RUN_MARK] = ",".join(container["name"] for container, _view, _env, _log in commands)
        self.api.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}",
                             {"metadata": {"uid": meta["uid"], "annotations": marks}})
        if snapshot:
            self.faults.counted(node_name, meta["uid"], fault)
        for container, view, env, logfile in commands:
            workdir = view.directory(container.get("workingDir") or "/workspace") or pdir / "workspace"
            self.run_container(pod, container, view, env, logfile, workdir)
        print(f"{time.strftime('%H:%M:%S')} configured {ns}/{name} on {node_name} "
              f"(snapshot {snapshot_name or 'none'})", flush=True)

    def run_init_container(self, container: dict, view: ContainerView, volumes: dict[str, Path],
                           configmap_volumes: set[str], env: list[dict], logfile: Path) -> int:
        """Run an init container whose program is code the cluster shipped in
        a ConfigMap volume (the collection's autodetect: `python3 <script>` or
        the script itself), on this machine in its node's environment, and
        return its exit code. Any other init container is taken as completed
        without running: nothing here can run an image."""
        argv = [view.map(arg) for arg in (container.get("command") or []) + (container.get("args") or [])]
        original = (container.get("command") or []) + (container.get("args") or [])
        program = next((index for index, arg in enumerate(original[:2])
                        if view.shipped_file(volumes, configmap_volumes, arg)), None)
        if program is None:
            logfile.write_text(cri_log_line(f"[localcluster] init container {container['name']}: "
                                            f"nothing runs its command; taken as completed"))
            return 0
        environ = {"HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8"}
        environ.update((var["name"], var["value"]) for var in env)
        workdir = view.directory(container.get("workingDir") or "/") or view.root
        try:
            done = subprocess.run(argv, env=environ, cwd=workdir, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=120, check=False)
            code, output = done.returncode, done.stdout + done.stderr
        except (OSError, subprocess.TimeoutExpired) as err:
            code, output = 128, f"cannot run {argv[0]}: {err}"
        with logfile.open("w") as log_out:
            for line in output.splitlines():
                log_out.write(cri_log_line(line))
        return code

    def run_container(self, pod: dict, container: dict, view: ContainerView, env: list[dict], logfile: Path,
                      workdir: Path) -> None:
        """Starts a batch pod's container command (runs_collection_command)
        in the background; its output becomes the container's log and its
        end the pod's phase. Deleting the pod ends it (forget)."""
        argv = [view.map(arg) for arg in (container.get("command") or []) + (container.get("args") or [])]
        environ = {"HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8"}
        environ.update((var["name"], var["value"]) for var in env)
        started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            process = subprocess.Popen(argv, env=environ, cwd=workdir, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as err:
            logfile.write_text(cri_log_line(f"[localcluster] cannot run {argv[0]}: {err}"))
            self.finish(pod, container["name"], 128, started)
            return

        def follow() -> None:
            with logfile.open("a") as log_out:
                for raw in process.stdout:
                    log_out.write(cri_log_line(raw.decode("utf-8", "replace").rstrip("\n")))
                    log_out.flush()
            self.finish(pod, container["name"], process.wait(), started)

        threading.Thread(target=follow, name=f"run-{pod['metadata']['name']}", daemon=True).start()
        print(f"{time.strftime('%H:%M:%S')} running {pod['metadata']['namespace']}/{pod['metadata']['name']} "
              f"container {container['name']} (pid {process.pid})", flush=True)

    def finish(self, pod: dict, container_name: str, code: int, started: str) -> None:
        """Sets the pod Succeeded or Failed with the container's exit code,
        once kwok has made it Running (a command may end before that)."""
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        deadline = time.time() + 30
        while True:
            try:
                current = self.api.get(path)
            except (ApiError, OSError, urllib.error.URLError, ValueError):
                return
            if current["metadata"]["uid"] != meta["uid"] or current["metadata"].get("deletionTimestamp"):
                return
            if current.get("status", {}).get("phase") == "Running" or time.time() > deadline:
                break
            time.sleep(0.2)
        code = 128 - code if code < 0 else code
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        statuses = []
        for status in current.get("status", {}).get("containerStatuses") or []:
            status = dict(status, ready=False, started=False)
            if status["name"] == container_name:
                status["state"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                                  "startedAt": started, "finishedAt": now}}
            statuses.append(status)
        try:
            self.api.merge_patch(path + "/status", {"metadata": {"uid": meta["uid"]}, "status": {
                "phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": statuses,
                "conditions": [{"type": kind, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                               for kind in ("Ready", "ContainersReady")]}})
        except (ApiError, OSError, urllib.error.URLError, ValueError) as err:
            print(f"{time.strftime('%H:%M:%S')} {ns}/{name}: cannot set its end: {err}", flush=True)
            return
        print(f"{time.strftime('%H:%M:%S')} {ns}/{name}: container {container_name} exited with {code}", flush=True)

    def warn(self, pod: dict, reason: str, message: str) -> None:
        """A Warning event on the pod, as a kubelet reports a mount failure or
        a failing init container (the pod stays not Ready)."""
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.api.request("POST", f"/api/v1/namespaces/{ns}/events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": name + ".", "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns, "uid": meta["uid"]},
            "type": "Warning", "reason": reason, "message": message,
            "source": {"component": "kubelet", "host": pod["spec"]["nodeName"]},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })
        print(f"{time.strftime('%H:%M:%S')} {ns}/{name}: {reason}: {message}", flush=True)

    def handle(self, pod: dict) -> None:
        with self.lock:
            self._handle(pod)

    def _handle(self, pod: dict) -> None:
        meta = pod["metadata"]
        if not pod["spec"].get("nodeName") or meta.get("deletionTimestamp"):
            return
        if {EXEC_MARK, FAILED_MARK} & set(meta.get("annotations") or {}):
            return
        try:
            recycle_released_volumes(self.api)
            self.configure(pod)
        except ApiError as err:
            if not pod_replaced(err):
                raise

    def forget(self, pod: dict) -> None:
        self.faults.forget(pod["metadata"]["uid"])
        pdir = self.pod_dir(pod)
        try:
            if (pdir / ".uid").read_text() == pod["metadata"]["uid"]:
                stop_pod_processes(pdir)
                shutil.rmtree(pdir, ignore_errors=True)
        except OSError:
            pass

    def retry_mounts(self) -> None:
        while True:
            time.sleep(self.MOUNT_RETRY_SECONDS)
            for uid, (ns, name) in list(self.waiting_for_mounts.items()):
                try:
                    pod = self.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
                except ApiError as err:
                    if err.code == 404:
                        self.waiting_for_mounts.pop(uid, None)
                    continue
                except (OSError, urllib.error.URLError, ValueError):
                    continue
                if pod["metadata"]["uid"] != uid:
                    self.waiting_for_mounts.pop(uid, None)
                    continue
                try:
                    self.handle(pod)
                except (OSError, urllib.error.URLError, ApiError, ValueError) as err:
                    print(f"{time.strftime('%H:%M:%S')} pod sync: {ns}/{name}: {err}; retrying", flush=True)

    def run(self) -> None:
        threading.Thread(target=self.retry_mounts, name="mount-retry", daemon=True).start()
        threading.Thread(target=self.faults.run, name="faults", daemon=True).start()
        while CLUSTER_DIR.exists():
            try:
                pods = self.api.get("/api/v1/pods")
                for pod in pods["items"]:
                    self.handle(pod)
                rv = pods["metadata"]["resourceVersion"]
                for event in self.api.watch("/api/v1/pods", rv):
                    kind, obj = event["type"], event["object"]
                    if kind in ("ADDED", "MODIFIED"):
                        self.handle(obj)
                    elif kind == "DELETED":
                        self.forget(obj)
                    elif kind == "BOOKMARK":
                        continue
                    else:  # ERROR, e.g. 410 Gone: list again
                        break
            except (OSError, urllib.error.URLError, ApiError, ValueError) as err:
                print(f"{time.strftime('%H:%M:%S')} pod sync: {err}; retrying", flush=True)
                time.sleep(1)


def podsync() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"{time.strftime('%H:%M:%S')} pod sync started (pid {os.getpid()})", flush=True)
    PodSync().run()
    print(f"{time.strftime('%H:%M:%S')} cluster directory gone: pod sync exits", flush=True)
    return 0


# --------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cluster.sh", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="build if needed, start, wait until the API and every node are Ready")
    p_up.add_argument("--timeout", type=float, default=120)
    p_up.add_argument("--operators", default="", metavar="NAME,...",
                      help="also build (if needed) and start these operators: %s" % ", ".join(
                          [*operator_catalog.OPERATORS, *operator_catalog.GROUPS]))
    p_operator = sub.add_parser("operator", help="start or stop operators of the running cluster")
    p_operator.add_argument("action", choices=("start", "stop"))
    p_operator.add_argument("names", nargs="+", metavar="NAME")
    sub.add_parser("down", help="stop the cluster and delete its state")
    sub.add_parser("status", help="print the state; exit status 0 only if up and healthy")
    sub.add_parser("kubeconfig", help="print the path of the kubeconfig")
    p_kubectl = sub.add_parser("kubectl", help="run kubectl against the cluster")
    p_kubectl.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("podsync", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `status | head` is fine
    try:
        if args.command == "up":
            up(args.timeout, tuple(name for name in args.operators.split(",") if name))
        elif args.command == "operator":
            names = operator_catalog.known(args.names)
            if args.action == "start":
                if not is_up():
                    raise ClusterError("the cluster is not up: cluster.sh up --operators " + ",".join(args.names))
                ensure_binaries(tuple(names))
            runner = operator_runner()
            for name in names if args.action == "start" else reversed(names):
                getattr(runner, args.action)(name)
            verify_loopback_only()
        elif args.command == "down":
            down()
        elif args.command == "status":
            return status()
        elif args.command == "kubeconfig":
            print(KUBECONFIG)
        elif args.command == "kubectl":
            os.execv(str(BIN / "kubectl"), ["kubectl", "--kubeconfig", str(KUBECONFIG), *args.args])
        elif args.command == "podsync":
            return podsync()
    except (ClusterError, operators.OperatorError) as err:
        log(f"error: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
