"""api_fault against real results of kubernetes.core modules that lost the
cluster's API (tests/fixtures/api_faults, recorded on the local cluster):
each kind gets one message naming the task, what happened and the next step;
a refusal by the API, a wait that ran out and other modules' failures are
left alone."""

import json
import os

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster.api_fault import classify

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "api_faults")


def recorded(name):
    with open(os.path.join(FIXTURES, name + ".json")) as handle:
        return json.load(handle)


@pytest.mark.parametrize("name, kind, happened, next_step", [
    ("unreachable", "unreachable", "the API server stopped answering", "check that it answers again"),
    ("kubeconfig_emptied", "kubeconfig_gone", "was removed or emptied during the run", "bring the cluster's kubeconfig back"),
    ("kubeconfig_deleted", "kubeconfig_gone", "was removed or emptied during the run", "bring the cluster's kubeconfig back"),
    ("unauthorized", "unauthorized", "stopped accepting the run's credentials", "log in again"),
])
def test_a_lost_api_is_named_with_the_task_and_the_next_step(name, kind, happened, next_step):
    fault = classify(recorded(name), "Create the StatefulSet", "kubernetes.core.k8s")
    assert fault["kind"] == kind
    message = fault["message"]
    assert message.startswith("lost the cluster's API during 'Create the StatefulSet': ")
    assert happened in message and next_step in message
    assert message.endswith("then run the same playbook again; every step is idempotent and carries on from what is there.")
    # The client's words are kept, on one line, without ansible-core's prefixes.
    assert "\n" not in message and "Task failed:" not in message and len(message) < 800


def test_the_address_the_client_could_not_reach_is_kept():
    message = classify(recorded("unreachable"), "t", "kubernetes.core.k8s_info")["message"]
    assert "HTTPSConnectionPool(host='127.0.0.1', port=1): Max retries exceeded" in message


@pytest.mark.parametrize("name", ["refused_422", "wait_timed_out"])
def test_failures_that_say_what_they_mean_are_left_alone(name):
    assert classify(recorded(name), "t", "kubernetes.core.k8s") is None


def test_only_the_cluster_modules_can_lose_the_api():
    # A missing file of another module is not a kubeconfig.
    missing = {"failed": True, "msg": "Could not find or access 'x.j2' on the Ansible Controller."}
    assert classify(missing, "t", "ansible.builtin.template") is None
    assert classify(recorded("unreachable"), "t", "mlinfra.multinode.pods_exec")["kind"] == "unreachable"
    assert classify(recorded("unreachable"), "t", "community.okd.k8s")["kind"] == "unreachable"


def test_a_failed_item_of_a_loop_is_read():
    looped = {"failed": True, "msg": "One or more items failed",
              "results": [{"failed": False, "msg": ""}, recorded("kubeconfig_emptied")]}
    assert classify(looped, "t", "kubernetes.core.k8s")["kind"] == "kubeconfig_gone"


def test_a_result_without_a_message_is_not_a_fault():
    assert classify({"failed": True}, "t", "kubernetes.core.k8s") is None
