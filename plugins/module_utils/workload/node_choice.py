# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Which of the named GPU nodes can take a training pod, and the refusal
when fewer than the replicas can, before anything is changed.

A node cannot take one when it is cordoned, when verify-rdma.yml failed it
(``mlinfra.io/rdma-verified=false``: the StatefulSet's affinity keeps pods
off it, so a pod would wait for ever), or, with
statefulset_require_verified_nodes, when verify-rdma.yml has not passed it.
The affinity itself is workload_manifests.node_affinity; the two agree.
A usable node must also offer what a pod asks for (GPUs, CPU, memory, the
RDMA resources): short_of and nodes_short. A pod already running on a node
that has since failed, or whose pass is older than the inventory allows, is
named by doubtful_placements (nothing moves a running pod).

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ..common.quantity import parse_quantity

VERIFIED_LABEL = "mlinfra.io/rdma-verified"
VERIFIED_DATE_LABEL = "mlinfra.io/rdma-verified-date"


def usable_nodes(nodes, named, require_verified=False):
    """The named nodes sorted by whether they can take a pod:
    ``{usable, cordoned, failed, unverified}``, each a list of names in the
    order of ``named``; ``failed`` entries are ``{name, date}``. ``nodes``:
    the node objects (k8s_info's resources); a named node missing from them
    is left out (its own check names it)."""
    by_name = dict((node["metadata"]["name"], node) for node in nodes or [])
    found = {"usable": [], "cordoned": [], "failed": [], "unverified": []}
    for name in named:
        node = by_name.get(name)
        if node is None:
            continue
        labels = node["metadata"].get("labels") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            found["cordoned"].append(name)
        elif labels.get(VERIFIED_LABEL) == "false":
            found["failed"].append({"name": name, "date": labels.get(VERIFIED_DATE_LABEL)})
        elif require_verified and labels.get(VERIFIED_LABEL) != "true":
            found["unverified"].append(name)
        else:
            found["usable"].append(name)
    return found


def _are(names):
    return "%s %s" % (", ".join(names), "is" if len(names) == 1 else "are")


def too_few_nodes(found, replicas, named_count, cluster_name, selector="", left_out=""):
    """The refusal when fewer than ``replicas`` nodes are usable (``found``
    from usable_nodes), naming each node left out, why, and the fix; ""
    when there are enough. ``selector``: the cluster_gpu_node_selector that
    chose the nodes, when they were not named; ``left_out``: the words for
    the nodes it matched but did not choose (node_selection)."""
    usable = len(found["usable"])
    if usable >= replicas:
        return ""
    other = "label more nodes for cluster_gpu_node_selector" if selector else "name other nodes"
    reasons, fixes = [], ["lower replicas (-e replicas=%d)" % usable if usable else other]
    if found["failed"]:
        dates = sorted(set(entry["date"] for entry in found["failed"] if entry["date"]))
        reasons.append("%s failed verify-rdma.yml (%s=false%s)" % (
            ", ".join(entry["name"] for entry in found["failed"]), VERIFIED_LABEL,
            ", " + ", ".join(dates) if dates else ""))
    if found["unverified"]:
        reasons.append("%s not labelled %s=true, which statefulset_require_verified_nodes asks for" % (
            _are(found["unverified"]), VERIFIED_LABEL))
    if found["failed"] or found["unverified"]:
        fixes.append("repair the nodes and run ansible-playbook playbooks/verify-rdma.yml -i inventories/%s -e "
                     "verify_label_nodes=true (it labels the nodes that pass)" % cluster_name)
    if found["cordoned"]:
        reasons.append("%s cordoned (unschedulable)" % _are(found["cordoned"]))
        fixes.append("uncordon a node once repaired (kubectl uncordon NODE)")
    if left_out:
        reasons.append("the selector left out %s" % left_out)
        fixes.append("see to the nodes it left out")
    if not reasons:
        reasons.append("no more nodes are %s" % ("chosen" if selector else "named"))
    nodes = "nodes cluster_gpu_node_selector '%s' chose" % selector if selector else "cluster_gpu_nodes"
    return "replicas=%d but only %d of the %d %s can take a pod: %s; nothing was changed; fix: %s" % (
        replicas, usable, named_count, nodes, "; ".join(reasons), ", or ".join(fixes))


# -- pods already placed -------------------------------------------------------

def _day(text):
    try:
        return datetime.datetime.strptime(str(text), "%Y-%m-%d").date()
    except ValueError:
        return None


def _placement(entry):
    if "metadata" in entry:
        return {"pod": entry["metadata"]["name"], "node": (entry.get("spec") or {}).get("nodeName")}
    return {"pod": entry["pod"], "node": entry.get("node")}


def doubtful_placements(placed, nodes, today, max_age_days, cluster_name):
    """One warning per pod that runs on a node verify-rdma.yml failed, or
    passed more than ``max_age_days`` days before ``today`` (YYYY-MM-DD; 0
    leaves age alone). ``placed``: ``{pod, node}`` entries or pod objects;
    ``nodes``: the node objects. A node never verified is not warned about: many clusters
    never label theirs (statefulset_require_verified_nodes asks for it)."""
    by_name = dict((node["metadata"]["name"], node) for node in nodes or [])
    today = _day(today)
    if today is None:
        raise ValueError("today must be a date as YYYY-MM-DD")
    warnings = []
    for entry in sorted((_placement(entry) for entry in placed or []), key=lambda entry: entry["pod"]):
        labels = (by_name.get(entry["node"]) or {}).get("metadata", {}).get("labels") or {}
        verdict, date = labels.get(VERIFIED_LABEL), labels.get(VERIFIED_DATE_LABEL)
        passed_on = _day(date)
        age = (today - passed_on).days if passed_on else None
        if verdict == "false":
            failed_on = " on " + date if date else ""
            warnings.append("%s runs on %s, which verify-rdma.yml failed%s (%s=false); it stays there until deleted: "
                            "fix the node, or delete the pod once no run needs it (kubectl delete pod) to move it "
                            "to a node that passed" % (entry["pod"], entry["node"], failed_on, VERIFIED_LABEL))
        elif verdict == "true" and max_age_days and age is not None and age > max_age_days:
            warnings.append("%s runs on %s, last verified %s (%d days ago, more than cluster_verification_max_age=%d); "
                            "check it again: ansible-playbook playbooks/verify-rdma.yml -i inventories/%s -e verify_label_nodes=true"
                            % (entry["pod"], entry["node"], date, age, max_age_days, cluster_name))
    return warnings


# -- what a pod asks for ------------------------------------------------------

def _count(value):
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def short_of(allocatable, wanted):
    """What a node's allocatable offers less of than ``wanted`` (whole
    counts, or Kubernetes quantities for CPU and memory), as
    ``name (wants W, has H)``."""
    short = []
    for name in sorted(wanted):
        need, have = _count(wanted[name]), allocatable.get(name, 0)
        if need is not None:
            if need > 0 and (_count(have) or 0) < need:
                short.append("%s (wants %d, has %s)" % (name, need, have))
            continue
        need = parse_quantity(wanted[name])
        if need is None:
            raise ValueError("the wanted amount of %s must be a whole number or a Kubernetes quantity, got %r"
                             % (name, wanted[name]))
        if need > 0 and (parse_quantity(have) or 0) < need:
            short.append("%s (wants %s, has %s)" % (name, wanted[name], have))
    return short


def nodes_short(nodes, usable, wanted, asked_by, before_changes=True):
    """One refusal for every usable node that cannot host a pod, the nodes
    that lack the same grouped together (eight GPUs asked of nodes of four
    is one problem, not one per node), naming the variables that ask for
    what is short (``asked_by``: resource to variable); "" when all can.
    ``before_changes``: whether the play has changed nothing yet (else only
    the pods are said to be unchanged)."""
    groups = []
    for node in nodes:
        name = node["metadata"]["name"]
        if name not in usable:
            continue
        short = short_of((node.get("status") or {}).get("allocatable") or {}, wanted)
        if short:
            for group in groups:
                if group["short"] == short:
                    group["nodes"].append(name)
                    break
            else:
                groups.append({"short": short, "nodes": [name]})
    problems = []
    for group in groups:
        variables = sorted(set(asked_by[item.split(" ", 1)[0]] for item in group["short"]
                               if item.split(" ", 1)[0] in asked_by))
        plural = "s" if len(group["nodes"]) > 1 else ""
        fixes = ["lower %s to what the node%s can allocate" % (", ".join(variables), plural)] if variables else []
        if len(variables) < len(group["short"]):
            fixes.append("check the device plugins that offer the rest (the GPU operator, the SR-IOV device plugin "
                         "and the sriov role's policies)")
        fixes.append("take the node%s out of cluster_gpu_nodes" % plural)
        problems.append("%s %s: %s; fix: %s" % (
            "node" if len(group["nodes"]) == 1 else "nodes", ", ".join(group["nodes"]),
            ", ".join(group["short"]), ", or ".join(fixes)))
    return ("%s cannot host a pod (%s): %s" % (
        "a named node" if len(problems) == 1 and len(groups[0]["nodes"]) == 1 else "named nodes",
        "nothing was changed" if before_changes else "the pods were not changed", "; ".join(problems))) \
        if problems else ""
