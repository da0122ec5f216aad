# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preload_filters
type: aggregate
short_description: Loads the collection's filters once, before the first task, so that tasks start faster
description:
  - Ansible runs each task in a worker process forked from the controller. To find a collection's filter by name,
    a worker loads every filter file of that collection (a file may hold several filters), and with them what they
    import; whatever the controller had not loaded before the fork is loaded again in every task that uses one.
  - This callback loads this collection's filters in the controller when the playbook starts, so every worker
    inherits them. Nothing else changes; C(deploy.yml) on the local cluster runs about a tenth faster with it
    (docs/PERFORMANCE.md).
  - Enabled by this repository's C(ansible.cfg) (C(callbacks_enabled)); a project of your own enables it with
    C(callbacks_enabled = mlinfra.multinode.preload_filters) in its C(ansible.cfg).
requirements:
  - enabled in C(ansible.cfg)
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader

# Any of the collection's filters: looking one up loads every filter file of
# the collection.
A_FILTER = "mlinfra.multinode.object_refs"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mlinfra.multinode.preload_filters"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        # A file that fails to load is reported by the task that uses it,
        # with its error, as it would be without this callback.
        try:
            filter_loader.get_with_context(A_FILTER)
        except Exception as exc:  # pylint: disable=broad-except
            self._display.vvv("preload_filters: %s" % exc)
