# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""One writer at a time: the decisions about a deployment's lock.

Two deploys with different settings at once used to race: the last writer
won silently and the other failed minutes later, quoting stale events.
deploy.yml, scale.yml, train.yml and teardown.yml now hold a Lease in the
namespace (``<cluster_app_name>-lock``) while they change the deployment; a
second play waits a bounded time for it, then refuses, naming who holds it.

A play that fails or is interrupted does not release its lock. Its holder
says which controller host and which ansible-playbook process held it, so a
later play on the same host takes a lock whose process is gone at once; one
held from another host is honoured until it expires (LEASE_SECONDS after it
was taken), since nothing here can see whether that process still runs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import re

# How long a lock taken from another controller host is honoured: longer
# than any deploy, scale or teardown waits for its pods.
LEASE_SECONDS = 3600
_HOLDER = re.compile(r"^(?P<action>\S+) by (?P<user>[^@\s]+)@(?P<host>\S+), pid (?P<pid>\d+) \(start (?P<start>\d+)\)$")


def lock_name(app):
    return app + "-lock"


def holder_identity(action, user, host, pid, start):
    return "%s by %s@%s, pid %d (start %d)" % (action, user, host, pid, start)


def parse_holder(identity):
    match = _HOLDER.match(identity or "")
    if not match:
        return None
    holder = match.groupdict()
    holder["pid"], holder["start"] = int(holder["pid"]), int(holder["start"])
    return holder


def _stat_fields(pid, proc):
    """The fields of /proc/PID/stat after the command name (state first), or
    None when the process does not exist or /proc cannot say."""
    try:
        with open(os.path.join(proc, str(pid), "stat")) as handle:
            stat = handle.read()
    except (IOError, OSError):
        return None
    # The command name, in parentheses, may hold spaces: count after it.
    return stat[stat.rindex(")") + 2:].split()


def process_start(pid, proc="/proc"):
    """The start time of a process (clock ticks since boot), or None."""
    fields = _stat_fields(pid, proc)
    return int(fields[19]) if fields else None


def _parent(pid, proc):
    fields = _stat_fields(pid, proc)
    return int(fields[1]) if fields else None


def _cmdline(pid, proc):
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def play_process(start_pid, proc="/proc"):
    """The ansible-playbook process above ``start_pid``: the outermost of the
    ansible-playbook processes among its ancestors (the play's main process,
    not the worker forked for one task). None where there is no /proc."""
    found, pid = None, start_pid
    while pid and pid > 1:
        if "ansible-playbook" in _cmdline(pid, proc):
            found = pid
        elif found:
            break
        pid = _parent(pid, proc)
    return found


def _parse_time(text):
    if not text:
        return None
    text = text.replace("Z", "+00:00")
    for pattern in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.datetime.strptime(text, pattern)
        except ValueError:
            continue
    return None


def micro_time(moment):
    """A Lease's MicroTime."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def judge(spec, me, now, host, proc="/proc"):
    """What to do about a live Lease's ``spec``, for the holder ``me``:
    ("take", why) when it is free, ours, expired or its process is gone, or
    ("wait", holder) while another play holds it."""
    identity = spec.get("holderIdentity")
    if not identity:
        return "take", "free"
    if identity == me:
        return "take", "ours"
    renewed = _parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or LEASE_SECONDS)
    if renewed is None or (now - renewed).total_seconds() > duration:
        return "take", "expired"
    holder = parse_holder(identity)
    if holder and holder["host"] == host and process_start(holder["pid"], proc) != holder["start"]:
        return "take", "its process is gone"
    return "wait", identity


def held_message(identity, spec, waited, namespace, app, now):
    taken = _parse_time(spec.get("acquireTime") or spec.get("renewTime"))
    since = ""
    if taken:
        since = " since %s (%d s ago)" % (taken.strftime("%H:%M:%S UTC"), (now - taken).total_seconds())
    lock = lock_name(app)
    return ("another play changes this deployment: the lock %s/%s is held by %s%s; waited %d s "
            "(cluster_lock_wait). Fix: run again when it has finished, or raise cluster_lock_wait to wait "
            "longer; if that play is gone (its controller host is down), delete the lock: "
            "kubectl -n %s delete lease %s" % (namespace, lock, identity, since, waited, namespace, lock))
