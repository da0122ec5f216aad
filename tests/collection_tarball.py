"""The collection as its users install it: the tarball `ansible-galaxy
collection build` makes, installed offline into an empty collections path
beside its dependencies from the pinned `ansible` wheel (.work/collections,
as scripts/setup.sh extracts them). Shared by the unit test of the tarball
(tests/unit/test_collection_build.py) and the integration test that runs
deploy.yml --check of the installed copy against the local cluster."""

import configparser
import glob
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.dirname(sys.executable)
DEPENDENCIES = os.path.join(REPO, ".work", "collections", "ansible_collections")


def run(*cmd, **kwargs):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False, **kwargs)


def install_tarball(directory):
    """Builds the tarball into ``directory`` and installs it, offline, into
    ``directory``/collections. Returns {"tarball", "directory", "root" (the
    installed copy), "config" (an ansible.cfg of the repository's settings
    whose collections are the installed copy and the wheel's dependency
    collections only), "env" (the environment that uses it)}."""
    directory = str(directory)
    built = run(os.path.join(BIN, "ansible-galaxy"), "collection", "build", REPO, "--output-path", directory)
    assert built.returncode == 0, built.stdout
    tarball = os.path.join(directory, "mlinfra-multinode-0.1.0.tar.gz")
    installed = os.path.join(directory, "collections")
    # The dependencies as the wheel holds them, without this checkout's link.
    dependencies = os.path.join(directory, "dependencies", "ansible_collections")
    for path in glob.glob(os.path.join(DEPENDENCIES, "*", "*")):
        namespace, name = path.split(os.sep)[-2:]
        if namespace != "mlinfra":
            os.makedirs(os.path.join(dependencies, namespace), exist_ok=True)
            os.symlink(path, os.path.join(dependencies, namespace, name))
    # The repository's settings (its callbacks: the verdict block a user
    # reads last), but only the installed copy as mlinfra.multinode.
    settings = configparser.ConfigParser(interpolation=None)
    settings.read(os.path.join(REPO, "ansible.cfg"))
    settings["defaults"]["collections_path"] = os.pathsep.join([installed, os.path.dirname(dependencies)])
    settings["defaults"].pop("roles_path", None)
    config = os.path.join(directory, "ansible.cfg")
    with open(config, "w") as handle:
        settings.write(handle)
    env = dict(os.environ, ANSIBLE_CONFIG=config)
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    inst = run(os.path.join(BIN, "ansible-galaxy"), "collection", "install", tarball, "-p", installed, "--offline",
               "--no-deps", env=env, cwd=directory)
    assert inst.returncode == 0 and "installed successfully" in inst.stdout, inst.stdout
    return {"directory": directory, "tarball": tarball, "config": config, "env": env,
            "root": os.path.join(installed, "ansible_collections", "mlinfra", "multinode")}
