# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: text_table
short_description: Rows as the lines of a plain text table with aligned columns
version_added: 0.1.0
description:
  - Turns a header and rows (lists of cells) into lines whose columns line up, for a report an operator reads in
    the output of a play (C(status.yml)). Cells are shown as text; null is shown as C(-).
author:
  - mlinfra maintainers (@mlinfra)
positional: header
options:
  _input:
    description: The rows, each a list of cells.
    type: list
    elements: list
    required: true
  header:
    description: The column titles; every row must have as many cells.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Show the pods
  ansible.builtin.debug:
    msg: "{{ [['h-kim-0', 'node-a'], ['h-kim-1', 'node-b']] | mlinfra.multinode.text_table(['POD', 'NODE']) }}"
"""

RETURN = r"""
_value:
  description: The header line, then one line per row.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.text_table import format_table


def text_table(rows, header):
    if not isinstance(rows, list) or not isinstance(header, list):
        raise AnsibleFilterError("text_table takes a list of rows and a list of column titles")
    try:
        return format_table(rows, header)
    except ValueError as error:
        raise AnsibleFilterError("text_table: %s" % error)


class FilterModule(object):
    def filters(self):
        return {"text_table": text_table}
