# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What status.yml shows of a deployment: a table of its pods (node, state,
image, and what each detected: transport, RDMA ports, GPUs, GPUDirect), the
NCCL variables each pod set, its workspace claims, the privileged probe pods
left behind, where the pods differ, and the one line it ends with; and the
line teardown.yml ends with, on the workspace claims it kept or deleted.

Standard library only; runs on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .text_table import format_table

HEADER = ["POD", "NODE", "STATE", "IMAGE", "TRANSPORT", "RDMA-PORTS", "GPUS", "GPUDIRECT"]
UNSCHEDULED = "(unscheduled)"
PROBES_LEFT = "(verify-rdma.yml or soak.yml runs, or was interrupted; teardown.yml deletes them)"


def _name(obj):
    return obj["metadata"]["name"]


def _ready(pod):
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(condition.get("type") == "Ready" and condition.get("status") == "True" for condition in conditions)


def headline(namespace, app, cluster, statefulset):
    """``StatefulSet ns/app: R of N pod(s) Ready``, or how to deploy it."""
    if not statefulset:
        state = "not deployed (ansible-playbook playbooks/deploy.yml -i inventories/%s)" % cluster
    else:
        state = "%s of %s pod(s) Ready" % ((statefulset.get("status") or {}).get("readyReplicas") or 0,
                                           statefulset["spec"].get("replicas"))
    return "StatefulSet %s/%s: %s" % (namespace, app, state)


def pod_row(pod, detected):
    """One pod's row of the table; ``detected`` is its nccl.json, or None."""
    found = detected if isinstance(detected, dict) else {}
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    gpudirect = found.get("gpudirect")
    return [_name(pod), spec.get("nodeName") or UNSCHEDULED,
            (status.get("phase") or "?") + ("/Ready" if _ready(pod) else ""),
            spec["containers"][0].get("image"), found.get("transport"),
            len(found["rdma_ports"]) if "rdma_ports" in found else None, found.get("gpus"),
            {True: "yes", False: "no"}.get(gpudirect) if isinstance(gpudirect, bool) else None]


def env_line(pod, detected):
    """The NCCL variables a pod's detection set, sorted: ``pod: NCCL_X=1 ...``."""
    env = detected.get("env") or {}
    return "%s: %s" % (pod, " ".join("%s=%s" % (name, env[name]) for name in sorted(env) if name.startswith("NCCL_")))


def deployment_status(namespace, app, cluster, statefulsets, pods, claims, probes, detected=(), agreement=None):
    """{"lines": what status.yml shows, "summary": the line it ends with}.

    ``statefulsets``, ``pods``, ``claims``, ``probes``: the objects as the API
    gives them (the StatefulSet of the app's name, its pods, its workspace
    claims, the verify role's probe pods); ``detected``: each running pod's
    read-back, [{pod, json}] (json: its nccl.json, or None); ``agreement``:
    nccl_agreement's result over them, or None when none was read."""
    statefulset = statefulsets[0] if statefulsets else None
    top = headline(namespace, app, cluster, statefulset)
    found = dict((entry["pod"], entry.get("json")) for entry in detected)
    pods = sorted(pods, key=_name)
    lines = [top]
    if pods:
        lines += format_table([pod_row(pod, found.get(_name(pod))) for pod in pods], HEADER)
    lines += [env_line(entry["pod"], entry["json"]) for entry in detected if isinstance(entry.get("json"), dict)]
    lines.append("workspace claims: " + (", ".join(sorted(_name(claim) for claim in claims)) or "none"))
    probes = sorted(probes, key=_name)
    if probes:
        lines.append("privileged probe pods: %s %s" % (", ".join(
            "%s on %s" % (_name(probe), (probe.get("spec") or {}).get("nodeName") or UNSCHEDULED)
            for probe in probes), PROBES_LEFT))
    else:
        lines.append("privileged probe pods: none")
    mismatches = ((agreement or {}).get("mismatches") or []) if pods else []
    lines += ["pods differ: " + mismatch["message"] for mismatch in mismatches]
    differ = ", ".join(mismatch["field"] for mismatch in mismatches)
    differs = "; the pods differ in " + differ if differ else ""
    summary = "%s%s; %d privileged probe pod(s) left" % (top, differs, len(probes))
    return {"lines": lines, "summary": summary}


def claims_line(namespace, claims, purged):
    """teardown.yml's last line: the workspace claims it deleted
    (``purged``) or kept, each with its size, and how to delete kept ones."""
    listed = ", ".join("%s (%s)" % (_name(claim), ((claim.get("spec") or {}).get("resources") or {}).get(
        "requests", {}).get("storage", "?")) for claim in sorted(claims, key=_name))
    return "%s %d workspace claim(s) in %s%s: %s" % (
        "deleted" if purged else "kept", len(claims), namespace,
        "" if purged else "; delete them with -e purge_workspaces=true (a deploy takes kept claims again with the "
                          "size and class they have)", listed)
