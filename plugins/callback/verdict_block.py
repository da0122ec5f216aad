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
  - When a failure interrupts a run after it changed the cluster, it also says which tasks had changed it (objects
    created, patched, scaled or deleted through the Kubernetes modules), since a failure is not undone and the reader
    should know what is half done before running again. A failed verdict (a task marked C(mlinfra_verdict)) judges
    work that was done and adds no such line.
  - Enabled by this repository's C(ansible.cfg) (C(callbacks_enabled)); a project of your own enables it with
    C(callbacks_enabled = mlinfra.multinode.verdict_block) in its C(ansible.cfg).
requirements:
  - enabled in C(ansible.cfg)
"""

from ansible import constants as C
from ansible import context
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


# The modules that change a cluster; their _info and read-only companions
# change nothing. The deployment's lock (cluster_lock) is bookkeeping.
_CLUSTER_WRITERS = ("kubernetes.core.k8s", "kubernetes.core.k8s_scale", "kubernetes.core.k8s_json_patch",
                    "kubernetes.core.k8s_drain", "community.okd.k8s", "community.okd.openshift_process",
                    "redhat.openshift.k8s", "k8s", "k8s_scale", "k8s_json_patch")


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
        # Per play, the tasks that changed the cluster, in their order; and
        # the plays whose work a failure interrupted (a failed verdict is a
        # judgement of work done, not work left half done).
        self.changed = {}
        self.interrupted = []

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name().strip()

    def v2_runner_on_ok(self, result):
        if (result.task.vars or {}).get("mlinfra_verdict"):
            message = _message(result.result)
            if message:
                self.lines.append((self.play, False, message))
        if result.result.get("changed") and result.task.action in _CLUSTER_WRITERS \
                and not context.CLIARGS.get("check"):
            task = result.task_name.split(" : ", 1)[-1]
            done = self.changed.setdefault(self.play, [])
            if task not in done:
                done.append(task)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        # A failure a block's rescue takes up says it again, with more.
        if ignore_errors or _rescued(result.task):
            return
        if not (result.task.vars or {}).get("mlinfra_verdict") and self.play not in self.interrupted:
            self.interrupted.append(self.play)
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
        # After the failures, per play a failure interrupted, what it had
        # changed by then.
        for play in [play for play in self.interrupted if self.changed.get(play)]:
            self._display.display(
                "- %s: the cluster was already changed before the failure, and stays so: %s; run it again once "
                "fixed (it changes only what differs)" % (play, "; ".join(self.changed[play])), color=C.COLOR_WARN)
