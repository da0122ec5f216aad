"""Fixtures for the integration tests: one local Kubernetes cluster per session.

The cluster is tools/localcluster (real kube-apiserver, controller-manager,
scheduler and etcd; kwok as the kubelet of the inventory's fake nodes). The
tests run their own, never the user's: its state lives in
.work/localcluster-test (.work/localcluster-test-gwN for each pytest-xdist
worker), its components take free ports of their own, and the playbooks the
tests run find it through MLINFRA_LOCALCLUSTER_DIR, which is set here for
every process the tests start (inventories/local reads it). So a cluster the
user has running in .work/localcluster, with whatever was deployed on it, is
neither seen nor touched, nothing the tests create can clash with it, and
parallel workers do not share nodes, labels or cluster-wide objects.
The test cluster is created afresh at the start of the session (one an
interrupted run left is deleted first; creating takes seconds) and deleted
at its end. On a fresh clone the first session builds the binaries
(minutes; build.sh prints its progress).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client, config, dynamic

ROOT = Path(__file__).resolve().parents[2]
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
# Set before localcluster.py is loaded (it reads it once) and inherited by
# every ansible-playbook and kubectl the tests start.
os.environ["MLINFRA_LOCALCLUSTER_DIR"] = str(ROOT / ".work" / ("localcluster-test" + ("-" + WORKER if WORKER else "")))
# Held while a worker creates its cluster: kwokctl picks ports that are
# free at that moment, and two creations at once could pick the same.
CREATION_LOCK = ROOT / ".work" / "localcluster-test.lock"
# Whether this worker's cluster is up (its fixture ran).
STARTED = []


def _load_localcluster():
    spec = importlib.util.spec_from_file_location("mlinfra_localcluster", ROOT / "tools" / "localcluster" / "localcluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def localcluster(request):
    """The tools/localcluster module, with the tests' own cluster up for the whole session."""
    lc = _load_localcluster()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    try:
        # Progress (and a first build) is shown as it happens, not captured.
        with capture.global_and_fixture_disabled():
            if lc.state() != "absent":
                print(f"\n[integration] deleting the test cluster an earlier run left ({lc.WORK})")
                lc.down(quiet=True)
            print(f"\n[integration] starting the test cluster ({lc.WORK})")
            CREATION_LOCK.parent.mkdir(parents=True, exist_ok=True)
            with open(CREATION_LOCK, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                lc.up()
        STARTED.append(lc.WORK)
        yield lc
    finally:
        with capture.global_and_fixture_disabled():
            print("\n[integration] deleting the test cluster")
            lc.down()


@pytest.fixture(scope="session")
def api_client(localcluster):
    """A kubernetes.client.ApiClient for the local cluster (its own kubeconfig)."""
    return config.new_client_from_config(config_file=str(localcluster.KUBECONFIG))


# What verify-rdma.yml -e verify_label_nodes=true leaves on the nodes: the
# verdicts by which a deployment keeps its pods off failed nodes.
VERDICT_LABELS = ("mlinfra.io/rdma-verified", "mlinfra.io/rdma-verified-date")


@pytest.fixture(scope="module", autouse=True)
def nodes_without_verdicts(request):
    """The nodes' verdicts are removed after each test file that used the
    cluster: a node that one file's verify-rdma.yml failed would otherwise
    take no pod in the next file on the same worker."""
    yield
    if not STARTED:
        return
    core = client.CoreV1Api(request.getfixturevalue("api_client"))
    for node in core.list_node().items:
        if set(VERDICT_LABELS) & set(node.metadata.labels or {}):
            core.patch_node(node.metadata.name, {"metadata": {"labels": dict.fromkeys(VERDICT_LABELS)}})


@pytest.fixture(scope="module")
def namespace(api_client):
    """A fresh namespace per test module, deleted afterwards."""
    core = client.CoreV1Api(api_client)
    name = f"it-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def dyn(api_client):
    return dynamic.DynamicClient(api_client)


@pytest.fixture
def real_namespaces(api_client):
    """Creates the namespaces a test asks for (a namespaced dry run needs
    its namespace); deletes those it created."""
    core = client.CoreV1Api(api_client)
    created, ready = [], set()

    def ensure(name):
        deadline = time.monotonic() + 120
        while name not in ready:
            try:
                namespace = core.read_namespace(name)
            except client.ApiException as err:
                assert err.status == 404
                core.create_namespace({"metadata": {"name": name}})
                created.append(name)
                ready.add(name)
                continue
            if namespace.metadata.deletion_timestamp is None:
                ready.add(name)
                continue
            # Deleted by an earlier test (barcelona and moc share the SR-IOV
            # operator's namespace) and not gone yet: a namespace that is
            # terminating takes no objects, not even in a dry run.
            assert time.monotonic() < deadline, "namespace %s is still terminating" % name
            time.sleep(1)

    yield ensure
    for name in created:
        core.delete_namespace(name)


@pytest.fixture(scope="module")
def operator_controllers(localcluster, request):
    """The operators a test module names in OPERATORS, built if needed (the
    progress shown) and started on this worker's cluster for that module
    only: the other modules meet the cluster as a user without them does."""
    names = tuple(localcluster.operator_catalog.known(list(request.module.OPERATORS)))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    runner = localcluster.operator_runner()
    try:
        with capture.global_and_fixture_disabled():
            localcluster.ensure_binaries(names)
            for name in names:
                runner.start(name)
        localcluster.verify_loopback_only()
        yield runner
    finally:
        for name in names:
            runner.stop(name)
