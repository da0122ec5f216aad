"""deploy.yml losing the cluster's API half-way, on the local cluster: the
API server stops answering, or the kubeconfig is deleted, once the run has
made the namespace. The run ends with one line (the api_faults callback) that
names the task, what happened and the next step; running the same playbook
again, as that line says, finishes the deployment.

The API server is not stopped: the test's cluster serves the other tests of
this worker. The run gets a kubeconfig of its own, which the test points at a
closed port (to the client, exactly an API server that is gone: connection
refused) or deletes."""

import os
import time
from pathlib import Path
import uuid

import pytest
import yaml
from ansible_cli import playbook_in_background, remove_namespace, run_playbook
from kubernetes import client

pytestmark = pytest.mark.integration

GPU_NODES = ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]


@pytest.fixture
def settings(api_client, localcluster, tmp_path):
    namespace = "fault-%s" % uuid.uuid4().hex[:6]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(localcluster.KUBECONFIG.read_text())
    yield {"cluster_namespace": namespace, "cluster_gpu_nodes": GPU_NODES, "cluster_kubeconfig": str(kubeconfig)}
    remove_namespace(api_client, namespace)


def when_the_namespace_exists(api_client, namespace, timeout=120):
    core = client.CoreV1Api(api_client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(ns.metadata.name == namespace for ns in core.list_namespace().items):
            return
        time.sleep(0.1)
    pytest.fail("deploy.yml made no namespace %s in %ss" % (namespace, timeout))


def point_at_a_closed_port(kubeconfig_path):
    config = yaml.safe_load(kubeconfig_path.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    kubeconfig_path.write_text(yaml.safe_dump(config))


def api_fault_lines(run):
    return [line for line in run.stdout.splitlines() if line.startswith("API FAULT ")]


def test_an_api_server_gone_mid_deploy_is_named_and_a_second_run_finishes(api_client, settings):
    kubeconfig = settings["cluster_kubeconfig"]
    working = open(kubeconfig).read()
    with playbook_in_background("deploy.yml", "local", settings) as finish:
        when_the_namespace_exists(api_client, settings["cluster_namespace"])
        point_at_a_closed_port(Path(kubeconfig))
        run = finish()
    assert run.failed
    # The last line the user reads, after the recap.
    assert run.stdout.rstrip().splitlines()[-1] == api_fault_lines(run)[-1]
    [line] = api_fault_lines(run)
    assert line.startswith("API FAULT localhost: lost the cluster's API during '")
    assert "the API server stopped answering (HTTPSConnectionPool(host='127.0.0.1', port=1)" in line
    assert "Next: check that it answers again" in line and "then run the same playbook again" in line

    # The API server answers again: the same playbook finishes the deployment.
    open(kubeconfig, "w").write(working)
    again = run_playbook("deploy.yml", "local", settings)
    assert not again.failed, again.failure_messages()
    assert api_fault_lines(again) == []
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        settings["cluster_namespace"], label_selector="app.kubernetes.io/name=h-kim").items
    assert sorted(pod.spec.node_name for pod in pods) == sorted(GPU_NODES)


def test_a_kubeconfig_deleted_mid_deploy_is_named(api_client, settings):
    with playbook_in_background("deploy.yml", "local", settings) as finish:
        when_the_namespace_exists(api_client, settings["cluster_namespace"])
        os.remove(settings["cluster_kubeconfig"])
        run = finish()
    assert run.failed
    [line] = api_fault_lines(run)
    assert "the kubeconfig (cluster_kubeconfig, else $KUBECONFIG) was removed or emptied during the run" in line
    assert "Next: bring the cluster's kubeconfig back" in line
