# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: probe_manifests
short_description: The verify role's probe objects (service account, SCC binding, a probe pod per node), as data
version_added: 0.1.0
description:
  - Builds the objects the verify role creates for the node checks - the probes' ServiceAccount, on OpenShift its
    RoleBinding to the privileged SCC, and a privileged pod per node of C(cluster_gpu_nodes), pinned to it by
    C(nodeName), with the host's C(/proc), C(/sys) and C(/dev) mounted read-only.
  - Each value of the settings becomes the value of one field; nothing is templated as YAML text, so no value can
    add a field.
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
        description: The deployment's name; the probes are named C(<cluster_app_name>-probe[-N]).
        type: str
        required: true
      cluster_platform:
        description: V(openshift) adds the binding to the privileged SCC.
        type: str
        choices: [openshift, kubernetes]
        required: true
      cluster_gpu_nodes:
        description: The nodes to probe, one pod each, named by their position here.
        type: list
        elements: str
        required: true
      cluster_image_pull_policy:
        description: The probes' pull policy.
        type: str
        required: true
      verify_probe_image:
        description: The probes' image.
        type: str
        required: true
      verify_probe_timeout:
        description: Seconds a probe may take to start; a probe ends by itself 600 seconds after that.
        type: int
        required: true
      stay_seconds:
        description:
          - How much longer the probes live when they stay for a benchmark or a soak, to read the nodes' port
            counters before and after each run. Not an inventory variable.
        type: int
        default: 0
"""

EXAMPLES = r"""
- name: Start a probe pod on each GPU node
  kubernetes.core.k8s:
    state: present
    definition: "{{ verify_probe_settings | mlinfra.multinode.probe_manifests }}"
"""

RETURN = r"""
_value:
  description: The objects, in the order they are applied (the ServiceAccount first).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.probe_manifests import probe_manifests as build


def probe_manifests(settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError("probe_manifests takes a mapping of the settings, got %s" % type(settings).__name__)
    try:
        return build(settings)
    except KeyError as exc:
        raise AnsibleFilterError("probe_manifests needs the setting %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"probe_manifests": probe_manifests}
