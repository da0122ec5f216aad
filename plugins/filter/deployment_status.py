# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: deployment_status
short_description: What status.yml shows of a deployment, and the line it ends with
version_added: 0.1.0
description:
  - From the objects C(status.yml) reads, the lines it shows - the StatefulSet's headline (how many pods are Ready, or
    how to deploy it), a table of the pods (node, state, image, and the transport, RDMA ports, GPUs and GPUDirect each
    detected), the NCCL variables each pod set, the workspace claims, the privileged probe pods left behind, where the
    pods differ - and the one line it ends with.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description:
      - The API's answers, in this order - the StatefulSet of the app's name (a list of none or one), its pods, its
        workspace claims, the verify role's probe pods.
    type: list
    elements: list
    required: true
  namespace:
    description: The deployment's namespace.
    type: str
    required: true
  app:
    description: The deployment's app name.
    type: str
    required: true
  cluster:
    description: The inventory's cluster name (the fix of a deployment not made names it).
    type: str
    required: true
  detected:
    description: Each running pod's read-back of the autodetect role, C([{pod, json}]).
    type: list
    elements: dict
    default: []
  agreement:
    description: C(mlinfra.multinode.nccl_agreement) over C(detected); null when nothing was read.
    type: dict
"""

EXAMPLES = r"""
- name: Show the deployment
  ansible.builtin.debug:
    msg: >-
      {{ (status_objects.results | map(attribute='resources') | list
          | mlinfra.multinode.deployment_status(namespace=cluster_namespace, app=cluster_app_name,
                                                cluster=cluster_name)).lines }}
"""

RETURN = r"""
_value:
  description: What to show.
  type: dict
  contains:
    lines:
      description: The headline, the table, then the lines below it.
      type: list
      elements: str
    summary:
      description: The line status.yml ends with - the headline, where the pods differ, how many probe pods are left.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.deployment_status import deployment_status as build


def deployment_status(objects, namespace, app, cluster, detected=None, agreement=None):
    if not isinstance(objects, list) or len(objects) != 4 or not all(isinstance(found, list) for found in objects):
        raise AnsibleFilterError("deployment_status takes four lists: the StatefulSet, its pods, its claims and the "
                                 "probe pods, as k8s_info gives them")
    if not all(isinstance(entry, dict) and "pod" in entry for entry in detected or []):
        raise AnsibleFilterError("deployment_status: detected takes the autodetect role's [{pod, json}]")
    return build(namespace, app, cluster, *objects, detected=detected or [], agreement=agreement)


class FilterModule(object):
    def filters(self):
        return {"deployment_status": deployment_status}
