# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: usable_nodes
short_description: Whether enough of the named GPU nodes can take a training pod, and why not
version_added: 0.1.0
description:
  - Sorts the named nodes into those that can take a pod and those that cannot - cordoned, failed by
    C(verify-rdma.yml) (labelled C(mlinfra.io/rdma-verified=false), which the StatefulSet's affinity keeps pods off),
    or, with O(require_verified), not labelled C(mlinfra.io/rdma-verified=true) - and words the refusal when fewer
    than O(replicas) can, naming each node left out, why, and the fix.
author:
  - mlinfra maintainers (@mlinfra)
positional: named, replicas, cluster_name
options:
  _input:
    description: The cluster's node objects, as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  named:
    description: The named GPU nodes (C(cluster_gpu_nodes)).
    type: list
    elements: str
    required: true
  replicas:
    description: How many pods need a node.
    type: int
    required: true
  cluster_name:
    description: The inventory's cluster name, for the fix.
    type: str
    required: true
  require_verified:
    description: Only nodes labelled C(mlinfra.io/rdma-verified=true) (C(statefulset_require_verified_nodes)).
    type: bool
    default: false
  selector:
    description: The label selector that chose O(named) (C(cluster_gpu_node_selector)), when they were not named by
      hand; the refusal says so.
    type: str
    default: ""
  left_out:
    description: The nodes O(selector) matched but did not choose, in words (C(gpu_nodes_selected)'s
      C(left_out_words)); the refusal names them.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Check that enough named nodes can take a pod
  vars:
    found: "{{ nodes.resources | mlinfra.multinode.usable_nodes(cluster_gpu_nodes, replicas, cluster_name) }}"
  ansible.builtin.assert:
    that: found.refusal == ''
    fail_msg: "{{ found.refusal }}"
"""

RETURN = r"""
_value:
  description: The named nodes by whether they can take a pod, and the refusal.
  type: dict
  contains:
    usable:
      description: The nodes that can take a pod.
      type: list
      elements: str
    cordoned:
      description: The cordoned nodes.
      type: list
      elements: str
    failed:
      description: The nodes C(verify-rdma.yml) failed.
      type: list
      elements: dict
      contains:
        name:
          description: The node.
          type: str
        date:
          description: The date of that verdict (its C(mlinfra.io/rdma-verified-date) label), or null.
          type: str
    unverified:
      description: With O(require_verified), the nodes not labelled C(mlinfra.io/rdma-verified=true).
      type: list
      elements: str
    refusal:
      description: The message when fewer than O(replicas) nodes can take a pod, else an empty string.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.node_choice import too_few_nodes, usable_nodes


def usable_nodes_filter(nodes, named, replicas, cluster_name, require_verified=False, selector="", left_out=""):
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError("usable_nodes takes the node objects as k8s_info returns them")
    found = usable_nodes(nodes, list(named), bool(require_verified))
    found["refusal"] = too_few_nodes(found, int(replicas), len(named), cluster_name, selector or "",
                                     left_out or "")
    return found


class FilterModule(object):
    def filters(self):
        return {"usable_nodes": usable_nodes_filter}
