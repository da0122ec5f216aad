# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nodes_short
short_description: The refusal when named nodes offer less than a pod asks for
version_added: 0.1.0
description:
  - Compares each usable node's C(status.allocatable) with what one pod requests and, for the nodes that lack
    something, says what (C(nvidia.com/gpu (wants 8, has 4))), the nodes that lack the same things together in one
    problem, each with the variables that ask for it (O(asked_by)) as the fix. Empty when every usable node can host a
    pod.
  - Whole numbers are compared as counts (GPUs, RDMA virtual functions); other wanted values as Kubernetes
    quantities (V(cpu) V(32) or V(500m), V(memory) V(256Gi)). A resource the node does not list counts as 0.
author:
  - mlinfra maintainers (@mlinfra)
positional: usable, wanted, asked_by, before_changes
options:
  _input:
    description: The node objects, as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  usable:
    description: The names of the nodes a pod may go to (C(mlinfra.multinode.usable_nodes)' C(usable)); the others
      are not looked at.
    type: list
    elements: str
    required: true
  wanted:
    description: Resource name to the count or quantity one pod requests.
    type: dict
    required: true
  asked_by:
    description: Resource name to the variable that asks for it (V(nvidia.com/gpu) to V(cluster_gpus_per_node)).
    type: dict
    required: true
  before_changes:
    description: Whether the play has changed nothing yet; false words the refusal as leaving the pods unchanged.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Fail when a node cannot host a pod
  ansible.builtin.assert:
    that: refusal == ''
    fail_msg: "{{ refusal }}"
  vars:
    refusal: >-
      {{ nodes.resources | mlinfra.multinode.nodes_short(['node-a'], {'nvidia.com/gpu': 8},
                                                         {'nvidia.com/gpu': 'cluster_gpus_per_node'}) }}
"""

RETURN = r"""
_value:
  description: The refusal, for example C(named nodes cannot host a pod (nothing was changed) - nodes a, b - nvidia.com/gpu
    (wants 8, has 4); fix - lower cluster_gpus_per_node to what the nodes can allocate, or take the nodes out of
    cluster_gpu_nodes) (with colons for the dashes); empty when every usable node can host a pod.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.node_choice import nodes_short


def nodes_short_filter(nodes, usable, wanted, asked_by, before_changes=True):
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError("nodes_short takes the node objects as k8s_info returns them")
    if not isinstance(wanted, dict) or not isinstance(asked_by, dict):
        raise AnsibleFilterError("nodes_short takes mappings of what a pod wants and of the variables that ask for it")
    try:
        return nodes_short(nodes, set(usable or []), wanted, asked_by, bool(before_changes))
    except ValueError as error:
        raise AnsibleFilterError("nodes_short: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"nodes_short": nodes_short_filter}
