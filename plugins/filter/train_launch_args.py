# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_launch_args
short_description: The arguments every pod's launcher (mlinfra train start) is given for a training run
version_added: 0.1.0
description:
  - The number of nodes (the StatefulSet's running pods in the exec start mode, C(replicas) in a Job mode), the
    processes per pod, the rendezvous (pod 0's node with host networking in the exec start mode, unless
    C(train_rdzv_host)), the workload - TorchTitan with its config and C(--override) for each shortcut that is set,
    float8's converters and C(train_overrides), which win; a script; the demo - and after C(--) C(train_args) and,
    for the demo, the shortcuts it reads as its own arguments (C(--steps), C(--batch-size), C(--seq-len)), last so
    that they win.
author:
  - mlinfra maintainers (@mlinfra)
positional: pods, pod0_node
options:
  _input:
    description:
      - The train role's C(train_*) variables by name, with C(replicas) and C(cluster_host_network).
    type: dict
    required: true
  pods:
    description: The StatefulSet's pods of an exec-mode run (their count is the number of nodes).
    type: list
    elements: str
    default: []
  pod0_node:
    description: The node pod 0 runs on (the rendezvous host with host networking in the exec start mode).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Know what the launcher is given
  ansible.builtin.set_fact:
    launch_args: >-
      {{ {'train_start_mode': 'exec', 'replicas': 2, 'train_nproc_per_pod': 8, 'train_rdzv_port': 29500,
          'train_workload': 'demo', 'train_steps': 100} | mlinfra.multinode.train_launch_args(['h-kim-0', 'h-kim-1']) }}
"""

RETURN = r"""
_value:
  description: The launcher's arguments, as a list (no shell reads them).
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import Refused
from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.train_jobs import launch_args

NEEDED = ("train_start_mode", "replicas", "train_nproc_per_pod", "train_rdzv_port", "train_workload")


def train_launch_args(settings, pods=None, pod0_node=""):
    missing = [name for name in NEEDED if not isinstance(settings, dict) or name not in settings]
    if missing:
        raise AnsibleFilterError("train_launch_args needs %s" % ", ".join(missing))
    try:
        return launch_args(settings, list(pods or []), pod0_node or "")
    except (Refused, KeyError, ValueError) as error:
        raise AnsibleFilterError("train_launch_args: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"train_launch_args": train_launch_args}
