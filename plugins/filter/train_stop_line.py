# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_stop_line
short_description: What stopping the current training run in each pod did, in one line
version_added: 0.1.0
description:
  - Says which pods' runs were stopped, and for the others that there was nothing to stop (the run had already ended,
    with its state, or none had started), or that a pod did not answer; with nothing stopped anywhere the line starts
    with C(nothing to stop).
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: Each pod's C(mlinfra train stop) exec, as C(pods_exec) returns it (RV(pods) with C(json)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Say what was stopped
  ansible.builtin.debug:
    msg: "{{ stopped.pods | mlinfra.multinode.train_stop_line }}"
"""

RETURN = r"""
_value:
  description: The line, for example C(nothing to stop - no run was going; already ended in h-kim-0 (run r1 had
    succeeded)) (with a colon for the dash).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.train.summary import stop_line


def train_stop_line(pods):
    if not isinstance(pods, list) or not all(isinstance(item, dict) for item in pods):
        raise AnsibleFilterError("train_stop_line takes pods_exec's pods, a list of mappings")
    return stop_line(pods)


class FilterModule(object):
    def filters(self):
        return {"train_stop_line": train_stop_line}
