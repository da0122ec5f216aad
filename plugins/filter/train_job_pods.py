# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_job_pods
short_description: The pods of a training run in a Job start mode, by node index, with how each ended
version_added: 0.1.0
description:
  - Reads the pods of a run (as C(kubernetes.core.k8s_info) returns them) and gives, in node-index order, each
    pod's name, index, phase, state (V(running), V(succeeded) or V(failed), as C(mlinfra train status) names
    them), and the trainer container's exit code, reason and message once it ended.
author:
  - mlinfra maintainers (@mlinfra)
positional: mode
options:
  _input:
    description: The run's pods.
    type: list
    elements: dict
    required: true
  mode:
    description: The start mode (it names the trainer container).
    type: str
    choices: [job, pytorchjob, volcano, jobset, trainjob]
    required: true
"""

EXAMPLES = r"""
- name: Tell whether every pod of the run succeeded
  ansible.builtin.set_fact:
    run_done: "{{ (pods.resources | mlinfra.multinode.train_job_pods('job') | map(attribute='state') | unique) == ['succeeded'] }}"
"""

RETURN = r"""
_value:
  description: One entry per pod, by node index (pods without one last, by name).
  type: list
  elements: dict
  contains:
    pod:
      description: Pod name.
      type: str
    uid:
      description: The pod's uid (a soak's facts tell its runs' pods apart by it).
      type: str
    node:
      description: The node the pod was scheduled to; null before it is.
      type: str
    index:
      description: The pod's node index, from its controller's index label or the number its name ends in; null
        when neither gives one.
      type: int
    phase:
      description: The pod's phase (V(Pending) when it reports none).
      type: str
    state:
      description: V(succeeded) or V(failed) once the pod's phase says so, else V(running).
      type: str
      choices: [running, succeeded, failed]
    exit_code:
      description: Exit code of the trainer container; null until it ended.
      type: int
    reason:
      description: Why the trainer container ended (for example V(Error) or V(OOMKilled)), else the pod's own
        reason (for example V(Evicted)); null when there is none.
      type: str
    message:
      description: The container's termination message, else the pod's message; null when there is none.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.workload.train_jobs import MODES, pod_states


def train_job_pods(pods, mode):
    if not isinstance(pods, list) or mode not in MODES:
        raise AnsibleFilterError("train_job_pods takes a list of pods and a mode of %s, got %s and %r"
                                 % (", ".join(MODES), type(pods).__name__, mode))
    return pod_states(pods, mode)


class FilterModule(object):
    def filters(self):
        return {"train_job_pods": train_job_pods}
