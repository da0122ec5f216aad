"""The collection as its users get it: the tarball ansible-galaxy builds
holds what they run and read (not the tests, the local cluster's tooling or
the set-up), and installed alone, offline, into an empty collections path
beside its dependencies from the pinned `ansible` wheel (.work/collections,
as scripts/setup.sh extracts them), it works: ansible-doc of every module,
filter, callback and role, a module run, and render.yml from its own
template inventory (tests/collection_tarball.py installs it).
tests/integration/test_deploy.py runs deploy.yml --check of the installed
copy against the local cluster."""

import json
import os
import subprocess
import sys
import tarfile

import pytest
from collection_tarball import BIN, install_tarball, run


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    return install_tarball(tmp_path_factory.mktemp("tarball"))


def test_the_tarball_holds_what_users_run_and_read(installed):
    with tarfile.open(installed["tarball"]) as archive:
        names = archive.getnames()
    for needed in ("LICENSE", "README.md", "meta/runtime.yml", "plugins/modules/rdma_node_check.py",
                   "roles/statefulset/tasks/main.yml", "playbooks/site.yml", "files/Containerfile",
                   "inventories/template/hosts.yml", "inventories/moc/hosts.yml", "docs/inventory.md"):
        assert needed in names, needed
    tops = set(name.split("/", 1)[0] for name in names)
    assert not tops & {"tests", "tools", "scripts", "requirements", "extensions", "Makefile", "ansible.cfg",
                       ".work", ".venv", ".nccl-tests", ".whl"}, tops
    assert not [name for name in names if name.startswith(("inventories/local", "docs/measurements",
                                                           "changelogs/fragments")) or "__pycache__" in name]
    with tarfile.open(installed["tarball"]) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))["collection_info"]
    assert manifest["license"] == ["Apache-2.0"] and manifest["dependencies"] == {"kubernetes.core": ">=5.0.0"}
    assert manifest["repository"] is None  # none is published: left out rather than made up


def documented(directory):
    """The plugins a directory documents: each .py file with its own
    DOCUMENTATION, and each .yml beside a file that holds several filters."""
    found = set()
    for name in os.listdir(directory):
        stem, extension = os.path.splitext(name)
        if extension == ".yml":
            found.add(stem)
        elif extension == ".py" and not stem.startswith("_"):
            with open(os.path.join(directory, name)) as handle:
                if "\nDOCUMENTATION = " in handle.read():
                    found.add(stem)
    return sorted(found)


def ansible_doc(installed, *args):
    """ansible-doc --json of the installed copy; its document (warnings go
    to standard error)."""
    proc = subprocess.run([os.path.join(BIN, "ansible-doc"), "--json"] + list(args), env=installed["env"],
                          cwd=str(installed["directory"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_ansible_doc_documents_every_plugin_and_role_of_the_installed_copy(installed):
    root = installed["root"]
    for kind, directory in (("module", "modules"), ("filter", "filter"), ("callback", "callback")):
        names = sorted(name.split(".")[-1] for name in ansible_doc(installed, "-t", kind, "-l", "mlinfra.multinode"))
        assert names == documented(os.path.join(root, "plugins", directory)), kind
        shown = ansible_doc(installed, "-t", kind, *["mlinfra.multinode." + name for name in names])
        assert sorted(name.split(".")[-1] for name in shown) == names
        assert all(entry["doc"]["short_description"] for entry in shown.values())
    roles = sorted(os.listdir(os.path.join(root, "roles")))
    shown = ansible_doc(installed, "-t", "role", *["mlinfra.multinode." + role for role in roles])
    assert sorted(shown) == ["mlinfra.multinode." + role for role in roles]


def test_the_installed_copy_runs_a_module_and_renders_its_template_inventory(installed):
    env, root, directory = installed["env"], installed["root"], installed["directory"]
    module = run(os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-m", "mlinfra.multinode.rdma_node_check",
                 "-a", "mode=tcp", "-e", "ansible_python_interpreter=%s" % sys.executable, env=env, cwd=str(directory))
    # The repository's settings: results as YAML.
    assert module.returncode == 0 and 'changed: false' in module.stdout, module.stdout
    rendered = os.path.join(str(directory), "rendered")
    render = run(os.path.join(BIN, "ansible-playbook"), "mlinfra.multinode.render",
                 "-i", os.path.join(root, "inventories", "template"), "-e", "render_dir=%s" % rendered,
                 "-e", "ansible_python_interpreter=%s" % sys.executable, env=env, cwd=str(directory))
    assert render.returncode == 0, render.stdout[-3000:]
    assert sorted(os.listdir(rendered)) == ["autodetect.yaml", "image.yaml", "sriov.yaml", "statefulset.yaml",
                                            "train.yaml"]
