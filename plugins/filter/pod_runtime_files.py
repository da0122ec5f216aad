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
  - The pods' one program (C(files/bin/mlinfra)), every C(plugins/module_utils) file it imports, directly or through
    one another (read from the code, not from a list), and the demo workload's files of C(files/train). The
    autodetect role ships exactly these in its ConfigMaps, which the pods mount and the image build copies.
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
  description:
    - For each ConfigMap the autodetect role makes (its name after the app's), its keys and the file each holds.
    - Found once per process (a playbook's controller finds them when it loads its filters).
  type: dict
  contains:
    pod-runtime:
      description:
        - The C(plugins/module_utils) files the program imports, each by its key - its path below C(module_utils)
          with dots for slashes (C(node.cli.py)), as a ConfigMap key cannot hold a slash; a mapping of key to path.
      type: raw
    programs:
      description: The program of C(files/bin), C(mlinfra); a mapping of name to path.
      type: raw
    train-assets:
      description: The demo workload's files (C(files/train)); a mapping of name to path.
      type: raw
"""

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.pod_runtime import runtime_files

_ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
# What each root gave, read once per process: the playbook's controller
# loads every filter at its start (the preload_filters callback), so its
# task workers inherit this collection's answer instead of parsing the code
# again in every task that ships it.
_FOUND = {}


def _found(root):
    if root not in _FOUND:
        _FOUND[root] = runtime_files(root)
    return _FOUND[root]


try:
    _found(_ROOT)
except (OSError, SyntaxError, ValueError):  # found again, and said, when the filter is used
    pass


def pod_runtime_files(root):
    if not isinstance(root, str) or not os.path.isdir(os.path.join(root, "plugins", "module_utils")):
        raise AnsibleFilterError("pod_runtime_files takes the collection's root directory, got %r" % (root,))
    try:
        return _found(os.path.realpath(root))
    except (OSError, SyntaxError, ValueError) as error:
        raise AnsibleFilterError("pod_runtime_files: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"pod_runtime_files": pod_runtime_files}
