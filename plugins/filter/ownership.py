# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Filters of ownership (module_utils/cluster/ownership.py): the labels that say an
object is a deployment's, and the objects a deploy would touch. Each is
documented in the .yml file of its name beside this one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import ownership


def owner_labels(app):
    if not isinstance(app, str) or not app:
        raise AnsibleFilterError("owner_labels takes the deployment's cluster_app_name, got %r" % (app,))
    return ownership.owner_labels(app)


def object_refs(manifests):
    if not isinstance(manifests, list):
        raise AnsibleFilterError("object_refs takes a list of manifests, got %s" % type(manifests).__name__)
    try:
        return ownership.object_refs(manifests)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("object_refs: a manifest without apiVersion, kind or metadata.name (%s)" % exc)


class FilterModule(object):
    def filters(self):
        return {"owner_labels": owner_labels, "object_refs": object_refs}
