# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Whose is an object: the labels every object of a deployment carries, and
the decision whether a live object of the same name is this deployment's.

A deploy applies its objects by name. Without this check, a namespace that
already held another team's ConfigMap, ServiceAccount or claim of the same
names had them overwritten, relabelled, mounted by the pods, and deleted by
the next teardown. deploy.yml refuses, before anything changes, to touch a
live object that is not this deployment's; teardown.yml deletes only the
deployment's own.

An object is this deployment's when it carries the collection's managed-by
label and the deployment's instance label (its cluster_app_name). Objects
made before the instance label existed carry managed-by and an
``app.kubernetes.io/name`` of the deployment (``<app>``, ``<app>-probe``,
``<app>-train``, ``<app>-image``): those count as the deployment's too, so
that an upgrade does not refuse its own objects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

MANAGED_BY = "mlinfra.multinode"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
INSTANCE_LABEL = "app.kubernetes.io/instance"
NAME_LABEL = "app.kubernetes.io/name"
# The app.kubernetes.io/name of each kind of object a deployment makes.
_NAME_SUFFIXES = ("", "-probe", "-train", "-image")

# Cluster-scoped kinds the collection creates; everything else it creates
# lives in a namespace.
_CLUSTER_SCOPED = frozenset(["Namespace", "ClusterRole", "ClusterRoleBinding", "SecurityContextConstraints",
                             "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Node"])


def owner_labels(app):
    """The labels that say an object is the deployment ``app``'s."""
    return {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: app}


def owner_selector(app):
    """owner_labels as label selectors (kubernetes.core's label_selectors)."""
    return ["%s=%s" % item for item in sorted(owner_labels(app).items())]


def is_owned(labels, app):
    """Whether an object with these labels is the deployment ``app``'s."""
    labels = labels or {}
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
        return False
    if INSTANCE_LABEL in labels:
        return labels[INSTANCE_LABEL] == app
    return labels.get(NAME_LABEL) in [app + suffix for suffix in _NAME_SUFFIXES]


def object_ref(manifest):
    """A manifest cut down to what names it (apiVersion, kind, metadata.name
    and, for a namespaced kind, metadata.namespace): what a deletion by
    kubernetes.core.k8s takes."""
    metadata = manifest.get("metadata") or {}
    ref = {"apiVersion": manifest["apiVersion"], "kind": manifest["kind"], "metadata": {"name": metadata["name"]}}
    if manifest["kind"] not in _CLUSTER_SCOPED:
        ref["metadata"]["namespace"] = metadata.get("namespace")
    return ref


def object_refs(manifests):
    """The refs of the manifests, and of the claims a StatefulSet's claim
    templates make (``<template>-<statefulset>-<ordinal>``, the StatefulSet
    controller's names), which the pods mount whoever made them."""
    refs = []
    for manifest in manifests:
        refs.append(object_ref(manifest))
        if manifest["kind"] != "StatefulSet":
            continue
        metadata, spec = manifest["metadata"], manifest.get("spec") or {}
        for template in spec.get("volumeClaimTemplates") or []:
            for ordinal in range(int(spec.get("replicas") or 0)):
                refs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
                    "name": "%s-%s-%d" % (template["metadata"]["name"], metadata["name"], ordinal),
                    "namespace": metadata.get("namespace")}})
    return refs


def describe(ref):
    metadata = ref["metadata"]
    where = ("%s/" % metadata["namespace"]) if metadata.get("namespace") else ""
    return "%s %s%s" % (ref["kind"], where, metadata["name"])


def _labels_said(labels):
    shown = dict((key, value) for key, value in (labels or {}).items() if key.startswith("app.kubernetes.io/"))
    if not shown:
        return "no app.kubernetes.io labels"
    return ", ".join("%s=%s" % item for item in sorted(shown.items()))


def sort_out(refs, live, app):
    """{"owned": [refs], "foreign": [refs, each with the live labels in
    metadata.labels], "absent": [refs]} of ``refs``, given ``live``: the live
    object's labels for each ref that exists, in the same order (None where
    absent)."""
    result = {"owned": [], "foreign": [], "absent": []}
    for ref, labels in zip(refs, live):
        if labels is None:
            result["absent"].append(ref)
        elif is_owned(labels, app):
            result["owned"].append(ref)
        else:
            result["foreign"].append(dict(ref, metadata=dict(ref["metadata"], labels=labels)))
    return result


def takeover_message(foreign, app, namespace, action):
    """The refusal of ``action`` (deploy.yml, ...) to touch ``foreign``."""
    return ("%s would change objects that this deployment (cluster_app_name=%s in namespace %s) did not create: "
            "%s; they lack %s. Nothing was changed. Fix: give the deployment names of its own "
            "(another cluster_app_name or cluster_namespace), or have their owner remove them"
            % (action, app, namespace,
               "; ".join("%s (%s)" % (describe(ref), _labels_said(ref["metadata"].get("labels"))) for ref in foreign),
               " and ".join("%s=%s" % item for item in sorted(owner_labels(app).items()))))


def namespace_problem(labels, app, namespace, allow_existing, holds_owned):
    """Why the deployment may not use the existing namespace (a message),
    or None. A namespace it created carries its labels; one made before the
    labels existed holds the deployment's own objects (``holds_owned``)."""
    if labels is None or allow_existing or is_owned(labels, app) or holds_owned:
        return None
    return ("namespace %s exists and was not created by this deployment (%s; it lacks %s=%s and %s=%s). Nothing was "
            "changed. Fix: set cluster_namespace to a namespace of its own (deploy.yml creates it), or "
            "-e cluster_allow_existing_namespace=true to deploy into this one (its other objects are left alone)"
            % (namespace, _labels_said(labels), MANAGED_BY_LABEL, MANAGED_BY, INSTANCE_LABEL, app))
