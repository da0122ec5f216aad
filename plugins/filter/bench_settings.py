# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: bench_settings
short_description: What is wrong with the settings of a collective benchmark run, before it starts
version_added: 0.1.0
description:
  - Checks the ops, message sizes and bus-bandwidth gates that the verify role passes to C(mlinfra nccl-bench) with
    the benchmark's own rules (the collection's C(collective_bench) code), so that a bad setting fails the play
    before a probe pod or a benchmark process is started, naming the setting and the fix.
  - Returns the list of problems; empty when the settings are good.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description:
      - The settings, a dict with C(ops) (list), C(min_size) and C(max_size) (sizes such as V(1M)), C(thresholds)
        (V(SIZE=GBPS) strings) and C(pairwise) (bool; the gates then apply to C(max_size) alone).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the benchmark settings
  vars:
    problems: >-
      {{ {'ops': verify_bench_ops, 'min_size': verify_bench_min_size, 'max_size': verify_bench_max_size,
          'thresholds': verify_bench_min_busbw, 'pairwise': false} | mlinfra.multinode.bench_settings }}
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}"
"""

RETURN = r"""
_value:
  description: One sentence per problem, naming the setting; empty when the settings are good.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.collective_bench import (
    OPS, check_thresholds_apply, parse_size, parse_thresholds, size_range)


def bench_settings(settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError("bench_settings takes a dict of settings, got %s" % type(settings).__name__)
    problems = []
    ops = settings.get("ops")
    if not isinstance(ops, list) or not ops or not all(isinstance(op, str) for op in ops):
        problems.append("ops %r: give a list of one or more of %s" % (ops, ", ".join(OPS)))
    else:
        problems.extend("op %r is not one of %s" % (op, ", ".join(OPS)) for op in ops if op not in OPS)
    sizes = {}
    for key in ("min_size", "max_size"):
        try:
            sizes[key] = parse_size(settings.get(key), option=key)
        except ValueError as exc:
            problems.append(str(exc))
    if len(sizes) == 2 and sizes["min_size"] > sizes["max_size"]:
        problems.append("min_size %s is above max_size %s: the smallest message size must not exceed the largest"
                        % (settings["min_size"], settings["max_size"]))
    thresholds = settings.get("thresholds") or []
    if not isinstance(thresholds, list):
        problems.append("thresholds %r: give a list of SIZE=GBPS strings, for example ['1G=194']" % (thresholds,))
        return problems
    try:
        parsed = parse_thresholds([str(value) for value in thresholds], option="gate")
    except ValueError as exc:
        problems.append(str(exc))
        return problems
    if len(sizes) == 2 and sizes["min_size"] <= sizes["max_size"]:
        measured = [sizes["max_size"]] if settings.get("pairwise") else size_range(sizes["min_size"], sizes["max_size"])
        try:
            check_thresholds_apply(parsed, measured, option="gate")
        except ValueError as exc:
            problems.append(str(exc))
    return problems


class FilterModule(object):
    def filters(self):
        return {"bench_settings": bench_settings}
