# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: network_manifests
short_description: The sriov role's objects of each RDMA NIC (SR-IOV policies and networks, or attachments), as data
version_added: 0.1.0
description:
  - Builds the objects the sriov role applies for the NICs of C(cluster_rdma_nics) - with
    C(cluster_rdma_network_type=sriov) a SriovNetworkNodePolicy per NIC (unless C(sriov_create_policies) is false)
    and then a SriovNetwork per NIC; with V(host-device), V(macvlan) or V(ipoib) a NetworkAttachmentDefinition per
    NIC.
  - Each value of the settings becomes the value of one field (a CNI configuration is JSON text made from data);
    nothing is templated as YAML text, so no value can add a field.
  - The settings are those the cluster role's C(mlinfra.multinode.checked_settings) and the sriov role's
    C(validate) tasks have checked; booleans are read again as Ansible reads them. Whether anything is attached
    at all (not in tcp mode, nor with host networking) the role decides.
author:
  - mlinfra maintainers (@mlinfra)
positional: ipam
options:
  _input:
    description: The settings, by their inventory names (docs/inventory.md has each with its default).
    type: dict
    required: true
    suboptions:
      cluster_name:
        description: The cluster's name, the objects' C(app.kubernetes.io/part-of) label.
        type: str
        required: true
      cluster_namespace:
        description: The namespace of the attachments, and the network namespace of the SriovNetworks.
        type: str
        required: true
      cluster_rdma_network_type:
        description: Which objects attach the NICs.
        type: str
        choices: [sriov, host-device, macvlan, ipoib]
        required: true
      cluster_rdma_nics:
        description: The RDMA NICs (C(name), C(resource), C(pf)).
        type: list
        elements: dict
        required: true
      cluster_rdma_mtu:
        description: The MTU of the VFs (policies) and of macvlan attachments.
        type: int
        required: true
      sriov_operator_namespace:
        description: The SR-IOV operator's namespace, of the policies and SriovNetworks (V(sriov) only).
        type: str
      sriov_create_policies:
        description: Whether to make a SriovNetworkNodePolicy per NIC (V(sriov) only).
        type: bool
      sriov_nic_vendor:
        description: The NICs' PCI vendor id (policies).
        type: str
      sriov_nic_device_id:
        description: The NICs' PCI device id (policies); empty for any.
        type: str
      sriov_node_selector:
        description: The policies' node selector; empty for C(sriov_node_label=true).
        type: dict
      sriov_node_label:
        description: The label the sriov role gives the nodes of C(cluster_gpu_nodes).
        type: str
      sriov_num_vfs:
        description: VFs per NIC (policies).
        type: int
      sriov_device_type:
        description: The VFs' driver (policies).
        type: str
      sriov_is_rdma:
        description: Whether the VFs are RDMA devices (policies).
        type: bool
  ipam:
    description: Each NIC's IPAM configuration by its name (the C(mlinfra.multinode.rdma_ipam) filter's result).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Render the SR-IOV policies and networks, or the NetworkAttachmentDefinitions
  ansible.builtin.set_fact:
    sriov_manifests: "{{ sriov_settings | mlinfra.multinode.network_manifests(sriov_ipam) }}"
"""

RETURN = r"""
_value:
  description: The objects, in the order they are applied (every policy before the first SriovNetwork).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import Refused
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.network_manifests import (
    NetworkManifestError, network_manifests as build)


def network_manifests(settings, ipam):
    if not isinstance(settings, dict) or not isinstance(ipam, dict):
        raise AnsibleFilterError("network_manifests takes a mapping of the settings and one of each NIC's IPAM")
    try:
        return build(settings, ipam)
    except KeyError as exc:
        raise AnsibleFilterError("network_manifests needs the setting %s" % exc)
    except NetworkManifestError as exc:
        raise AnsibleFilterError("network_manifests: %s" % exc)
    except Refused as exc:
        raise AnsibleFilterError("network_manifests: %s; fix: %s" % (exc, exc.fix))


class FilterModule(object):
    def filters(self):
        return {"network_manifests": network_manifests}
