# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The verify role's probe objects, built as data from the checked settings:
a service account for the probes, its binding to the privileged SCC
(OpenShift) and, per GPU node, a pod pinned to it that idles until the node
checks are run in it by exec, and, when it stays for a benchmark or a
soak, the node's port counters are read in it before and after each run.

Every value from the inventory becomes the value of one field and the
objects are serialised once, by whoever applies them: no value can add a
field. ``settings`` maps the inventory's variable names to their values as
the cluster role's checked_settings has checked them, ``stay_seconds``
how long the probes stay after they start (left out: for the checks only),
and ``step_seconds`` how long a probe may go without being used (a soak's
one run) before it ends by itself (left out: as long as it stays).

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..cluster.ownership import owner_labels
from .statefulset_manifests import PLUGINS_DIR, code_mounts, code_volumes, probe_account_name

# Where the probe sees the node's /proc, /sys and /dev (MLINFRA_HOST_ROOT).
HOST_ROOT = "/host"
PROBED_NODE_ANNOTATION = "mlinfra.io/probed-node"
# The probe outlives the checks by this long, then ends by itself.
_IDLE_MARGIN_SECONDS = 600
# Touched by every exec into a probe (the node checks, each reading of the
# port counters); a probe that has not been used for its step's time ends.
ALIVE_FILE = "/tmp/mlinfra-probe-alive"
ALIVE_ENV = "MLINFRA_PROBE_ALIVE"


def probe_manifests(settings):
    """The service account, its binding (OpenShift) and one pod per node of
    cluster_gpu_nodes, in the order they are applied."""
    objects = [probe_service_account(settings)]
    if settings["cluster_platform"] == "openshift":
        objects.append(probe_scc_binding(settings))
    objects.extend(probe_pod(settings, index, node) for index, node in enumerate(settings["cluster_gpu_nodes"]))
    return objects


def probe_labels(settings):
    return dict(owner_labels(settings["cluster_app_name"]), **{
        "app.kubernetes.io/name": probe_account_name(settings),
        "app.kubernetes.io/part-of": settings["cluster_name"],
        "app.kubernetes.io/component": "rdma-probe"})


def probe_service_account(settings):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": probe_account_name(settings), "namespace": settings["cluster_namespace"],
                         "labels": probe_labels(settings)}}


def probe_scc_binding(settings):
    """Reading the host's /proc, /sys and /dev takes hostPath volumes: the
    privileged SCC, for this service account only."""
    namespace = settings["cluster_namespace"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": probe_account_name(settings) + "-scc", "namespace": namespace,
                     "labels": probe_labels(settings)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:openshift:scc:privileged"},
        "subjects": [{"kind": "ServiceAccount", "name": probe_account_name(settings), "namespace": namespace}],
    }


def _host_volume(name, path):
    return {"name": name, "hostPath": {"path": path, "type": "Directory"}}


def probe_lifetime(settings):
    """Seconds a probe lives: its start, the time it stays for a benchmark
    or a soak (``stay_seconds``, set by the role, not an inventory
    variable), and a margin."""
    return int(settings["verify_probe_timeout"]) + int(settings.get("stay_seconds") or 0) + _IDLE_MARGIN_SECONDS


def probe_idle_limit(settings):
    """Seconds a probe may go unused before it ends: one step of the play
    (a soak's run: ``step_seconds``) and the margin, never more than its
    lifetime. An interrupted soak of many runs so leaves no privileged pod
    running for longer than one run, whatever its activeDeadlineSeconds."""
    step = int(settings.get("step_seconds") or 0)
    lifetime = probe_lifetime(settings)
    return min(lifetime, step + _IDLE_MARGIN_SECONDS) if step else lifetime


def probe_command(idle):
    """The probe's shell: it idles, and ends when its alive file has not
    been touched for ``idle`` seconds (or when asked to stop)."""
    return ("trap 'exit 0' TERM; touch \"$%s\"; while :; do sleep 2 & wait $!; "
            "[ $(( $(date +%%s) - $(stat -c %%Y \"$%s\") )) -lt %d ] || exit 0; done" % (ALIVE_ENV, ALIVE_ENV, idle))


def probe_pod(settings, index, node):
    """The probe of one node, pinned to it by nodeName: it runs on a cordoned
    node too, and needs no scheduler."""
    lifetime = probe_lifetime(settings)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "%s-%d" % (probe_account_name(settings), index),
                     "namespace": settings["cluster_namespace"], "labels": probe_labels(settings),
                     "annotations": {PROBED_NODE_ANNOTATION: node}},
        "spec": {
            "nodeName": node,
            "serviceAccountName": probe_account_name(settings),
            # The probe reads the host; it never calls the API.
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            # Gone by itself if the play stops before it deletes the probe.
            "activeDeadlineSeconds": lifetime,
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "probe",
                "image": settings["verify_probe_image"],
                "imagePullPolicy": settings["cluster_image_pull_policy"],
                "command": ["/bin/sh", "-c", probe_command(probe_idle_limit(settings))],
                "env": [
                    {"name": ALIVE_ENV, "value": ALIVE_FILE},
                    {"name": "MLINFRA_PLUGINS_DIR", "value": PLUGINS_DIR},
                    {"name": "MLINFRA_HOST_ROOT", "value": HOST_ROOT},
                    # The NVIDIA container runtime adds nvidia-smi without taking a GPU.
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
                ],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "host-proc", "mountPath": HOST_ROOT + "/proc", "readOnly": True},
                    {"name": "host-sys", "mountPath": HOST_ROOT + "/sys", "readOnly": True},
                    {"name": "host-dev", "mountPath": HOST_ROOT + "/dev", "readOnly": True},
                ] + code_mounts(),
            }],
            "volumes": [
                _host_volume("host-proc", "/proc"),
                _host_volume("host-sys", "/sys"),
                _host_volume("host-dev", "/dev"),
            ] + code_volumes(settings),
        },
    }
