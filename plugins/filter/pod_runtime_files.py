# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pod_runtime_files
short_description: The files of the collection that the pods run, found from the code's own imports
version_added: 0.1.0
description:
  - Every program of C(files/bin) (the in-pod entry points), every C(plugins/module_utils) file they import, directly
    or through one another (read from the code, not from a list), and the demo workload's files of C(files/train).
    The autodetect role ships exactly these in its ConfigMaps, which the image build copies too.
  - Fails naming a module that the pods' code imports but the collection lacks.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: The collection's root directory on the controller (C(role_path ~ '/../..') in a role).
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Know what the pods run
  ansible.builtin.set_fact:
    runtime: "{{ (role_path ~ '/../..') | mlinfra.multinode.pod_runtime_files }}"
"""

RETURN = r"""
_value:
  description: The paths, by the ConfigMap that carries them.
  type: dict
  contains:
    code:
      description: The C(plugins/module_utils) files the programs import, sorted by name.
      type: list
      elements: path
    bin:
      description: The programs of C(files/bin).
      type: list
      elements: path
    train:
      description: The demo workload's files (C(files/train)).
      type: list
      elements: path
"""

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_runtime import runtime_files


def pod_runtime_files(root):
    if not isinstance(root, str) or not os.path.isdir(os.path.join(root, "plugins", "module_utils")):
        raise AnsibleFilterError("pod_runtime_files takes the collection's root directory, got %r" % (root,))
    try:
        return runtime_files(os.path.normpath(root))
    except (OSError, SyntaxError, ValueError) as error:
        raise AnsibleFilterError("pod_runtime_files: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"pod_runtime_files": pod_runtime_files}
