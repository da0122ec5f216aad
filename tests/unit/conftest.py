"""Shared helpers of the unit tests: the recorded node snapshots, the
workload environment's python (torch) for the tests that run torchrun, and
the `core_independent` mark."""

import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOTS = os.path.join(REPO, "tests", "fixtures", "nodes")
WORKLOAD_PYTHON = os.path.join(REPO, ".work", "venv-workload", "bin", "python")

# What another ansible-core can change: its Python API, its command-line
# tools, and what runs inside it (the collection's filters and modules, the
# Ansible names of its tasks). A test module whose source names none of
# these exercises only the collection's own Python (module_utils, the
# in-pod programs) and files, which no ansible-core version touches; it is
# marked core_independent, and the oldest-core stage of scripts/test.sh
# leaves it to the main stage. Found by reading the source, so a test that
# starts using ansible-core is run under both versions without a list to
# keep up to date.
ANSIBLE_CORE_WORDS = re.compile(r"\bansible\.|\bimport ansible\b|\bansible_cli\b|\bmodule_call\b|plugins\.(filter|modules)\b"
                                r"|\bansible-[a-z]|\bANSIBLE_")
_CORE_INDEPENDENT = {}


def core_independent(path):
    """Whether the test module at path names nothing of ansible-core."""
    path = str(path)
    if path not in _CORE_INDEPENDENT:
        with open(path) as handle:
            _CORE_INDEPENDENT[path] = ANSIBLE_CORE_WORDS.search(handle.read()) is None
    return _CORE_INDEPENDENT[path]


def pytest_collection_modifyitems(items):
    # A conftest's collection hook sees every item of the session.
    unit_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    for item in items:
        if str(item.path).startswith(unit_dir) and core_independent(item.path):
            item.add_marker(pytest.mark.core_independent)


def snapshot_path(name):
    path = os.path.join(SNAPSHOTS, name)
    assert os.path.isdir(path), "no snapshot %s" % name
    return path


@pytest.fixture
def snapshot():
    """Path of a committed snapshot, read-only use."""
    return snapshot_path


@pytest.fixture
def snapshot_copy(tmp_path):
    """A writable copy of a snapshot, for variations of one file."""
    def make(name):
        target = tmp_path / name
        shutil.copytree(snapshot_path(name), str(target), symlinks=True)
        return target
    return make


@pytest.fixture(scope="session")
def workload_python():
    """The workload environment's python, or a failure saying how to get it:
    a missing environment must not pass as skipped tests."""
    if not os.access(WORKLOAD_PYTHON, os.X_OK):
        pytest.fail("%s does not exist: run `bash scripts/setup.sh` to create .work/venv-workload (torch)"
                    % WORKLOAD_PYTHON)
    probe = subprocess.run([WORKLOAD_PYTHON, "-c", "import torch, torch.distributed; print(torch.__version__)"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           timeout=300, check=False)
    if probe.returncode != 0:
        pytest.fail("%s cannot import torch: run `bash scripts/setup.sh`\n%s"
                    % (WORKLOAD_PYTHON, probe.stdout[-2000:]))
    return WORKLOAD_PYTHON
