# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: verdict_block
type: aggregate
short_description: Ends a run with what it found, one line per verdict, after the recap
description:
  - Collects the message of every task that states a verdict (the collection marks them with the task variable
    C(mlinfra_verdict), for example the verify role's C(Pass only a fabric fit to train on) and the train role's
    C(Report the run)) and of every task that failed the run (its message names the fix), and prints them, by play,
    as the last lines of the run, where a reader looks first; hundreds of task lines above no longer hide them.
  - Enabled by this repository's C(ansible.cfg) (C(callbacks_enabled)); a project of your own enables it with
    C(callbacks_enabled = mlinfra.multinode.verdict_block) in its C(ansible.cfg).
requirements:
  - enabled in C(ansible.cfg)
"""

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

HEADING = "mlinfra.multinode: what this run found"


def _message(result, failed=False):
    """A task result's message, on one line; for a loop, its items' (a
    failed loop's failed items')."""
    found = result.get("msg")
    if isinstance(found, list):
        found = " ".join(str(line) for line in found)
    if (not found or found == "One or more items failed") and isinstance(result.get("results"), list):
        found = "; ".join(str(item.get("msg")) for item in result["results"]
                          if isinstance(item, dict) and item.get("msg") and (item.get("failed") or not failed))
    return " ".join(str(found or "").split())


def _uuids(tasks):
    return set(getattr(task, "_uuid", None) for task in tasks or [])


def _rescued(task):
    """Whether the task sits in the body of a block that has a rescue (not
    in the rescue or always part itself)."""
    child, parent = task, getattr(task, "_parent", None)
    while parent is not None:
        rescue = getattr(parent, "rescue", None)
        if rescue and getattr(child, "_uuid", None) not in _uuids(rescue) | _uuids(getattr(parent, "always", None)):
            return True
        child, parent = parent, getattr(parent, "_parent", None)
    return False


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mlinfra.multinode.verdict_block"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.play = None
        self.lines = []

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name().strip()

    def v2_runner_on_ok(self, result):
        if (result.task.vars or {}).get("mlinfra_verdict"):
            message = _message(result.result)
            if message:
                self.lines.append((self.play, False, message))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        # A failure a block's rescue takes up says it again, with more.
        if ignore_errors or _rescued(result.task):
            return
        # The task as it reads, without its role's name.
        task = result.task_name.split(" : ", 1)[-1]
        self.lines.append((self.play, True, "%s: %s" % (task, _message(result.result, True) or "failed")))

    def v2_playbook_on_stats(self, stats):
        if not self.lines:
            return
        self._display.display("\n" + HEADING, color=C.COLOR_VERBOSE)
        for play, failed, message in self.lines:
            self._display.display("%s %s: %s" % ("FAILED" if failed else "-", play, message),
                                  color=C.COLOR_ERROR if failed else C.COLOR_OK)
