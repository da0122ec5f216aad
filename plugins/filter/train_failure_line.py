# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: train_failure_line
short_description: The message a training run that did not succeed fails its play with
version_added: 0.1.0
description:
  - Says why a run ended without succeeding, cause first. What happened to its pods while it ran, from the pod objects
    when it started, the pod objects now and the nodes now (a pod deleted, being deleted, replaced by a new pod, a
    container restarted with how it ended, a node not Ready or gone); then each pod that did not succeed with its
    state, exit status and error (a pod that gave no status too, with the exec's error); then the last lines of each
    such pod's workers (the C([rankN]:) lines torchrun prefixes, else the launcher's log tail), and where the logs are.
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: Each pod's C(mlinfra train status) exec, as C(pods_exec) returns it (RV(pods) with C(json)); in the
      Job start modes the same shape made from the Job's pods.
    type: list
    elements: dict
    required: true
  run_id:
    description: The run's id.
    type: str
    required: true
  state:
    description: The run's state (C(failed), C(stopped), C(timed-out)).
    type: str
    required: true
  pod_logs:
    description: Each pod's log, C({pod, stdout}).
    type: list
    elements: dict
    required: true
  logs_dir:
    description: The directory the run's logs were written to.
    type: str
    required: true
  note:
    description: What the start mode says about the end first (a timeout, the run's object deleted).
    type: str
    default: ''
  pods_then:
    description: The run's pod objects when it started (C(kubernetes.core.k8s_info) resources); empty leaves out what
      happened to the pods.
    type: list
    elements: dict
    default: []
  pods_now:
    description: The same pods' objects now.
    type: list
    elements: dict
    default: []
  nodes:
    description: The node objects now; unset or null when they could not be read (nothing is then said of the
      nodes, rather than that every node is gone).
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Fail with why the run ended
  ansible.builtin.fail:
    msg: >-
      {{ train_status | mlinfra.multinode.train_failure_line(run_id=train_id, state=train_state,
         pod_logs=train_pod_logs, logs_dir=train_logs_dir ~ '/' ~ train_id, pods_then=pods_at_start,
         pods_now=pods_now.resources, nodes=nodes_now.resources) }}
"""

RETURN = r"""
_value:
  description: The message, for example C(run r3 failed - pod h-kim-1 was replaced while the run ran (deleted, evicted,
    or recreated by a deploy or scale; the new one is on node n2); h-kim-0 failed (exit status 1) - torchrun exited
    with 1; ... last lines of h-kim-0 - ...; logs - DIR/) (with colons for the dashes).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.train.summary import failure_line, pod_fates


def train_failure_line(statuses, run_id, state, pod_logs, logs_dir, note="", pods_then=None, pods_now=None, nodes=None):
    for name, value in (("statuses", statuses), ("pod_logs", pod_logs), ("pods_then", pods_then or []),
                        ("pods_now", pods_now or []), ("nodes", [] if nodes is None else nodes)):
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise AnsibleFilterError("train_failure_line: %s must be a list of mappings" % name)
    fates = pod_fates(pods_then, pods_now, nodes) if pods_then else {}
    return failure_line(run_id, state, statuses, pod_logs, logs_dir, note=note or "", fates=fates)


class FilterModule(object):
    def filters(self):
        return {"train_failure_line": train_failure_line}
