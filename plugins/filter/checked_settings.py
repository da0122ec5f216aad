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
  - With O(names), every variable name the play sees is checked too - one that looks meant for the collection (a
    role's prefix such as C(verify_), or close to a short name such as C(replicas)) but that no role or playbook of
    the collection defines is refused with the nearest known name (C(did you mean verify_bench_pairwise?)), unless
    C(cluster_allow_unknown_settings) is true; and each variable the cluster role requires that is not set is named.
    The known names are read from the collection's own roles and playbooks.
  - Nothing is contacted; the cluster role runs this first in every playbook, before anything changes.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: Variable names and their values, as Ansible sees them (extra variables as the strings typed).
    type: dict
    required: true
  names:
    description: Every variable name the play sees (C(query('ansible.builtin.varnames', '.+'))); omitted, names are not
      checked.
    type: list
    elements: str
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
    given:
      description: The names given with C(-e) to ansible-playbook (only with O(names)).
      type: list
      elements: str
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

import functools
import glob
import os

import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.inventory_settings import SETTINGS, check_settings

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load(path):
    with open(path) as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


def _defined(node, found):
    """Every name a task or play defines: set_fact keys, registered
    results, vars and loop variables."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.set_fact", "set_fact", "vars") and isinstance(value, dict):
                found.update(value)
            elif key == "register" and isinstance(value, str):
                found.add(value)
            elif key == "loop_control" and isinstance(value, dict) and "loop_var" in value:
                found.add(value["loop_var"])
            _defined(value, found)
    elif isinstance(node, list):
        for item in node:
            _defined(item, found)


@functools.lru_cache(maxsize=1)
def collection_names(root=_ROOT):
    """{"known", "offered", "required", "defaults"}: read from the
    collection's own roles and playbooks (argument specs, defaults, vars, the
    names tasks define), so a new variable is known where it is defined;
    "defaults": the roles' literal defaults of the settings."""
    offered, known, required, defaults = set(SETTINGS), set(SETTINGS), [], {}
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        for entry, spec in (_load(path).get("argument_specs") or {}).items():
            options = spec.get("options") or {}
            offered.update(options)
            if (role, entry) == ("cluster", "main"):
                required = sorted(name for name, option in options.items() if option.get("required"))
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "defaults", "main.yml"))):
        role_defaults = _load(path)
        offered.update(role_defaults)
        # A default Jinja computes (a path below playbook_dir) is the role's to give.
        defaults.update((name, value) for name, value in role_defaults.items()
                        if name in SETTINGS and "{{" not in repr(value))
    for path in glob.glob(os.path.join(root, "roles", "*", "vars", "main.yml")):
        known.update(_load(path))
    for path in (glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml"))
                 + glob.glob(os.path.join(root, "playbooks", "*.yml"))):
        _defined(_load(path), known)
    return {"known": frozenset(known | offered), "offered": frozenset(offered), "required": tuple(required),
            "defaults": defaults}


# Read when the filter is loaded: the playbook's controller loads every
# filter at its start (the preload_filters callback), so its task workers
# inherit the names instead of reading the files again.
try:
    collection_names()
except (OSError, yaml.YAMLError):  # read again, and said, when the filter is used
    pass


def given_names():
    """The names given with -e (or -e @file) to this ansible-playbook."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.utils.vars import load_extra_vars
    try:
        return sorted(load_extra_vars(DataLoader()))
    except Exception:  # pylint: disable=broad-except
        # Not run by the CLI (a test calling the filter): nothing given.
        return []


def checked_settings(variables, names=None):
    if not isinstance(variables, dict):
        raise AnsibleFilterError("checked_settings takes a mapping of variable names to values")
    if names is None:
        return check_settings(variables)
    given = given_names()
    checked = check_settings(variables, list(names), collection_names(), given)
    checked["given"] = given
    return checked


class FilterModule(object):
    def filters(self):
        return {"checked_settings": checked_settings}
