# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""A training run's directory (see launch.py for what it holds) and the
processes of a launch: read back, locked against a second writer, found by
their token and signalled.

Standard library only: runs in the pods (``mlinfra train``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os

from .launch import EXIT_CODE_FILE, LAUNCH_FILE, LOCK_FILE, STOP_FILE, TOKEN_VARIABLE


_UNREADABLE = object()


def read_json_file(run_dir, name):
    """The JSON value of a run directory's file, or _UNREADABLE when it is
    missing or not JSON."""
    try:
        with open(os.path.join(run_dir, name)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return _UNREADABLE


def read_launch(run_dir):
    launch = read_json_file(run_dir, LAUNCH_FILE)
    return launch if isinstance(launch, dict) else None


def read_exit_code(run_dir):
    """(exit code, when it was written) or (None, None)."""
    path = os.path.join(run_dir, EXIT_CODE_FILE)
    try:
        with open(path) as handle:
            return int(handle.read().strip()), os.path.getmtime(path)
    except (IOError, OSError, ValueError):
        return None, None


def read_stop(run_dir):
    stop = read_json_file(run_dir, STOP_FILE)
    if stop is _UNREADABLE:
        return None
    return stop if isinstance(stop, dict) else {}


class RunLock:
    """An exclusive lock on the run directory, so that two starts (or a start
    and a stop) into one directory do not interleave."""

    def __init__(self, run_dir):
        self.path = os.path.join(run_dir, LOCK_FILE)
        self.handle = None

    def __enter__(self):
        self.handle = open(self.path, "a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


# -------------------------------------------------------------- processes

def _stat(pid):
    """(state letter, process group) of a process, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except (IOError, OSError):
        return None
    fields = text[text.rfind(")") + 2:].split()
    try:
        return fields[0], int(fields[2])
    except (IndexError, ValueError):
        return None


def _has_token(pid, needle):
    """True or False, or None when the environment cannot be read.

    An empty environment counts as unreadable: a process that is still in
    execve shows none for a moment, and the supervisor that start() has just
    spawned is in that state when its caller reads the status on a busy
    machine (Python resumes the parent as soon as the child's new image is
    mapped, before its environment is laid out)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            environment = handle.read()
    except (IOError, OSError):
        return None
    return (needle in b"\0" + environment) if environment else None


def launch_processes(launch):
    """The live processes of a launch (zombies are not): those whose
    environment holds its token and, where an environment cannot be read,
    the members of its supervisor's process group."""
    token, pgid = launch.get("token"), launch.get("pgid")
    if not os.path.isdir("/proc"):
        try:
            os.kill(launch["pid"], 0)
            return [launch["pid"]]
        except (OSError, KeyError, TypeError):
            return []
    needle = ("\0%s=%s\0" % (TOKEN_VARIABLE, token)).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        marked = _has_token(pid, needle) if token else None
        if marked or (marked is None and pgid and stat[1] == pgid):
            found.append(pid)
    return sorted(found)


def signal_pid(pid, number):
    try:
        os.kill(pid, number)
        return True
    except OSError:
        return False


def signal_group(pgid, number):
    try:
        os.killpg(pgid, number)
        return True
    except OSError:
        return False
