# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_summary_line
short_description: The line a successful training run ends with
version_added: 0.1.0
description:
  - Says where a run ran (pods x processes), its throughput and MFU as C(throughput_report) read them from rank 0's
    log, how the loss moved on rank 0 (first and latest loss, and the step reached), whether the run is degraded
    against its baseline, and where its logs are. A figure the logs did not give is said to be missing.
author:
  - mlinfra maintainers (@mlinfra)
positional: run_id, pods, nproc_per_pod, statuses, baseline, logs_dir
options:
  _input:
    description: C(throughput_report)'s entry for rank 0's log (RV(runs[0]) of that module).
    type: dict
    required: true
  run_id:
    description: The run's id.
    type: str
    required: true
  pods:
    description: The run's pods, rank 0's first.
    type: list
    elements: str
    required: true
  nproc_per_pod:
    description: Processes per pod.
    type: int
    required: true
  statuses:
    description: Each pod's status as C(mlinfra train status) reports it (C(first_loss), C(latest_loss),
      C(metrics.step)), rank 0's first; entries that are not mappings (a pod that did not answer) are passed over.
    type: list
    elements: raw
    required: true
  baseline:
    description: C(throughput_report)'s RV(baseline) mapping.
    type: dict
    required: true
  logs_dir:
    description: The directory the run's logs and summary were written to.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Report the run
  ansible.builtin.debug:
    msg: >-
      {{ report.runs[0] | mlinfra.multinode.train_summary_line(run_id, pods, 1, statuses, report.baseline,
         logs_dir) }}
"""

RETURN = r"""
_value:
  description: The line, for example C(run demo succeeded on 2 pod(s) x 1 process(es) - 13740.0 tokens/s;
    loss 5.5488 -> 3.0886 over 30 steps; not degraded; logs and summary - DIR/) (with colons for the dashes).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.train.summary import summary_line


def train_summary_line(run, run_id, pods, nproc_per_pod, statuses, baseline, logs_dir):
    if not isinstance(run, dict) or not isinstance(pods, list) or not isinstance(statuses, list):
        raise AnsibleFilterError("train_summary_line takes throughput_report's run entry, the pods and their statuses")
    return summary_line(run_id, pods, nproc_per_pod, run, statuses, baseline, logs_dir)


class FilterModule(object):
    def filters(self):
        return {"train_summary_line": train_summary_line}
