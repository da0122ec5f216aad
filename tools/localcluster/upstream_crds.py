#!/usr/bin/env python3
"""The operators' own CustomResourceDefinitions, for the local cluster.

Each CRD below is taken from the Go module that its operator publishes, at
the version go/crds/go.mod pins, as that project's controller-gen (or its
authors) wrote it: nothing is retyped. OpenShift's build and image kinds,
which OpenShift serves without CRDs, are generated from the OpenAPI
definitions of the same pinned openshift/api (openapi_crds.py).
go/crds/go.sum holds the modules' checksums, so `go mod download` refuses a module whose content is not the
pinned one. The documents are read once per pinned set and kept in
${MLINFRA_CACHE_DIR:-~/.cache/mlinfra-multinode}/crds/<hash>.json, so a
cluster starts without Go once they are there.

    upstream_crds.py list   each CRD with its module, version and file
    upstream_crds.py path   fetches if needed; prints the cached file

Only the Python standard library and PyYAML are needed (and Go, the first
time for each pinned set).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import yaml

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import openapi_crds  # noqa: E402  (beside this file)

GO_MODULE_DIR = HERE / "go" / "crds"
CACHE_ROOT = Path(os.environ.get("MLINFRA_CACHE_DIR") or Path.home() / ".cache" / "mlinfra-multinode")
CACHE = CACHE_ROOT / "crds"


class Source(NamedTuple):
    module: str   # the Go module path, pinned in go/crds/go.mod
    path: str     # the file inside the module
    names: tuple  # the CRDs to take from it (a file may hold other documents)


SOURCES = (
    # SR-IOV Network Operator (k8snetworkplumbingwg; OpenShift's build of it
    # serves the same API group).
    *(Source("github.com/k8snetworkplumbingwg/sriov-network-operator",
             "config/crd/bases/sriovnetwork.openshift.io_%s.yaml" % plural,
             ("%s.sriovnetwork.openshift.io" % plural,))
      # What its manager watches besides (it runs with the cluster).
      for plural in ("sriovnetworks", "sriovibnetworks", "sriovnetworknodepolicies", "sriovnetworknodestates",
                     "ovsnetworks", "sriovoperatorconfigs", "sriovnetworkpoolconfigs")),
    # Multus' NetworkAttachmentDefinition: the first document of the
    # DaemonSet manifest Multus publishes (the CRD, then its RBAC and pods).
    Source("gopkg.in/k8snetworkplumbingwg/multus-cni.v4", "deployments/multus-daemonset.yml",
           ("network-attachment-definitions.k8s.cni.cncf.io",)),
    # Kubeflow Training Operator v1 (kubeflow.org/v1 PyTorchJob).
    Source("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
           ("pytorchjobs.kubeflow.org",)),
    # Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1).
    *(Source("github.com/kubeflow/trainer/v2", "manifests/base/crds/trainer.kubeflow.org_%s.yaml" % plural,
             ("%s.trainer.kubeflow.org" % plural,))
      for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")),
    # JobSet (jobset.x-k8s.io/v1alpha2), which Trainer v2 renders.
    Source("sigs.k8s.io/jobset", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
           ("jobsets.jobset.x-k8s.io",)),
    # Volcano: its Job and what its scheduler and controllers read (podgroups,
    # queues, the bus's commands, the network topology's hypernodes, the
    # nodes' NUMA topologies), from the files its release installs.
    *(Source("volcano.sh/volcano", "config/crd/volcano/bases/%s.yaml" % crd_file, (name,))
      for crd_file, name in (("batch.volcano.sh_jobs", "jobs.batch.volcano.sh"),
                             ("scheduling.volcano.sh_podgroups", "podgroups.scheduling.volcano.sh"),
                             ("scheduling.volcano.sh_queues", "queues.scheduling.volcano.sh"),
                             ("bus.volcano.sh_commands", "commands.bus.volcano.sh"),
                             ("topology.volcano.sh_hypernodes", "hypernodes.topology.volcano.sh"),
                             ("nodeinfo.volcano.sh_numatopologies", "numatopologies.nodeinfo.volcano.sh"))),
    # Kueue (kueue.x-k8s.io): its queues, flavors, workloads and the rest its
    # controller manager watches.
    *(Source("sigs.k8s.io/kueue", "config/components/crd/bases/kueue.x-k8s.io_%s.yaml" % plural,
             ("%s.kueue.x-k8s.io" % plural,))
      for plural in ("admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters",
                     "multikueueconfigs", "provisioningrequestconfigs", "resourceflavors", "topologies",
                     "workloadpriorityclasses", "workloads")),
    # OpenShift's SecurityContextConstraints.
    Source("github.com/openshift/api",
           "security/v1/zz_generated.crd-manifests/0000_03_config-operator_01_securitycontextconstraints.crd.yaml",
           ("securitycontextconstraints.security.openshift.io",)),
)


# Kinds OpenShift serves from its own API server (aggregated APIs, no CRD
# files): generated from the OpenAPI definitions openshift/api publishes
# (openapi_crds.py says how).
OPENAPI_SOURCES = (
    ("github.com/openshift/api", "openapi/openapi.json", (
        openapi_crds.Kind("com.github.openshift.api.build.v1.BuildConfig", "build.openshift.io", "v1",
                          "BuildConfig", "buildconfigs", ("bc",), True),
        openapi_crds.Kind("com.github.openshift.api.build.v1.Build", "build.openshift.io", "v1",
                          "Build", "builds", (), True),
        openapi_crds.Kind("com.github.openshift.api.image.v1.ImageStream", "image.openshift.io", "v1",
                          "ImageStream", "imagestreams", ("is",), True),
    )),
)


class FetchError(RuntimeError):
    pass


def pinned_versions() -> dict:
    """module path -> version, from go/crds/go.mod's require block."""
    versions, in_block = {}, False
    for line in (GO_MODULE_DIR / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:2] == ["require", "("]:
            in_block = True
        elif in_block and words[:1] == [")"]:
            in_block = False
        elif in_block and len(words) >= 2:
            versions[words[0]] = words[1]
        elif words[:1] == ["require"] and len(words) >= 3:
            versions[words[1]] = words[2]
    return versions


def cache_file() -> Path:
    """The cached documents of this pinned set: named by a hash of go.mod,
    go.sum and SOURCES, so a change of any of them fetches again."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((GO_MODULE_DIR / name).read_bytes())
    digest.update(repr((SOURCES, OPENAPI_SOURCES)).encode())
    digest.update((HERE / "openapi_crds.py").read_bytes())
    return CACHE / ("%s.json" % digest.hexdigest()[:16])


def module_dir(module: str, version: str) -> Path:
    """The module's extracted files in Go's module cache, downloaded (and
    checked against go.sum) if they are not there yet."""
    env = dict(os.environ, GOFLAGS="-mod=readonly")
    try:
        proc = subprocess.run(["go", "mod", "download", "-json", "%s@%s" % (module, version)], cwd=GO_MODULE_DIR,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    except FileNotFoundError:
        raise FetchError("the operators' CRDs are taken from their Go modules the first time, and no `go` is on "
                         "PATH; fix: install Go 1.24 or newer (the local cluster's binaries need it too)") from None
    info = {}
    if proc.stdout.strip():
        info = json.loads(proc.stdout)
    if proc.returncode != 0 or info.get("Error") or not info.get("Dir"):
        raise FetchError("go mod download %s@%s failed: %s" % (
            module, version, (info.get("Error") or proc.stderr).strip()[-800:]))
    return Path(info["Dir"])


def fetch() -> list:
    """Every CRD of SOURCES, read from its module: [{module, version, path,
    crd}]; fails naming the CRD a file does not hold."""
    versions = pinned_versions()
    dirs, taken = {}, []

    def module(path):
        if path not in versions:
            raise FetchError("%s is not required in %s" % (path, GO_MODULE_DIR / "go.mod"))
        if path not in dirs:
            dirs[path] = module_dir(path, versions[path])
        return dirs[path], versions[path]

    for source in SOURCES:
        directory, version = module(source.module)
        documents = [d for d in yaml.safe_load_all((directory / source.path).read_text()) if d]
        by_name = {d["metadata"]["name"]: d for d in documents if d.get("kind") == "CustomResourceDefinition"}
        for name in source.names:
            if name not in by_name:
                raise FetchError("%s@%s/%s holds no CRD %s (it holds: %s)" % (
                    source.module, version, source.path, name, ", ".join(sorted(by_name)) or "none"))
            taken.append({"module": source.module, "version": version, "path": source.path, "crd": by_name[name]})
    for path, document_path, kinds in OPENAPI_SOURCES:
        directory, version = module(path)
        document = json.loads((directory / document_path).read_text())
        for kind in kinds:
            try:
                generated = openapi_crds.crd(document, kind)
            except openapi_crds.SchemaError as err:
                raise FetchError("%s@%s/%s: %s" % (path, version, document_path, err)) from None
            taken.append({"module": path, "version": version, "path": document_path, "generated": True,
                          "crd": generated})
    return taken


def load() -> list:
    """The CRDs, from the cache, fetched into it first when missing."""
    path = cache_file()
    if not path.exists():
        entries = fetch()
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp%d" % os.getpid())
        tmp.write_text(json.dumps(entries))
        tmp.replace(path)
        for stale in CACHE.glob("*.json"):
            if stale != path:
                stale.unlink()  # an earlier pinned set's
    return json.loads(path.read_text())


def main(argv: list) -> int:
    if argv == ["list"]:
        for entry in load():
            print("%-50s %s@%s %s" % (entry["crd"]["metadata"]["name"], entry["module"], entry["version"],
                                      entry["path"]))
        return 0
    if argv == ["path"]:
        load()
        print(cache_file())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except FetchError as err:
        print("upstream_crds: %s" % err, file=sys.stderr)
        sys.exit(1)
