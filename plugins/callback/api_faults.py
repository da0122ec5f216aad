# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: api_faults
type: aggregate
short_description: Says what it means when a run loses the cluster's API half-way
description:
  - When a task fails because the cluster's API went away during the run (the API server stopped
    answering, the kubeconfig was deleted or emptied, the credentials expired, the server's certificate
    changed), the kubernetes.core modules fail with the client's own words, for example
    C(Max retries exceeded ... Connection refused) or C(Invalid kube-config file. No configuration found.).
  - This callback adds one message at the end of the run that names the task, says what happened, that the
    steps before it are in place, and what to do next.
  - Other failures (a refusal by the API, a failed check) already say what they mean and are left alone, as
    are failures of tasks that ignore errors (every playbook checks at its start, that way, that the API
    answers, and fails with its own message when it does not).
  - Enabled by this repository's C(ansible.cfg) (C(callbacks_enabled)); a project of your own enables it with
    C(callbacks_enabled = mlinfra.multinode.api_faults) in its C(ansible.cfg).
requirements:
  - enabled in C(ansible.cfg)
"""

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster.api_fault import classify


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mlinfra.multinode.api_faults"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.faults = []

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        fault = classify(result.result, result.task_name, result.task.action)
        if fault:
            self.faults.append("{0}: {1}".format(result.host.get_name(), fault["message"]))

    def v2_playbook_on_stats(self, stats):
        # Last, after the recap: the line a reader looks at first.
        for message in self.faults:
            self._display.display("API FAULT " + message, color=C.COLOR_ERROR)
