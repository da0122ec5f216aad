# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The GPU nodes chosen by ``cluster_gpu_node_selector``: of the nodes the
API server matched, those a pod can go to, and why each other one was left
out (named in ``cluster_gpu_nodes_exclude``, cordoned, a taint the pods do
not tolerate, too few GPUs or RDMA resources).

The cluster role resolves the selection once, before anything changes, and
every role and playbook after it uses the chosen list as it uses an
explicit ``cluster_gpu_nodes``. A node verify-rdma.yml failed stays chosen:
verify-rdma.yml checks it again, and node_choice keeps pods off it.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from .node_choice import short_of

# The taints that keep a pod off a node; PreferNoSchedule only discourages.
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# The taint a cordon adds, said as "cordoned" (spec.unschedulable).
_CORDON_TAINT = "node.kubernetes.io/unschedulable"
# How many names a line lists before it says how many more.
_NAMES_SHOWN = 8


def tolerates(toleration, taint):
    """Whether a pod toleration tolerates a node taint, as the scheduler
    decides it (k8s.io/api/core/v1 Toleration.ToleratesTaint): the effects
    agree or the toleration names none; the keys agree or an Exists
    toleration names none; Exists, or Equal with the same value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")


def _taint_text(taint):
    value = "=" + taint["value"] if taint.get("value") else ""
    return "%s%s:%s" % (taint.get("key"), value, taint.get("effect"))


def untolerated_taints(node, tolerations):
    """The node's taints that keep the pods off it, as ``key=value:effect``."""
    return [_taint_text(taint) for taint in (node.get("spec") or {}).get("taints") or []
            if taint.get("effect") in _BLOCKING_EFFECTS and taint.get("key") != _CORDON_TAINT
            and not any(tolerates(toleration, taint) for toleration in tolerations or [])]


def _why_left_out(node, exclude, tolerations, wanted):
    name = node["metadata"]["name"]
    if name in exclude:
        return "named in cluster_gpu_nodes_exclude"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned (unschedulable)"
    taints = untolerated_taints(node, tolerations)
    if taints:
        return "tainted %s, which cluster_node_tolerations does not tolerate" % ", ".join(taints)
    short = short_of((node.get("status") or {}).get("allocatable") or {}, wanted)
    if short:
        return "offers too little: %s" % ", ".join(short)
    return ""


def names_shown(names):
    """The first names and how many more: a line that stays short at
    hundreds of nodes."""
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (" and %d more" % (len(names) - _NAMES_SHOWN) if len(names) > _NAMES_SHOWN else "")


def select_gpu_nodes(nodes, selector, exclude=(), tolerations=(), wanted=None):
    """The nodes ``selector`` matched (``nodes``: what the API server
    listed for it), sorted into ``{chosen, left_out, left_out_words, line,
    refusal}``: ``chosen`` the names in order, ``left_out`` ``{name, why}``
    each, ``left_out_words`` those grouped by reason in words,
    ``line`` what the play says it chose and left out, ``refusal`` the
    failure when none is left (else ""). ``wanted``: what one pod asks for
    (short_of's form)."""
    chosen, left_out, exclude = [], [], set(exclude or ())
    for node in sorted(nodes or [], key=lambda node: node["metadata"]["name"]):
        why = _why_left_out(node, exclude, tolerations, wanted or {})
        if why:
            left_out.append({"name": node["metadata"]["name"], "why": why})
        else:
            chosen.append(node["metadata"]["name"])
    matched = len(chosen) + len(left_out)
    line = "cluster_gpu_node_selector '%s' matched %d node%s; chose %d%s" % (
        selector, matched, "" if matched == 1 else "s", len(chosen), ": " + names_shown(chosen) if chosen else "")
    reasons = {}
    for entry in left_out:
        reasons.setdefault(entry["why"], []).append(entry["name"])
    # The nodes left out for one reason together: 128 cordoned nodes are
    # one group, not 128 clauses.
    left_out_words = "; ".join("%s (%s)" % (names_shown(names), why)
                               for why, names in sorted(reasons.items(), key=lambda item: item[1][0]))
    if left_out:
        line += "; left out %d: %s" % (len(left_out), left_out_words)
    refusal = ""
    if not chosen:
        fix = ("label the GPU nodes (kubectl label node NODE KEY=VALUE) or correct cluster_gpu_node_selector; "
               "kubectl get nodes -l '%s' lists what it matches" % selector) if not matched else \
            "see why each was left out above: uncordon, tolerate the taint in cluster_node_tolerations, lower " \
            "what a pod asks for, or shorten cluster_gpu_nodes_exclude"
        refusal = "%s; nothing was changed; fix: %s" % (
            line if matched else "cluster_gpu_node_selector '%s' matches no node" % selector, fix)
    return {"chosen": chosen, "left_out": left_out, "left_out_words": left_out_words, "line": line,
            "refusal": refusal}
