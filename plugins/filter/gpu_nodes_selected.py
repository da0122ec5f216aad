# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: gpu_nodes_selected
short_description: The GPU nodes a label selector chose, and why the others it matched were left out
version_added: 0.1.0
description:
  - Of the nodes the API server listed for C(cluster_gpu_node_selector), chooses those a training pod can go to
    and says why each other one was left out - named in C(cluster_gpu_nodes_exclude), cordoned, tainted with a
    C(NoSchedule) or C(NoExecute) taint that C(cluster_node_tolerations) does not tolerate (the scheduler's rule), or
    offering less than a pod asks for.
  - A node C(verify-rdma.yml) failed stays chosen, so that C(verify-rdma.yml) can check it again; the pods keep off it.
author:
  - mlinfra maintainers (@mlinfra)
positional: selector, exclude, tolerations, wanted
options:
  _input:
    description: The nodes the selector matched, as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  selector:
    description: The label selector (C(cluster_gpu_node_selector)), for the words.
    type: str
    required: true
  exclude:
    description: Node names never to choose (C(cluster_gpu_nodes_exclude)).
    type: list
    elements: str
    default: []
  tolerations:
    description: The pods' tolerations (C(cluster_node_tolerations)).
    type: list
    elements: dict
    default: []
  wanted:
    description: What one pod asks for, resource name to a whole count or a Kubernetes quantity.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Choose the GPU nodes by label
  vars:
    selection: >-
      {{ matched.resources | mlinfra.multinode.gpu_nodes_selected(cluster_gpu_node_selector,
         cluster_gpu_nodes_exclude, cluster_node_tolerations, {'nvidia.com/gpu': 8}) }}
  ansible.builtin.debug:
    msg: "{{ selection.line }}"
"""

RETURN = r"""
_value:
  description: The nodes chosen and left out, the line saying so, and the refusal when none is left.
  type: dict
  contains:
    chosen:
      description: The chosen nodes' names, sorted.
      type: list
      elements: str
    left_out:
      description: Each node matched but not chosen.
      type: list
      elements: dict
      contains:
        name:
          description: The node.
          type: str
        why:
          description: Why it was left out.
          type: str
    left_out_words:
      description: The nodes left out, grouped by why, in words.
      type: str
    line:
      description: What was matched, chosen and left out, in one line.
      type: str
    refusal:
      description: The failure when no node is chosen, naming the fix; else an empty string.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.node_selection import select_gpu_nodes


def gpu_nodes_selected(nodes, selector, exclude=None, tolerations=None, wanted=None):
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError("gpu_nodes_selected takes the node objects as k8s_info returns them")
    try:
        return select_gpu_nodes(nodes, selector, list(exclude or []), list(tolerations or []), dict(wanted or {}))
    except ValueError as error:
        raise AnsibleFilterError("gpu_nodes_selected: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"gpu_nodes_selected": gpu_nodes_selected}
