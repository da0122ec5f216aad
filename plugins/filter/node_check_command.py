# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: node_check_command
short_description: The command that runs the node checks in a probe pod, or in a training pod
version_added: 0.1.0
description:
  - The argument list (no shell reads it) that runs C(mlinfra node-check) with the inventory's expectations - JSON
    out, never a failing exit (the controller judges), the network mode, the GPUs (at least O(settings.gpus) on a
    node, exactly that many in a pod), the MTU, the RDMA devices the inventory names, GPUDirect RDMA, a link rate,
    NCCL's traffic class.
author:
  - mlinfra maintainers (@mlinfra)
positional: in_pod
options:
  _input:
    description:
      - C(network_mode), C(gpus), C(mtu), C(rdma_devices) (how many NICs the inventory names), C(require_gpudirect),
        C(min_link_rate_gbps) (0 - none), C(nccl_ib_tc) (null - NCCL's).
    type: dict
    required: true
  in_pod:
    description: For a training pod (C(--in-pod) - what the pod sees, its GPUs exactly) rather than a node's probe.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Run the checks in every training pod
  mlinfra.multinode.pods_exec:
    namespace: ml
    label_selectors: [app.kubernetes.io/name=h-kim]
    command: >-
      {{ {'network_mode': 'rdma', 'gpus': 8, 'mtu': 9000, 'rdma_devices': 8}
         | mlinfra.multinode.node_check_command(in_pod=true) }}
"""

RETURN = r"""
_value:
  description: The command, as an argument list.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.cli import check_command


def node_check_command(settings, in_pod=False):
    missing = [name for name in ("network_mode", "gpus", "mtu")
               if not isinstance(settings, dict) or name not in settings]
    if missing:
        raise AnsibleFilterError("node_check_command needs the settings %s" % ", ".join(missing))
    return check_command(settings, bool(in_pod))


class FilterModule(object):
    def filters(self):
        return {"node_check_command": node_check_command}
