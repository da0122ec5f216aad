# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nccl_agreement
short_description: Whether the pods of one job detected the same NCCL setting where they must
version_added: 0.1.0
description:
  - Compares the results of C(mlinfra autodetect) (the C(nccl.json) its init container writes in every pod, the
    same result the M(mlinfra.multinode.nccl_env) module returns) across the pods of one job.
  - The transport, the number of usable RDMA ports (NCCL's rails) and the number of GPUs must be the same in every
    pod, else ranks hang or crawl; a difference there makes C(agree) false. A difference in GPUDirect RDMA or in
    the NCCL version only makes the job slower and is reported with level C(warn).
  - The value of the most pods is taken as the expected one; the other pods are named with their nodes.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: One entry per pod, C({pod, node, json}), C(json) being the parsed C(nccl.json) or null when it
      could not be read; the C(pods) that M(mlinfra.multinode.pods_exec) returns with O(mlinfra.multinode.pods_exec#module:parse_json=true).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail when pods disagree
  ansible.builtin.assert:
    that: agreement.agree
    fail_msg: "{{ agreement.mismatches | map(attribute='message') | list }}"
  vars:
    agreement: "{{ nccl_json_read.pods | mlinfra.multinode.nccl_agreement }}"
"""

RETURN = r"""
_value:
  description: The comparison.
  type: dict
  contains:
    agree:
      description: True when every pod's result was read and no C(fail) level field differs.
      type: bool
    mismatches:
      description: One entry per field that differs between the pods.
      type: list
      elements: dict
      contains:
        field:
          description: The field of the result that differs.
          type: str
          choices: [transport, rdma_ports, gpus, gpudirect, nccl_version]
        level:
          description: V(fail) for a field every pod must share (RV(agree) is then false), V(warn) for one that
            only makes the job slower.
          type: str
          choices: [fail, warn]
        expected:
          description: The value of the most pods (on a tie, the better one); for C(rdma_ports), the number of
            usable RDMA ports (0 over TCP).
          type: raw
        odd:
          description: The pods with another value, in pod ordinal order.
          type: list
          elements: dict
          contains:
            pod:
              description: Pod name.
              type: str
            node:
              description: The node it runs on.
              type: str
            value:
              description: Its value.
              type: raw
        message:
          description: One line naming the field, the expected value and every odd pod with its node and value.
          type: str
    unreadable:
      description: The pods whose result could not be read.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.nccl_env import compare_pod_results


def nccl_agreement(pods):
    if not isinstance(pods, list) or not all(isinstance(pod, dict) and "pod" in pod for pod in pods):
        raise AnsibleFilterError("nccl_agreement takes a list of {pod, node, json}, got %r" % (pods,))
    return compare_pod_results(pods)


class FilterModule(object):
    def filters(self):
        return {"nccl_agreement": nccl_agreement}
