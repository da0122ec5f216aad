# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: unchangeable_settings
short_description: The settings a live StatefulSet cannot take
version_added: 0.1.0
description:
  - Compares the deployed StatefulSet, as the API returns it, with the one the inventory's settings build
    (C(mlinfra.multinode.workload_manifests)), and lists each setting whose change Kubernetes would refuse on a
    live StatefulSet - its workspace claim templates - C(cluster_storage_mode), C(cluster_storage_class) and
    C(cluster_storage_size).
  - deploy.yml reads it before anything is changed, so that such a change is refused with the variable and the fix
    instead of failing half-way with the API server's 422.
author:
  - mlinfra maintainers (@mlinfra)
positional: wanted
options:
  _input:
    description: The deployed StatefulSet.
    type: dict
    required: true
  wanted:
    description: The StatefulSet the settings build.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Refuse what the live StatefulSet cannot take
  ansible.builtin.fail:
    msg: "{{ conflicts | map(attribute='message') | join('; ') }}"
  vars:
    conflicts: "{{ live.resources[0] | mlinfra.multinode.unchangeable_settings(statefulset_manifests.statefulset) }}"
  when: conflicts | length > 0
"""

RETURN = r"""
_value:
  description: One entry per setting; empty when the deployed StatefulSet can be updated to the wanted one.
  type: list
  elements: dict
  contains:
    variable:
      description: The inventory variable.
      type: str
    live:
      description: Its value in the deployed StatefulSet.
      type: str
    wanted:
      description: Its value now.
      type: str
    message:
      description: What to tell the user, with the fix.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.statefulset_manifests import unchangeable_settings


def _unchangeable_settings(live, wanted):
    if not isinstance(live, dict) or not isinstance(wanted, dict):
        raise AnsibleFilterError("unchangeable_settings takes the deployed StatefulSet and the wanted one, got %s and %s"
                                 % (type(live).__name__, type(wanted).__name__))
    return unchangeable_settings(live, wanted)


class FilterModule(object):
    def filters(self):
        return {"unchangeable_settings": _unchangeable_settings}
