# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: workload_manifests
short_description: The statefulset role's objects (namespace, RBAC, headless Service, claims, StatefulSet), as data
version_added: 0.1.0
description:
  - Builds the objects the statefulset role applies from the inventory's settings - the Namespace, the
    ServiceAccount, on OpenShift the IPC_LOCK SCC (C(cluster_security_mode=ipc_lock)) and the ClusterRole and
    RoleBinding that let the account use the pods' SCC, the headless Service of the rendezvous, the shared
    workspace claim (C(cluster_storage_mode=shared)) and the StatefulSet.
  - Each value of the settings becomes the value of one field of an object; nothing is templated as YAML text, so
    no value (a storage class holding a line break, say) can add a field.
  - The settings are those the cluster role's C(mlinfra.multinode.checked_settings) has checked; booleans are read
    again as Ansible reads them (C(true), C("false"), C(yes), ...).
author:
  - mlinfra maintainers (@mlinfra)
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
        description: The namespace of the objects.
        type: str
        required: true
      cluster_app_name:
        description: The StatefulSet's name; the other objects' names are derived from it.
        type: str
        required: true
      cluster_platform:
        description: V(openshift) adds the SCC access of the pods' service account.
        type: str
        choices: [openshift, kubernetes]
        required: true
      cluster_security_mode:
        description: A privileged trainer container, or one with the IPC_LOCK capability.
        type: str
        choices: [privileged, ipc_lock]
        required: true
      cluster_network_mode:
        description: V(rdma) attaches the RDMA NICs (unless host networking) and the shared RDMA device.
        type: str
        choices: [rdma, tcp]
        required: true
      cluster_host_network:
        description: The pods use the node's network and its C(/dev/infiniband).
        type: bool
        required: true
      cluster_rdma_nics:
        description: The RDMA NICs each pod gets (C(name), C(resource), optional C(netdev)).
        type: list
        elements: dict
        required: true
      cluster_rdma_shared_resource:
        description: A shared RDMA device resource each pod requests in V(rdma) mode; empty for none.
        type: str
        required: true
      cluster_gpus_per_node:
        description: GPUs each pod requests.
        type: int
        required: true
      cluster_gpu_nodes:
        description: The nodes the pods may run on; empty when O(_input.cluster_gpu_node_selector) chooses them.
        type: list
        elements: str
        required: true
      cluster_gpu_node_selector:
        description: With no O(_input.cluster_gpu_nodes) (manifests written without a cluster), the label selector
          that selects the nodes instead.
        type: str
        default: ""
      cluster_nccl_env_overrides:
        description: NCCL variables passed to the autodetect init container as C(--set=NAME=VALUE).
        type: dict
        required: true
      cluster_image:
        description: The image of both containers.
        type: str
        required: true
      cluster_image_pull_policy:
        description: Their pull policy.
        type: str
        required: true
      cluster_node_tolerations:
        description: The pods' tolerations.
        type: list
        elements: dict
        required: true
      cluster_pod_cpu:
        description: CPU the trainer container requests.
        type: str
        required: true
      cluster_pod_memory:
        description: Memory the trainer container requests.
        type: str
        required: true
      cluster_shm_size:
        description: Size of the memory-backed C(/dev/shm).
        type: str
        required: true
      cluster_storage_mode:
        description: One shared claim, or a claim per pod (the StatefulSet's claim template).
        type: str
        choices: [per-pod, shared]
        required: true
      cluster_storage_class:
        description: The claims' storage class; empty for the cluster's default.
        type: str
        required: true
      cluster_storage_size:
        description: The size of each claim.
        type: str
        required: true
      cluster_shared_claim_name:
        description: The shared claim's name; empty for C(<cluster_app_name>-workspace).
        type: str
        required: true
      replicas:
        description: The StatefulSet's pods.
        type: int
        required: true
      statefulset_rendezvous_port:
        description: The rendezvous port (Service and container port, C(MASTER_PORT)).
        type: int
        required: true
      statefulset_require_verified_nodes:
        description: Only nodes labelled C(mlinfra.io/rdma-verified=true) by verify-rdma.yml.
        type: bool
        required: true
      statefulset_run_dir:
        description: The pods' directory of C(nccl.env) and C(nccl.json) (the statefulset role's vars).
        type: str
        required: true
"""

EXAMPLES = r"""
- name: Render the StatefulSet's manifests
  ansible.builtin.set_fact:
    statefulset_manifests: "{{ statefulset_settings | mlinfra.multinode.workload_manifests }}"
"""

RETURN = r"""
_value:
  description: The objects, by the step that applies them.
  type: dict
  contains:
    base:
      description: Namespace, ServiceAccount, the SCC and RBAC objects (OpenShift) and the headless Service, in order.
      type: list
      elements: dict
    claims:
      description: The shared workspace claim (C(cluster_storage_mode=shared)), else empty.
      type: list
      elements: dict
    statefulset:
      description: The StatefulSet.
      type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import Refused
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import workload_manifests as build


def workload_manifests(settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError("workload_manifests takes a mapping of the settings, got %s" % type(settings).__name__)
    try:
        return build(settings)
    except KeyError as exc:
        raise AnsibleFilterError("workload_manifests needs the setting %s" % exc)
    except Refused as exc:
        raise AnsibleFilterError("workload_manifests: %s; fix: %s" % (exc, exc.fix))


class FilterModule(object):
    def filters(self):
        return {"workload_manifests": workload_manifests}
