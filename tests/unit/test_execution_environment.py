"""The execution environment's build context (execution-environment.yml,
made by scripts/ee.sh with ansible-builder, offline): it holds every
collection the repository uses and every Python package they import, and
its collections install from the context alone, as the image build's galaxy
stage installs them. Building the image needs a container engine, which this
machine lacks: the Containerfile is checked, not run."""

import ast
import glob
import os
import re
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

BIN = os.path.dirname(sys.executable)
FQCN = re.compile(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")
# Words that look like FQCNs in the repository's YAML but are not collections.
NOT_COLLECTIONS = {("ansible", "builtin"), ("mlinfra", "io")}


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    path = tmp_path_factory.mktemp("ee") / "context"
    done = subprocess.run(["bash", os.path.join(REPO, "scripts", "ee.sh"), str(path)], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    return path


@pytest.fixture(scope="module")
def installed(context, tmp_path_factory):
    """The context's collections installed from the context alone."""
    target = tmp_path_factory.mktemp("ee-collections")
    done = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline",
                           "-r", "requirements.yml", "-p", str(target)], cwd=str(context / "_build"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    return {"%s.%s" % (os.path.basename(os.path.dirname(path)), os.path.basename(path))
            for path in glob.glob(str(target / "ansible_collections" / "*" / "*"))}


def used_collections():
    """Collections named by FQCN in the roles, playbooks, plugins and
    ansible.cfg, plus galaxy.yml's dependencies."""
    found = set()
    paths = [os.path.join(REPO, "ansible.cfg")]
    for part in ("roles", "playbooks", "plugins"):
        for root, _dirs, names in os.walk(os.path.join(REPO, part)):
            paths += [os.path.join(root, name) for name in names if name.endswith((".yml", ".py", ".j2"))]
    for path in paths:
        with open(path) as handle:
            for namespace, name in FQCN.findall(handle.read()):
                if (namespace, name) not in NOT_COLLECTIONS and os.path.isdir(
                        os.path.join(REPO, ".work", "collections", "ansible_collections", namespace, name)):
                    found.add("%s.%s" % (namespace, name))
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        found.update(yaml.safe_load(handle).get("dependencies") or {})
    return found


# The benchmark's torch half, which only `mlinfra nccl-bench` runs, under
# torchrun in the training image (files/Containerfile installs torch); no
# controller plugin imports it.
IN_POD_ONLY = {os.path.join(REPO, "plugins", "module_utils", "fabric", "bench_collectives.py")}


def plugin_imports():
    """Top-level modules the collection's plugins import that neither the
    standard library nor Ansible provides."""
    found = set()
    for path in glob.glob(os.path.join(REPO, "plugins", "**", "*.py"), recursive=True):
        if path in IN_POD_ONLY:
            continue
        with open(path) as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ansible", "ansible_collections", "__future__"):
                    found.add(top)
    return found


def requirement_names(path):
    names = set()
    with open(path) as handle:
        for line in handle:
            line = line.split("#")[0].strip()
            if line:
                names.add(re.split(r"[<>=!~\[; ]", line)[0].lower().replace("_", "-"))
    return names


def test_the_context_is_complete(context):
    assert (context / "Containerfile").is_file()
    for name in ("requirements.yml", "requirements.txt", "bindep.txt"):
        assert (context / "_build" / name).is_file(), name
    containerfile = (context / "Containerfile").read_text()
    # The galaxy stage installs from the copied context, and the pins reach pip.
    assert "ansible-galaxy collection install" in containerfile and "COPY _build /build" in containerfile
    assert "ansible-core==2.21.5" in containerfile
    with open(os.path.join(REPO, "execution-environment.yml")) as handle:
        named = [entry["name"] for entry in yaml.safe_load(handle)["dependencies"]["galaxy"]["collections"]]
    assert sorted(os.path.basename(path) for path in glob.glob(str(context / "_build" / "collections" / "*"))) == \
        sorted(os.path.basename(name) for name in named)


def test_every_collection_the_repository_uses_installs_from_the_context(installed):
    used = used_collections()
    # The collection itself, and at least what its roles are built on.
    assert {"kubernetes.core", "community.okd", "awx.awx", "ansible.posix"} <= used
    assert used | {"mlinfra.multinode"} <= installed, sorted(used - installed)


def test_every_python_package_the_collections_import_is_in_the_context(context):
    listed = requirement_names(str(context / "_build" / "requirements.txt"))
    # The plugins' own imports (PyPI names differ from module names only here).
    pypi_name = {"yaml": "pyyaml"}
    for module in plugin_imports():
        assert pypi_name.get(module, module) in listed, module
    # What the Kubernetes collections declare for their modules.
    collections = os.path.join(REPO, ".work", "collections", "ansible_collections")
    for name in ("kubernetes/core", "community/okd"):
        wanted = requirement_names(os.path.join(collections, name, "requirements.txt"))
        assert wanted <= listed, (name, sorted(wanted - listed))


def _normal(name):
    """A package's name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_pins_are_the_ones_the_tests_run_with():
    with open(os.path.join(REPO, "requirements", "lock.txt")) as handle:
        # "name==version \" lines, each followed by its hashes.
        locked = {_normal(line.split("==")[0]): line.split("==")[1].rstrip(" \\\n") for line in handle
                  if "==" in line and not line.startswith((" ", "#"))}
    with open(os.path.join(REPO, "requirements", "ee-python.txt")) as handle:
        for line in handle:
            line = line.split("#")[0].strip()
            if line:
                name, version = line.split("==")
                assert locked[_normal(name)] == version, line


def test_a_version_the_tests_do_not_run_with_is_refused(tmp_path):
    """scripts/ee.sh packs what .work/collections holds; a definition naming
    another version fails before anything is built."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("scripts", "requirements"):
        os.symlink(os.path.join(REPO, name), str(copy / name))
    for name in ("galaxy.yml", "bindep.txt"):
        os.symlink(os.path.join(REPO, name), str(copy / name))
    (copy / ".work").mkdir()
    os.symlink(os.path.join(REPO, ".work", "collections"), str(copy / ".work" / "collections"))
    os.symlink(os.path.join(REPO, ".venv"), str(copy / ".venv"))
    with open(os.path.join(REPO, "execution-environment.yml")) as handle:
        text = handle.read()
    (copy / "execution-environment.yml").write_text(text.replace("kubernetes-core-6.6.0", "kubernetes-core-9.9.9"))
    done = subprocess.run(["bash", str(copy / "scripts" / "ee.sh"), str(tmp_path / "context")], cwd=str(copy),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                          check=False)
    assert done.returncode != 0
    assert "names kubernetes.core 9.9.9, but the tests run with 6.6.0" in done.stdout
    assert not (tmp_path / "context").exists()
