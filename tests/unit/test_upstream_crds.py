"""tools/localcluster/upstream_crds.py: the operators' CRDs come from their
pinned Go modules, checked by Go against go.sum, and a wrong pin or path
stops the cluster's start naming what is wrong. The modules are downloaded
through the Go module proxy the first time (Go's module cache keeps them)."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("upstream_crds", ROOT / "tools" / "localcluster" / "upstream_crds.py")
upstream_crds = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(upstream_crds)

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain on PATH")


def test_every_source_module_is_pinned_in_go_mod():
    versions = upstream_crds.pinned_versions()
    for source in upstream_crds.SOURCES:
        assert versions.get(source.module, "").startswith("v"), source.module


def test_the_cache_is_named_by_what_was_pinned(monkeypatch):
    before = upstream_crds.cache_file()
    monkeypatch.setattr(upstream_crds, "SOURCES", upstream_crds.SOURCES[:-1])
    assert upstream_crds.cache_file() != before and upstream_crds.cache_file().parent == before.parent


@needs_go
def test_each_crd_is_read_from_its_module_file():
    entries = upstream_crds.fetch()
    names = [entry["crd"]["metadata"]["name"] for entry in entries]
    generated = ["%s.%s" % (kind.plural, kind.group) for source in upstream_crds.OPENAPI_SOURCES for kind in source[2]]
    assert names == [name for source in upstream_crds.SOURCES for name in source.names] + generated
    assert [entry.get("generated", False) for entry in entries] == [False] * (len(names) - len(generated)) + [
        True] * len(generated)
    by_name = dict(zip(names, entries))
    # The SCC as OpenShift's API defines it: priority is required (and may be null).
    scc = by_name["securitycontextconstraints.security.openshift.io"]["crd"]
    schema = scc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "priority" in schema["required"] and schema["properties"]["priority"]["nullable"] is True
    # Volcano's Job, from its release's files: a task's fields as Volcano has them.
    volcano = by_name["jobs.batch.volcano.sh"]
    task = volcano["crd"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "tasks"]["items"]["properties"]
    assert {"name", "replicas", "template", "policies"} <= set(task) and volcano["module"] == "volcano.sh/volcano"
    # Multus's manifest holds RBAC and a DaemonSet too; only the CRD is taken.
    nad = by_name["network-attachment-definitions.k8s.cni.cncf.io"]
    assert nad["module"] == "gopkg.in/k8snetworkplumbingwg/multus-cni.v4" and nad["crd"]["spec"]["group"] == "k8s.cni.cncf.io"


@needs_go
def test_a_file_without_the_named_crd_is_an_error_naming_what_it_holds(monkeypatch):
    wrong = upstream_crds.Source("sigs.k8s.io/jobset", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
                                 ("jobs.jobset.x-k8s.io",))
    monkeypatch.setattr(upstream_crds, "SOURCES", (wrong,))
    monkeypatch.setattr(upstream_crds, "OPENAPI_SOURCES", ())
    with pytest.raises(upstream_crds.FetchError) as err:
        upstream_crds.fetch()
    assert "sigs.k8s.io/jobset@v" in str(err.value)
    assert "holds no CRD jobs.jobset.x-k8s.io (it holds: jobsets.jobset.x-k8s.io)" in str(err.value)


def test_a_module_not_pinned_is_an_error(monkeypatch):
    monkeypatch.setattr(upstream_crds, "SOURCES", (upstream_crds.Source("example.com/nothing", "x.yaml", ("x",)),))
    with pytest.raises(upstream_crds.FetchError, match="example.com/nothing is not required in .*go.mod"):
        upstream_crds.fetch()


def test_without_go_the_error_says_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setattr(upstream_crds, "CACHE", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(upstream_crds.FetchError, match="no `go` is on PATH; fix: install Go"):
        upstream_crds.load()


@needs_go
def test_once_cached_no_go_is_needed(monkeypatch, tmp_path):
    monkeypatch.setattr(upstream_crds, "CACHE", tmp_path)
    # One module's CRD is enough to show the cache at work.
    monkeypatch.setattr(upstream_crds, "SOURCES", upstream_crds.SOURCES[-1:])
    monkeypatch.setattr(upstream_crds, "OPENAPI_SOURCES", ())
    first = upstream_crds.load()
    assert [p.name for p in tmp_path.iterdir()] == [upstream_crds.cache_file().name]
    monkeypatch.setenv("PATH", str(tmp_path))
    assert upstream_crds.load() == first == json.loads(upstream_crds.cache_file().read_text())
