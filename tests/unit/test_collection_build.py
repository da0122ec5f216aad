"""The collection tarball that ansible-galaxy builds installs and works."""

import os
import subprocess
import sys
import tarfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)


def run(*cmd, **kwargs):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False, **kwargs)


def test_built_collection_installs_and_runs(tmp_path):
    built = run(os.path.join(BIN, "ansible-galaxy"), "collection", "build", REPO, "--output-path", str(tmp_path))
    assert built.returncode == 0, built.stdout
    tarball = tmp_path / "mlinfra-multinode-0.1.0.tar.gz"
    with tarfile.open(str(tarball)) as archive:
        names = archive.getnames()
    assert "plugins/modules/rdma_node_check.py" in names and "roles/statefulset/tasks/main.yml" in names
    assert not [n for n in names if n.startswith((".work", ".venv", "tests/fixtures/nodes/"))]

    installed = tmp_path / "collections"
    # Outside this checkout, whose ansible.cfg points at .work/collections
    # (where the checkout itself is linked): only the installed copy counts.
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed), ANSIBLE_CONFIG=str(config))
    inst = run(os.path.join(BIN, "ansible-galaxy"), "collection", "install", str(tarball), "-p", str(installed),
               "--no-deps", env=env, cwd=str(tmp_path))
    assert inst.returncode == 0 and "installed successfully" in inst.stdout, inst.stdout
    doc = run(os.path.join(BIN, "ansible-doc"), "mlinfra.multinode.nccl_env", env=env, cwd=str(tmp_path))
    assert doc.returncode == 0 and str(installed) in doc.stdout, doc.stdout
    module = run(os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-m", "mlinfra.multinode.rdma_node_check",
                 "-a", "mode=tcp", "-e", "ansible_python_interpreter=%s" % sys.executable, env=env, cwd=str(tmp_path))
    assert module.returncode == 0 and '"changed": false' in module.stdout, module.stdout
