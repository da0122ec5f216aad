# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: inventory_proposal
short_description: The inventory settings a cluster suggests, and the group_vars file that proposes them
version_added: 0.1.0
description:
  - From the cluster's nodes, the SR-IOV operator's node policies and the node checks' facts of the GPU nodes,
    proposes the settings of a new inventory - a label that selects the GPU nodes (or their names when no label sets
    them apart), GPUs per node, the network mode, the RDMA NICs each pod gets, their MTU - with a note on what each
    rests on, what was found (link layers, the NICs' NUMA nodes) and what could not be decided.
  - Returns the proposal and, as C(text), the group_vars file that writes it out with those notes as comments.
author:
  - mlinfra maintainers (@mlinfra)
positional: policies, probe_results, platform, cluster_name, when
options:
  _input:
    description: Every node of the cluster, as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  policies:
    description: The SriovNetworkNodePolicies; null when the SR-IOV operator's API is not there.
    type: list
    elements: dict
  probe_results:
    description: The node checks' runs in the probe pods (C(mlinfra.multinode.pods_exec)'s C(pods)), whose JSON holds
      each node's facts; empty when the nodes were not probed.
    type: list
    elements: dict
    default: []
  platform:
    description: V(openshift) or V(kubernetes).
    type: str
    default: kubernetes
  cluster_name:
    description: The cluster's name, for the file's header.
    type: str
    default: ""
  when:
    description: When the cluster was read, for the file's header.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Write the proposed inventory
  ansible.builtin.copy:
    content: "{{ (nodes.resources | mlinfra.multinode.inventory_proposal(policies, probes.pods, 'kubernetes', 'mine')).text }}"
    dest: discovered.yml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The proposal.
  type: dict
  contains:
    settings:
      description: The proposed settings, by variable, in the order the file lists them.
      type: dict
      contains:
        cluster_platform:
          description: The proposed C(cluster_platform), where one is proposed.
          type: str
        cluster_gpu_node_selector:
          description: The proposed C(cluster_gpu_node_selector), where one is proposed.
          type: str
        cluster_gpu_nodes:
          description: The proposed C(cluster_gpu_nodes), where one is proposed.
          type: list
          elements: str
        cluster_gpus_per_node:
          description: The proposed C(cluster_gpus_per_node), where one is proposed.
          type: int
        cluster_network_mode:
          description: The proposed C(cluster_network_mode), where one is proposed.
          type: str
        cluster_rdma_network_type:
          description: The proposed C(cluster_rdma_network_type), where one is proposed.
          type: str
        cluster_host_network:
          description: The proposed C(cluster_host_network), where one is proposed.
          type: bool
        cluster_rdma_nics:
          description: The proposed C(cluster_rdma_nics), where one is proposed.
          type: list
          elements: dict
          contains:
            name:
              description: The NIC's network (its SriovNetwork and attachment).
              type: str
            resource:
              description: The resource its virtual functions are offered as.
              type: str
            pf:
              description: Its physical function, where the policy names one.
              type: str
            netdev:
              description: The interface the pod sees it as.
              type: str
        cluster_rdma_mtu:
          description: The proposed C(cluster_rdma_mtu), where one is proposed.
          type: int
        cluster_rdma_shared_resource:
          description: The proposed C(cluster_rdma_shared_resource), where one is proposed.
          type: str
    notes:
      description: What each setting rests on (under the setting's name), and what was found besides.
      type: dict
      contains:
        link_layers:
          description: The link layers of the RDMA devices probed.
          type: str
        numa:
          description: Which RDMA devices sit on which NUMA node.
          type: str
        not_probed:
          description: The GPU nodes whose devices were not read.
          type: str
    undecided:
      description: What could not be decided, each naming the variable to set by hand.
      type: list
      elements: str
    gpu_nodes:
      description: The nodes that offer GPUs, sorted.
      type: list
      elements: str
    text:
      description: The group_vars file that proposes them.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_discovery import group_vars_text, propose


def inventory_proposal(nodes, policies=None, probe_results=None, platform="kubernetes", cluster_name="", when=""):
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError("inventory_proposal takes the node objects as k8s_info returns them")
    facts = dict((found["node"], found["json"]["facts"]) for found in probe_results or []
                 if found.get("node") and isinstance(found.get("json"), dict) and "facts" in found["json"])
    proposal = propose(nodes, policies, facts, platform)
    proposal["text"] = group_vars_text(proposal, cluster_name, when)
    return proposal


class FilterModule(object):
    def filters(self):
        return {"inventory_proposal": inventory_proposal}
