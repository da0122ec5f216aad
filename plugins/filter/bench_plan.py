# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: bench_plan
short_description: Whether the collective benchmark may run across the training pods, and each pod's command
version_added: 0.1.0
description:
  - The pods the benchmark runs in (the StatefulSet's, by ordinal, which are torchrun's node ranks), why it may not
    run (check mode; nothing deployed; scaled to 0; one pod only, unless O(settings.single_pod); a pod not Running -
    every pod must run, or none does), and the command each pod runs - C(mlinfra pod-bench) with its options and,
    after C(--), those of C(mlinfra nccl-bench).
author:
  - mlinfra maintainers (@mlinfra)
positional: pods, settings
options:
  _input:
    description: The deployment's StatefulSet, as C(kubernetes.core.k8s_info) returns it (an empty list when none).
    type: list
    elements: dict
    required: true
  pods:
    description: The deployment's pods, as C(kubernetes.core.k8s_info) returns them.
    type: list
    elements: dict
    required: true
  settings:
    description:
      - C(app), C(namespace), C(check_mode), C(single_pod), and what the command takes - C(nproc_per_pod),
        C(port), C(network_mode), C(timeout), C(master_addr), C(require_gpudirect), C(ops), C(min_size),
        C(max_size), C(thresholds) (C(SIZE=GBPS)), C(pairwise), C(extra_args). The verify role passes its
        C(verify_bench_*) options.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Decide whether the benchmark can run
  ansible.builtin.set_fact:
    plan: >-
      {{ statefulsets.resources | mlinfra.multinode.bench_plan(pods.resources, {'app': 'h-kim', 'namespace': 'ml',
         'nproc_per_pod': 8, 'port': 29511, 'network_mode': 'rdma', 'timeout': 600, 'ops': ['all_reduce'],
         'min_size': '1M', 'max_size': '8G'}) }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    pods:
      description: The pods that run it, by ordinal.
      type: list
      elements: str
    blocker:
      description: Why it may not run; null when it may.
      type: str
    command:
      description: The command each pod runs, as an argument list (no shell reads it).
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.pod_bench import plan

NEEDED = ("app", "namespace", "nproc_per_pod", "port", "network_mode", "timeout", "ops", "min_size", "max_size")


def bench_plan(statefulsets, pods, settings):
    if not isinstance(statefulsets, list) or not isinstance(pods, list):
        raise AnsibleFilterError("bench_plan takes the StatefulSet and the pods as k8s_info returns them")
    missing = [name for name in NEEDED if not isinstance(settings, dict) or name not in settings]
    if missing:
        raise AnsibleFilterError("bench_plan needs the settings %s" % ", ".join(missing))
    return plan(statefulsets, pods, settings)


class FilterModule(object):
    def filters(self):
        return {"bench_plan": bench_plan}
