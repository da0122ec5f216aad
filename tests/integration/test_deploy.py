"""deploy.yml, scale.yml and teardown.yml run by ansible-playbook against the
local cluster (real API server, scheduler and controllers; kwok kubelets)."""

import time
import uuid

import pytest
from ansible_cli import run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

APP = "h-kim"
GPU_NODES = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr", "moc-r4pcc04u12-nairr",
             "moc-r4pcc04u16-nairr", "moc-r4pcc04u25-nairr", "moc-r4pcc04u36-nairr"]


@pytest.fixture
def deploy_ns(api_client):
    """A namespace name for one test; whatever the test deployed there is
    torn down (claims too) afterwards."""
    name = "dep-%s" % uuid.uuid4().hex[:6]
    yield name
    if not namespace_exists(api_client, name):
        return
    run_playbook("teardown.yml", "local", {"cluster_namespace": name, "purge_workspaces": True})
    core = client.CoreV1Api(api_client)
    try:
        core.delete_namespace(name)
    except client.ApiException as err:
        assert err.status == 404


def pods(api_client, namespace):
    items = client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/name=%s" % APP).items
    return sorted((p for p in items if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)


def claims(api_client, namespace):
    items = client.CoreV1Api(api_client).list_namespaced_persistent_volume_claim(namespace).items
    return dict((c.metadata.name, (c.metadata.uid, c.spec.volume_name)) for c in items)


def namespace_exists(api_client, namespace):
    try:
        client.CoreV1Api(api_client).read_namespace(namespace)
        return True
    except client.ApiException as err:
        assert err.status == 404
        return False


def wait_gone(api_client, namespace, timeout=60):
    deadline = time.monotonic() + timeout
    while pods(api_client, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    return pods(api_client, namespace)


def test_deploy_from_nothing_then_nothing_changes(api_client, deploy_ns):
    first = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns})
    assert not first.failed, first.failure_messages() or first.stderr
    assert first.changed > 0
    running = pods(api_client, deploy_ns)
    assert [p.metadata.name for p in running] == [APP + "-0", APP + "-1"]
    nodes = [p.spec.node_name for p in running]
    assert set(nodes) <= set(GPU_NODES) and len(set(nodes)) == 2
    for pod in running:
        assert pod.status.phase == "Running"
        trainer = pod.spec.containers[0]
        assert trainer.resources.limits["nvidia.com/gpu"] == "4"
        assert trainer.resources.limits["openshift.io/eno5np0rdma"] == "1"
        assert "IPC_LOCK" not in str(trainer.security_context.capabilities) or trainer.security_context.privileged
        assert '"interface": "net4"' in pod.metadata.annotations["k8s.v1.cni.cncf.io/networks"]
        assert pod.spec.init_containers[0].name == "autodetect"
    sts = client.AppsV1Api(api_client).read_namespaced_stateful_set(APP, deploy_ns)
    assert sts.spec.pod_management_policy == "Parallel"
    assert sts.spec.persistent_volume_claim_retention_policy.when_scaled == "Retain"
    assert sts.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
    headless = client.CoreV1Api(api_client).read_namespaced_service(APP + "-headless", deploy_ns)
    assert headless.spec.cluster_ip == "None" and headless.spec.publish_not_ready_addresses is True

    second = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns})
    assert not second.failed, second.failure_messages()
    assert second.changed == 0


def test_check_mode_on_a_fresh_namespace_creates_nothing(api_client, deploy_ns):
    run = run_playbook("deploy.yml", "local", {"cluster_namespace": deploy_ns}, check=True)
    assert not run.failed, run.failure_messages() or run.stderr
    assert run.changed > 0  # it says what it would do ...
    assert not namespace_exists(api_client, deploy_ns)  # ... and does none of it


def test_scale_up_to_zero_and_back_keeps_the_workspaces(api_client, deploy_ns):
    ns = {"cluster_namespace": deploy_ns}
    assert not run_playbook("deploy.yml", "local", ns).failed
    before = claims(api_client, deploy_ns)

    six = run_playbook("scale.yml", "local", dict(ns, replicas=6))
    assert not six.failed, six.failure_messages()
    running = pods(api_client, deploy_ns)
    assert len(running) == 6 and sorted(p.spec.node_name for p in running) == sorted(GPU_NODES)
    after_six = claims(api_client, deploy_ns)
    assert len(after_six) == 6
    assert all(after_six[name] == value for name, value in before.items())

    zero = run_playbook("scale.yml", "local", dict(ns, replicas=0))
    assert not zero.failed, zero.failure_messages()
    assert wait_gone(api_client, deploy_ns) == []
    assert claims(api_client, deploy_ns) == after_six  # dormant: every workspace kept

    two = run_playbook("deploy.yml", "local", dict(ns, replicas=2))
    assert not two.failed, two.failure_messages()
    assert len(pods(api_client, deploy_ns)) == 2
    assert claims(api_client, deploy_ns) == after_six  # the same claims, the same volumes


def test_teardown_keeps_the_workspaces_unless_purged(api_client, deploy_ns):
    ns = {"cluster_namespace": deploy_ns}
    assert not run_playbook("deploy.yml", "local", ns).failed
    kept = claims(api_client, deploy_ns)
    down = run_playbook("teardown.yml", "local", ns)
    assert not down.failed, down.failure_messages()
    assert wait_gone(api_client, deploy_ns) == []
    apps = client.AppsV1Api(api_client)
    assert apps.list_namespaced_stateful_set(deploy_ns).items == []
    assert claims(api_client, deploy_ns) == kept
    purge = run_playbook("teardown.yml", "local", dict(ns, purge_workspaces=True))
    assert not purge.failed, purge.failure_messages()
    assert claims(api_client, deploy_ns) == {}


@pytest.mark.parametrize("extra,words", [
    ({"replicas": -1}, "replicas must be a whole number from 0 to 6"),
    ({"replicas": "six"}, "replicas"),
    ({"replicas": 7}, "replicas=7 but only 6 cluster_gpu_nodes are named"),
    ({"cluster_network_mode": "infiniband"}, "cluster_network_mode"),
    ({"cluster_gpu_nodes": ["moc-r4pcc04u09-nairr", "no-such-node"]}, "no-such-node"),
    ({"cluster_gpus_per_node": 8}, "nvidia.com/gpu (wants 8, has 4)"),
    ({"cluster_storage_size": "lots"}, "cluster_storage_size must be a Kubernetes quantity"),
])
def test_bad_input_fails_before_anything_is_created(api_client, deploy_ns, extra, words):
    run = run_playbook("deploy.yml", "local", dict(extra, cluster_namespace=deploy_ns))
    assert run.failed
    messages = " ".join(run.failure_messages())
    assert words in messages, messages
    assert not namespace_exists(api_client, deploy_ns)
