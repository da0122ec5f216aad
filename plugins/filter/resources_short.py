# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: resources_short
short_description: The resources a node offers fewer of than a pod asks for
version_added: 0.1.0
description:
  - Compares a node's C(status.allocatable) with the counts a pod requests and lists each resource the node
    lacks or has too few of, as C(name (wants N, has M)).
  - Whole numbers are compared as counts (GPUs, RDMA virtual functions); other wanted values as Kubernetes
    quantities (V(cpu) V(32) or V(500m), V(memory) V(256Gi)). A resource the node does not list counts as 0.
author:
  - mlinfra maintainers (@mlinfra)
positional: wanted
options:
  _input:
    description: The node's C(status.allocatable) mapping.
    type: dict
    required: true
  wanted:
    description: Resource name to the count or quantity one pod requests.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail when a node cannot host a pod
  ansible.builtin.assert:
    that: short | length == 0
    fail_msg: "node lacks {{ short | join(', ') }}"
  vars:
    short: "{{ node.status.allocatable | mlinfra.multinode.resources_short({'nvidia.com/gpu': 4}) }}"
"""

RETURN = r"""
_value:
  description: One entry per short resource, for example V(nvidia.com/gpu (wants 4, has 2)); empty when none.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.mlinfra.multinode.plugins.module_utils.quantity import parse_quantity


def _count(value):
    text = str(value).strip()
    if not text.isdigit():
        return None
    return int(text)


def resources_short(allocatable, wanted):
    if not isinstance(allocatable, dict) or not isinstance(wanted, dict):
        raise AnsibleFilterError("resources_short takes the node's allocatable mapping and a mapping of wanted "
                                 "counts, got %s and %s" % (type(allocatable).__name__, type(wanted).__name__))
    short = []
    for name in sorted(wanted):
        need = _count(wanted[name])
        if need is not None:
            have = _count(allocatable.get(name, 0))
            if need > 0 and (have or 0) < need:
                short.append("%s (wants %d, has %s)" % (name, need, allocatable.get(name, 0)))
            continue
        need = parse_quantity(wanted[name])
        if need is None:
            raise AnsibleFilterError("resources_short: wanted amount of %s must be a whole number or a Kubernetes "
                                     "quantity, got %r" % (name, wanted[name]))
        have = parse_quantity(allocatable.get(name, 0))
        if need > 0 and (have or 0) < need:
            short.append("%s (wants %s, has %s)" % (name, wanted[name], allocatable.get(name, 0)))
    return short


class FilterModule(object):
    def filters(self):
        return {"resources_short": resources_short}
