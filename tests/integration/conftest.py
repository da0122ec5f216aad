"""Fixtures for the integration tests: one local Kubernetes cluster per session.

The cluster is tools/localcluster (real kube-apiserver, controller-manager,
scheduler and etcd; kwok as the kubelet of the inventory's fake nodes). It is
started once per test session and deleted at its end; a cluster that was
already running from this checkout's .work/localcluster is reused and left
running (someone else started it, so someone else stops it).
On a fresh clone the first session builds the binaries (minutes; build.sh
prints its progress).
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]


def _load_localcluster():
    spec = importlib.util.spec_from_file_location("mlinfra_localcluster", ROOT / "tools" / "localcluster" / "localcluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def localcluster(request):
    """The tools/localcluster module, with its cluster up for the whole session."""
    lc = _load_localcluster()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    reused = lc.is_up()
    try:
        # Progress (and a first build) is shown as it happens, not captured.
        with capture.global_and_fixture_disabled():
            if reused:
                print(f"\n[integration] reusing the running local cluster ({lc.CLUSTER_DIR})")
            else:
                print("\n[integration] starting the local cluster")
            lc.up()
        yield lc
    finally:
        if not reused:
            with capture.global_and_fixture_disabled():
                print("\n[integration] deleting the local cluster")
                lc.down()


@pytest.fixture(scope="session")
def api_client(localcluster):
    """A kubernetes.client.ApiClient for the local cluster (its own kubeconfig)."""
    return config.new_client_from_config(config_file=str(localcluster.KUBECONFIG))


@pytest.fixture(scope="module")
def namespace(api_client):
    """A fresh namespace per test module, deleted afterwards."""
    core = client.CoreV1Api(api_client)
    name = f"it-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
