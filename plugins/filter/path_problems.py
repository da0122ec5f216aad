# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: path_problems
short_description: Why the controller's files and directories a play uses cannot be used
version_added: 0.1.0
description:
  - Reads what C(ansible.builtin.stat) saw of each path a play will write its results to (a directory) or read
    (a file, such as a saved baseline) and returns one message per path that cannot be used, naming the variable
    and the fix; empty when every path can be used.
  - A directory that does not exist is not a problem in check mode, where it is not made. A file to read given
    as a number is not a path (a baseline may be a throughput) and is left out.
author:
  - mlinfra maintainers (@mlinfra)
positional: check_mode
options:
  _input:
    description: The C(results) of C(ansible.builtin.stat) looped over entries C({variable, path, write}), each
      result's C(item) the entry.
    type: list
    elements: dict
    required: true
  check_mode:
    description: Whether the play runs in check mode.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse paths that cannot be used
  ansible.builtin.fail:
    msg: "{{ problems | join('; ') }}"
  vars:
    problems: "{{ seen.results | mlinfra.multinode.path_problems(ansible_check_mode) }}"
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: One message per path that cannot be used.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def _is_number(value):
    try:
        float(value)
        return not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


def path_problems(results, check_mode=False):
    if not isinstance(results, list):
        raise AnsibleFilterError("path_problems takes the results of a stat loop, got %s" % type(results).__name__)
    problems = []
    for result in results:
        entry, stat = result.get("item") or {}, result.get("stat") or {}
        variable, path = entry.get("variable"), entry.get("path")
        if entry.get("write"):
            usable = stat.get("exists") and stat.get("isdir") and stat.get("writeable")
            if usable or check_mode and not stat.get("exists"):
                continue
            problems.append("%s %s is not a directory this controller can write; fix: -e %s=DIR, a directory you "
                            "can write (the results would be lost at the end)" % (variable, path, variable))
        elif _is_number(path):
            # A baseline given as a throughput, not as a file.
            continue
        elif not (stat.get("exists") and stat.get("isreg") and stat.get("readable")):
            problems.append("%s %s is not a file this controller can read; fix: the path of a baseline saved earlier "
                            "(save_baseline), or leave %s empty" % (variable, path, variable))
    return problems


class FilterModule(object):
    def filters(self):
        return {"path_problems": path_problems}
