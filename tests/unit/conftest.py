"""Shared helpers of the unit tests: the recorded node snapshots."""

import os
import shutil

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOTS = os.path.join(REPO, "tests", "fixtures", "nodes")


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
