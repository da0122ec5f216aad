# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: doubtful_placements
short_description: The pods that run on a node verify-rdma.yml failed, or checked too long ago
version_added: 0.1.0
description:
  - One warning per pod whose node is labelled C(mlinfra.io/rdma-verified=false), or whose pass
    (C(mlinfra.io/rdma-verified-date)) is older than O(max_age_days) days. The StatefulSet's affinity keeps new pods
    off failed nodes, but a pod placed before its node failed stays there until deleted.
  - A node never verified is not warned about.
author:
  - mlinfra maintainers (@mlinfra)
positional: nodes, today, max_age_days, cluster_name
options:
  _input:
    description:
      - The pods and their nodes, as C(pod) and C(node) entries (C(mlinfra.multinode.pods_exec)' C(pods)), or the pod
        objects as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  nodes:
    description: The cluster's node objects, as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  today:
    description: Today's date as C(YYYY-MM-DD), the date the labels are compared with.
    type: str
    required: true
  max_age_days:
    description: The age in days past which a pass is doubtful (C(cluster_verification_max_age)); 0 leaves age alone.
    type: int
    required: true
  cluster_name:
    description: The inventory's cluster name, for the fix.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Warn about pods on nodes that failed or were checked too long ago
  ansible.builtin.debug:
    msg: >-
      {{ pods | mlinfra.multinode.doubtful_placements(nodes.resources, now(utc=true, fmt='%Y-%m-%d'),
                                                      cluster_verification_max_age, cluster_name) }}
"""

RETURN = r"""
_value:
  description: One line per such pod, naming the node, its verdict's date and the fix; empty when there is none.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.node_choice import doubtful_placements


def doubtful_placements_filter(placed, nodes, today, max_age_days, cluster_name):
    entries = placed if isinstance(placed, list) else [None]
    if not all(isinstance(entry, dict) and ("pod" in entry or "metadata" in entry) for entry in entries):
        raise AnsibleFilterError("doubtful_placements takes pod objects, or entries of a pod and its node")
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError("doubtful_placements takes the node objects as k8s_info returns them")
    try:
        return doubtful_placements(placed, nodes, today, int(max_age_days), cluster_name)
    except ValueError as error:
        raise AnsibleFilterError("doubtful_placements: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"doubtful_placements": doubtful_placements_filter}
