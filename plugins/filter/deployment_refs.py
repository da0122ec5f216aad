# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: deployment_refs
short_description: Every object of a deployment's names, whatever settings made it
version_added: 0.1.0
description:
  - The StatefulSet, its headless Service, the autodetect ConfigMaps, the ServiceAccount and its SCC access, the
    probes' ServiceAccount and binding, the IPC_LOCK SCC and the host path policy of a deployment, by name, as
    C(mlinfra.multinode.cluster_ownership) takes them; every object deploy.yml or verify-rdma.yml may have made under
    any settings, since a deployment made with other settings (C(cluster_security_mode=ipc_lock), say) keeps its
    objects after the inventory changed.
  - What teardown.yml deletes once C(mlinfra.multinode.cluster_ownership) has found it is the deployment's own. The
    workspace claims and the training runs' objects are found by their labels instead.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: The deployment's names.
    type: dict
    required: true
    suboptions:
      cluster_namespace:
        description: The deployment's namespace.
        type: str
        required: true
      cluster_app_name:
        description: The StatefulSet's name, from which the other names are derived.
        type: str
        required: true
"""

EXAMPLES = r"""
- name: Know every object of the deployment's names
  ansible.builtin.set_fact:
    named: "{{ {'cluster_namespace': 'team-a', 'cluster_app_name': 'h-kim'} | mlinfra.multinode.deployment_refs }}"
"""

RETURN = r"""
_value:
  description: One entry per object, in the order teardown.yml deletes them (a binding before what it binds).
  type: list
  elements: dict
  contains:
    apiVersion:
      description: The object's apiVersion.
      type: str
    kind:
      description: The object's kind.
      type: str
    metadata:
      description: C(name), and C(namespace) for a namespaced kind.
      type: dict
      contains:
        name:
          description: The object's name.
          type: str
        namespace:
          description: The object's namespace; absent for a cluster-scoped kind.
          type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import deployment_refs


def deployment_refs_filter(names):
    if not isinstance(names, dict) or not all(names.get(key) for key in ("cluster_namespace", "cluster_app_name")):
        raise AnsibleFilterError("deployment_refs takes a mapping with cluster_namespace and cluster_app_name")
    return deployment_refs(names)


class FilterModule(object):
    def filters(self):
        return {"deployment_refs": deployment_refs_filter}
