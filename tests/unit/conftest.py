"""Shared helpers of the unit tests: the recorded node snapshots, and the
workload environment's python (torch) for the tests that run torchrun."""

import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOTS = os.path.join(REPO, "tests", "fixtures", "nodes")
WORKLOAD_PYTHON = os.path.join(REPO, ".work", "venv-workload", "bin", "python")


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
