# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: checked_settings
short_description: The collection's inventory variables, converted and checked
version_added: 0.1.0
description:
  - Converts each variable the collection knows as Ansible converts it (a boolean given as C(false), C(no), C(off)
    or C(0) in any case is false) and checks its range and format (MTU, ports, Kubernetes quantities with their unit,
    DNS names, label keys, image references, NCCL variable names), then the settings against each other (RDMA NICs
    in tcp mode, host networking with SR-IOV NICs, more replicas than nodes, a namespace of the platform itself).
  - Variables the collection does not know are passed over. Nothing is contacted; the cluster role runs this first in
    every playbook, before anything changes.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: Variable names and their values, as Ansible sees them (extra variables as the strings typed).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Convert and check the variables
  vars:
    names: "{{ query('ansible.builtin.varnames', '^(cluster|sriov|image|train)_') }}"
  ansible.builtin.set_fact:
    settings: "{{ dict(names | zip(query('ansible.builtin.vars', *names))) | mlinfra.multinode.checked_settings }}"
"""

RETURN = r"""
_value:
  description: The converted values and what was refused.
  type: dict
  contains:
    values:
      description: A mapping of each known variable that converted, by name, to its typed value.
      type: raw
    errors:
      description: One entry per refusal.
      type: list
      elements: dict
      contains:
        variable:
          description: The variable's name.
          type: str
        value:
          description: The value as it was given.
          type: raw
        problem:
          description: What is wrong, starting with the variable's name.
          type: str
        fix:
          description: What to give instead.
          type: str
        message:
          description: The problem, the value and the fix in one line, for example
            C(cluster_rdma_mtu is out of range (got -5); fix - give a number from 1280 to 9216) (a colon for the dash).
          type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import check_settings


def checked_settings(variables):
    if not isinstance(variables, dict):
        raise AnsibleFilterError("checked_settings takes a mapping of variable names to values")
    return check_settings(variables)


class FilterModule(object):
    def filters(self):
        return {"checked_settings": checked_settings}
