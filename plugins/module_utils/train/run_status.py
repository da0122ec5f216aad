# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What ``mlinfra train status`` reports on a run: its state, exit code,
processes, the log's tail and the metrics read from it, and each rank's
own report.

Standard library only: runs in the pods (``mlinfra train``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from . import torchrun_log
from ..report import throughput_logs
from .launch import FAILED, NOT_STARTED, PORT_COUNTERS_FILE, RUNNING, STOPPED, SUCCEEDED, TAIL_LINES, TAIL_BYTES
from .run_dir import read_json_file, launch_processes, read_exit_code, read_launch, read_stop


def log_tail(path, count=TAIL_LINES):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except (IOError, OSError):
        return []
    lines = data.decode("utf-8", "replace").replace("\r", "\n").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]
    return [line for line in lines if line.strip()][-count:]


def log_metrics(path):
    """The TorchTitan metrics lines of the log (throughput_logs.py's parser):
    {metrics (the latest line), first_loss, latest_loss, steps_logged}."""
    try:
        return _metrics_of(throughput_logs.parse_log(path, "torchtitan"))
    except throughput_logs.ThroughputError:
        return dict(_NO_METRICS)


def text_metrics(text):
    """log_metrics for a log's text (a Job pod's log read from the API
    server: the train role's progress lines in the Job start modes)."""
    try:
        return _metrics_of(throughput_logs.parse_lines(text.replace("\r", "\n").splitlines(), "torchtitan"))
    except throughput_logs.ThroughputError:
        return dict(_NO_METRICS)


_NO_METRICS = {"metrics": None, "first_loss": None, "latest_loss": None, "steps_logged": 0}


def _metrics_of(parsed):
    measurements = parsed["measurements"]
    latest = measurements[-1]
    figures = latest["figures"]
    losses = [m["figures"]["loss"] for m in measurements if "loss" in m["figures"]]
    return {
        "metrics": {"step": latest["step"], "loss": figures.get("loss"),
                    "tps": figures.get("tokens_per_sec_per_device"), "tflops": figures.get("tflops"),
                    "mfu": figures.get("mfu"), "memory_gib": figures.get("memory_gib")},
        "first_loss": losses[0] if losses else None,
        "latest_loss": losses[-1] if losses else None,
        "steps_logged": len(measurements),
    }


def status(run_dir):
    """What state the launch in run_dir is in, with its latest metrics."""
    result = {"state": NOT_STARTED, "run_dir": os.path.abspath(run_dir), "run_id": None, "node_rank": None,
              "nnodes": None, "pid": None, "pgid": None, "exit_code": None, "seconds": None, "started_at": None,
              "log": None, "metrics": None, "first_loss": None, "latest_loss": None, "steps_logged": 0,
              "log_tail": [], "processes": [], "stop_requested": False, "error": None,
              "assigned_node_rank": None, "global_ranks": None, "first_failure": None, "port_counters": None}
    launch = read_launch(run_dir)
    if launch is None:
        return result
    for key in ("run_id", "node_rank", "nnodes", "pid", "pgid", "started_at", "log"):
        result[key] = launch.get(key)
    code, ended = read_exit_code(run_dir)
    stop = read_stop(run_dir)
    processes = launch_processes(launch)
    moved = read_json_file(run_dir, PORT_COUNTERS_FILE)
    result.update(exit_code=code, processes=processes, stop_requested=stop is not None,
                  port_counters=moved if isinstance(moved, dict) else None)
    if code is None and processes:
        result["state"] = RUNNING
        ended = None
    elif stop is not None:
        result["state"] = STOPPED
        ended = ended or stop.get("stopped") or stop.get("requested")
    elif code == 0:
        result["state"] = SUCCEEDED
    elif code is not None:
        result["state"] = FAILED
        result["error"] = "torchrun exited with %d%s; see log_tail" % (
            code, " (killed by signal %d)" % -code if code < 0 else "")
    else:
        result["state"] = FAILED
        result["error"] = "the launch's processes are gone and none recorded an exit status (the supervisor was " \
                          "killed, or the pod restarted); see log_tail"
    started = launch.get("started")
    if isinstance(started, (int, float)):
        result["seconds"] = round((ended or time.time()) - started, 1)
    if launch.get("log"):
        result.update(log_metrics(launch["log"]))
        # One read of the log's end serves the tail shown and torchrun's
        # failure report, which lies further back than the tail.
        tail = log_tail(launch["log"], count=200)
        result["log_tail"] = tail[-TAIL_LINES:]
        result.update(_rank_report(launch["log"], tail))
        if result["state"] == FAILED and result["first_failure"]:
            result["error"] += "; first failure: %s" % torchrun_log.describe_failure(result["first_failure"])
    return result


def _rank_report(path, tail):
    """The node rank and global ranks torchrun's rendezvous gave this node
    (from the start of its log), and the first failure it reported (from
    the end)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(TAIL_BYTES).decode("utf-8", "replace").splitlines()
    except (IOError, OSError):
        head = []
    rendezvous = torchrun_log.rendezvous_result(head) or {}
    return {"assigned_node_rank": rendezvous.get("group_rank"), "global_ranks": rendezvous.get("global_ranks"),
            "first_failure": torchrun_log.first_failure(tail)}
