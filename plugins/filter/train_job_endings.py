# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_job_endings
short_description: How each pod of a training run in a Job start mode ended
version_added: 0.1.0
description:
  - Gives, for each pod of an ended run (C(mlinfra.multinode.train_job_pods)), what C(mlinfra train status) gives
    in the exec start mode, so that one summary reads both - the node rank, seconds, run directory and port
    counters of the launcher's own last log line (a JSON status), the pod's state, exit code and reason from the
    API, the last 20 log lines, and the metrics of TorchTitan's lines (C(mlinfra.multinode.train_log_metrics)).
author:
  - mlinfra maintainers (@mlinfra)
positional: logs
options:
  _input:
    description: The run's pods, as C(mlinfra.multinode.train_job_pods) gives them.
    type: list
    elements: dict
    required: true
  logs:
    description: Each pod's log text by pod name; a pod that never started has none.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Know how each pod ended
  ansible.builtin.set_fact:
    train_status: "{{ train_job_pods | mlinfra.multinode.train_job_endings({'job-ok-0': log_text}) }}"
"""

RETURN = r"""
_value:
  description: One entry per pod, in the order of the input.
  type: list
  elements: dict
  contains:
    pod:
      description: The pod's name.
      type: str
    json:
      description: The pod's ending.
      type: dict
      contains:
        node_rank:
          description: Its node rank, from the launcher's status line, else the pod's index.
          type: int
        seconds:
          description: How long its torchrun ran, from the launcher's status line; null without one.
          type: float
        run_dir:
          description: Its run directory on the workspace; null without the launcher's status line.
          type: str
        port_counters:
          description:
            - What its RDMA ports moved during the run, by port (C(mlx5_0/1)); null without the launcher's status
              line.
          type: raw
        state:
          description: V(succeeded), V(failed) or V(running), from the API server.
          type: str
        exit_code:
          description: The trainer container's exit code; null before it ended.
          type: int
        error:
          description: The reason and message of a pod that did not succeed; null otherwise.
          type: str
        log_tail:
          description: The last 20 lines of its log.
          type: list
          elements: str
        metrics:
          description: The figures of the latest TorchTitan metrics line; null without one. A figure the line lacks is null.
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
              description: Model FLOPS utilisation as a fraction.
              type: float
            memory_gib:
              description: GPU memory in use, GiB.
              type: float
        first_loss:
          description: The first loss logged; null without one.
          type: float
        latest_loss:
          description: The latest loss logged; null without one.
          type: float
        steps_logged:
          description: How many metrics lines the log has.
          type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.train_jobs import pod_endings


def train_job_endings(pods, logs):
    if not isinstance(pods, list) or not all(isinstance(pod, dict) and "pod" in pod for pod in pods):
        raise AnsibleFilterError("train_job_endings takes the run's pods as train_job_pods gives them")
    if not isinstance(logs, dict):
        raise AnsibleFilterError("train_job_endings takes each pod's log text by pod name, got %s"
                                 % type(logs).__name__)
    return pod_endings(pods, logs)


class FilterModule(object):
    def filters(self):
        return {"train_job_endings": train_job_endings}
