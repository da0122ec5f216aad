# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_log_metrics
short_description: The latest TorchTitan metrics of a training log's text
version_added: 0.1.0
description:
  - Reads TorchTitan's metrics lines (C(step ... loss ... tps ... mfu)) in a log's text with the parser of
    C(throughput_report) and gives the latest line's figures and the first and latest loss - what
    C(mlinfra train status) reports for a run directory, for a log read from the API server instead.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: The log's text.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Say how far pod 0 is
  ansible.builtin.debug:
    msg: "step {{ metrics.metrics.step }}, loss {{ metrics.metrics.loss }}"
  vars:
    metrics: "{{ pod_log.log | mlinfra.multinode.train_log_metrics }}"
  when: metrics.metrics is not none
"""

RETURN = r"""
_value:
  description: The latest figures and how the loss moved.
  type: dict
  contains:
    metrics:
      description: The figures of the latest metrics line; null when the log has no metrics line yet. A figure
        the line lacks is null.
      type: dict
      contains:
        step:
          description: Its step.
          type: int
        loss:
          description: Its loss.
          type: float
        tps:
          description: Tokens per second per GPU.
          type: float
        tflops:
          description: TFLOPS per GPU.
          type: float
        mfu:
          description: Model FLOPS utilisation as a fraction (TorchTitan's percentage divided by 100).
          type: float
        memory_gib:
          description: GPU memory in use, GiB.
          type: float
    first_loss:
      description: The loss of the first metrics line that has one; null when none has.
      type: float
    latest_loss:
      description: The loss of the latest metrics line that has one; null when none has.
      type: float
    steps_logged:
      description: How many metrics lines the log has.
      type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.train.run_status import text_metrics


def train_log_metrics(text):
    if not isinstance(text, str):
        raise AnsibleFilterError("train_log_metrics takes the log's text, got %s" % type(text).__name__)
    return text_metrics(text)


class FilterModule(object):
    def filters(self):
        return {"train_log_metrics": train_log_metrics}
