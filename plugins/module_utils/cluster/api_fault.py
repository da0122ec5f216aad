# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What went wrong when a task lost the cluster's API half-way through a run.

Every playbook checks at its start that the API answers (the cluster role),
so a fault there has a clear message. What this module judges is the fault
that comes later, from outside: the API server stops, a network path drops,
`make cluster-down` or a new `oc login` removes or rewrites the kubeconfig,
a token expires. kubernetes.core then fails the task with the client's own
words ("Failed to get client due to HTTPSConnectionPool(...): Max retries
exceeded ... Connection refused", "Failed to load kubeconfig due to Invalid
kube-config file. No configuration found."), which say neither what it means
for the cluster nor what to do. classify() reads a failed task's result and
returns one message with the next step, or None when the failure is not such
a fault (a refusal of the API, a failed check: those say what they mean).

Standard library only; the api_faults callback plugin presents the message.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# Each kind: the patterns that recognise it in the client's message, what
# happened in words, and what to do before running the playbook again.
# Order matters: a missing kubeconfig is found before the connection errors
# its absence can also cause (the client then falls back to localhost:80).
KINDS = (
    (
        "kubeconfig_gone",
        # The first two from the client; the last from kubernetes.core's action
        # plugin, which looks for the kubeconfig before it starts the module.
        re.compile(r"Invalid kube-config|No configuration found|Could not find or access '[^']*' on the Ansible Controller"),
        "the kubeconfig (cluster_kubeconfig, else $KUBECONFIG) was removed or emptied during the run "
        "(a `make cluster-down`, or a login that rewrote it)",
        "bring the cluster's kubeconfig back (oc login; the local cluster: make cluster-up)",
    ),
    (
        "unauthorized",
        # The client's ApiException reads "(401)\nReason: Unauthorized".
        re.compile(r"\(401\)|Reason: Unauthorized"),
        "the API server stopped accepting the run's credentials (a token that expired or was revoked)",
        "log in again (oc login, or your cluster's own login)",
    ),
    (
        "tls",
        re.compile(r"CERTIFICATE_VERIFY_FAILED|SSLError|certificate verify failed", re.I),
        "the API server's certificate stopped matching the kubeconfig's (the server or the kubeconfig was replaced)",
        "refresh the kubeconfig (oc login; the local cluster: make cluster-up)",
    ),
    (
        "unreachable",
        re.compile(
            r"Connection refused|Max retries exceeded|Failed to establish a new connection|Connection reset"
            r"|Connection aborted|RemoteDisconnected|Read timed out|ConnectTimeout|Connection timed out"
            r"|Name or service not known|No route to host"
            r"|Temporary failure in name resolution|Network is unreachable",
        ),
        "the API server stopped answering",
        "check that it answers again (kubectl get --raw /readyz; the local cluster: make cluster-up starts it)",
    ),
)

# Modules that talk to the cluster's API: kubernetes.core's, OpenShift's
# (community.okd) and ours that exec in pods.
CLUSTER_MODULE_PREFIXES = ("kubernetes.core.", "community.okd.", "mlinfra.multinode.pods_exec",
                           "mlinfra.multinode.cluster_lock", "mlinfra.multinode.cluster_ownership", "k8s", "openshift_")

# The client's own words are kept, shortened: they name the address and errno.
_REASON_CHARS = 240


def _messages(result):
    """The failure texts of a task result, its loop items' included."""
    texts = []
    for key in ("msg", "module_stderr", "exception", "reason", "error"):
        value = result.get(key)
        if isinstance(value, str) and value:
            texts.append(value)
    for item in result.get("results") or ():
        if isinstance(item, dict) and item.get("failed"):
            texts.extend(_messages(item))
    return texts


def _reason(text):
    # ansible-core's own prefixes add nothing to the client's words.
    reason = re.sub(r"^(Task failed: )?(Module failed: )?", "", " ".join(text.split()))
    return reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 3] + "..."


def classify(result, task_name, action):
    """{kind, message} for a task result that failed because the cluster's
    API was lost, or None. ``action`` is the task's module: only the cluster
    modules can fail for lack of the API (another module's missing file is
    not a kubeconfig)."""
    if not action.startswith(CLUSTER_MODULE_PREFIXES):
        return None
    texts = _messages(result)
    for name, pattern, what, todo in KINDS:
        matched = next((text for text in texts if pattern.search(text)), None)
        if matched:
            break
    else:
        return None
    message = (
        "lost the cluster's API during '{task}': {what} ({reason}). The steps before this one are in place and "
        "nothing after it ran. Next: {todo}, then run the same playbook again; every step is idempotent and "
        "carries on from what is there."
    ).format(task=task_name, what=what, reason=_reason(matched), todo=todo)
    return {"kind": name, "message": message}
