# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""One pod's part of a multi-node training run: start it detached, report on
it, stop it.

The train role runs ``mlinfra-train`` in every pod of the StatefulSet at once
(the launcher that replaces a hand-run lm-train.sh), then polls it. Each pod
starts torchrun as node ``node_rank`` of the job (the ordinal of its pod's
name), with c10d rendezvous on pod 0 and the NCCL environment that the
autodetect init container wrote, and returns at once; the run goes on in the
background and everything about it lives in one run directory:

``launch.json``
    what was started: supervisor pid and process group, torchrun command,
    run id, node rank, start time, memlock, the NCCL environment and the
    RDMA configuration printed at the start.
``node-<R>.log``
    the RDMA configuration, then torchrun's and the workers' output, each
    worker's line behind ``[rank<global rank>]:`` (torchrun ``--tee``), as
    in TorchTitan's own launch script and the logs throughput_logs.py reads.
``ranks/``
    torchrun's ``--log-dir``: every worker's own stdout, stderr and, for
    workers that record it (TorchTitan does), error file.
``exit_code``
    torchrun's exit status, written when it ends by the supervisor (a small
    detached process that started it and waits for it); a negative number
    is the signal that killed it.
``stop_requested``
    written by ``stop`` before it signals anything: the run then reads as
    stopped, whatever torchrun's exit status.
``port_counters.json``
    what every RDMA port the pod sees moved while torchrun ran (port_counters,
    read by the supervisor just before and just after it), for the soak's
    attribution of degraded runs.

Every process of a launch (supervisor, torchrun, the workers, which torchrun
starts in sessions of their own, and their children) carries the launch's
token in its environment (MLINFRA_TRAIN_TOKEN): that, and the supervisor's
process group, is how status tells a launch is alive and how stop finds all
of it.

Subcommands print exactly one JSON object on standard output. Exit status 0
whenever they could report, including a launch refused before it started
(state ``failed-to-start``, with ``error``); 2 when the command line cannot be
parsed. ``start --wait`` (the container of a Job's pod) stays in the
foreground instead: the node's log on standard output, then the JSON status,
and an exit status that says how the run ended (exit_status).

Standard library only: runs in the pods through ``files/bin/mlinfra-train``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import binascii
import errno
import fcntl
import json
import os
import re
import resource
import select
import shlex
import signal
import socket
import subprocess
import sys
import time

from . import nccl_detect, node_facts, port_counters, throughput_logs, torchrun_log
from .common import write_atomically
from .pod_bench import ordinal_of

LAUNCH_FILE = "launch.json"
EXIT_CODE_FILE = "exit_code"
PORT_COUNTERS_FILE = "port_counters.json"
STOP_FILE = "stop_requested"
LOCK_FILE = ".lock"
TOKEN_VARIABLE = "MLINFRA_TRAIN_TOKEN"

RUNNING, SUCCEEDED, FAILED, STOPPED, NOT_STARTED = "running", "succeeded", "failed", "stopped", "not-started"
FAILED_TO_START, BAD_USAGE = "failed-to-start", "bad-usage"
WORKLOADS = ("torchtitan", "script", "demo")
# The collection's tiny language model (--workload demo), where the image and
# the pods keep the collection's files: beside the plugins directory.
DEMO_SCRIPT = os.path.join("files", "train", "tiny_lm.py")
BACKENDS = ("auto", "nccl", "gloo")

DEFAULT_PORT = 29500
DEFAULT_GRACE = 20
# torchrun's own default for how long the c10d rendezvous waits for all nodes.
DEFAULT_JOIN_TIMEOUT = 600
TAIL_LINES = 20
# Read from the end of the log for its tail: enough for 20 long lines.
_TAIL_BYTES = 64 * 1024
_NVIDIA_SMI_TIMEOUT = 20
_POLL = 0.2
# After SIGKILL, how long to wait for the processes to be gone.
_KILL_WAIT = 10

# The detached supervisor: this module run by the same python, found through
# the plugins directory (what the entry point put on sys.path, or where this
# file lies), so that nothing of it is added to the workload's environment.
_SUPERVISOR_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
                    "from module_utils.train_launch import supervise; sys.exit(supervise(sys.argv[2], sys.argv[3]))")

_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)+$")


class LaunchError(Exception):
    """Why a launch is refused before anything starts; the message says how
    to fix it."""


class UsageError(Exception):
    """A command line that cannot be parsed (exit status 2)."""


# ---------------------------------------------------------------- commands

def format_override(text):
    """``section.key=value`` as TorchTitan's command line takes it (TorchTitan
    0.2 parses its JobConfig with tyro: ``--section.key value``; a boolean is
    a flag, ``--section.key`` for true and ``--section.no-key`` for false;
    lists are one comma-separated value). ``true``/``false`` (any case) are
    taken as booleans."""
    key, sep, value = text.partition("=")
    key = key.strip().lstrip("-")
    if not sep or not _OVERRIDE_KEY.match(key):
        raise LaunchError("override %r is not SECTION.KEY=VALUE (for example training.steps=100 or "
                          "metrics.log_freq=10)" % (text,))
    if value.lower() == "true":
        return ["--" + key]
    if value.lower() == "false":
        section, name = key.rsplit(".", 1)
        return ["--%s.no-%s" % (section, name.replace("_", "-"))]
    return ["--" + key, value]


def torchtitan_entry(config=None, overrides=(), extra=()):
    """What torchrun runs for TorchTitan: its train module, the job's TOML
    (``--job.config_file``) and the overrides, then any further arguments."""
    entry = ["-m", "torchtitan.train"]
    if config:
        entry += ["--job.config_file", config]
    for override in overrides:
        entry += format_override(override)
    return entry + list(extra)


def rdzv_endpoint(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def torchrun_command(python, nnodes, nproc_per_node, node_rank, host, port, run_id, entry, local_addr=None,
                     join_timeout=DEFAULT_JOIN_TIMEOUT, log_dir=None):
    """torchrun (as ``python -m torch.distributed.run``, so that the pod's
    python with torch is the one used) with c10d rendezvous on host:port.

    Node 0 hosts the rendezvous store (``is_host``), as the OKE host-network
    Kubeflow and Volcano examples do: torch would otherwise guess it from whether the
    endpoint's name is this machine's, which a pod's headless-service name
    need not be. torchrun gives the nodes their group ranks in the order of
    its node descriptors (address, pid), so ``--node-rank`` names this pod's
    log and the store's host; it does not fix which pod holds global rank 0.

    With log_dir, every worker's output also goes to files there and reaches
    the console (the node's log) line by line behind a prefix (``--tee 3``).
    """
    conf = "is_host=%d,join_timeout=%d" % (1 if node_rank == 0 else 0, join_timeout)
    command = [python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node",
               str(nproc_per_node), "--node-rank", str(node_rank), "--rdzv-backend", "c10d", "--rdzv-endpoint",
               rdzv_endpoint(host, port), "--rdzv-id", run_id, "--rdzv-conf", conf, "--max-restarts", "0"]
    if local_addr:
        command += ["--local-addr", local_addr]
    if log_dir:
        command += ["--log-dir", log_dir, "--tee", "3"]
    return command + list(entry)


# ------------------------------------------------------ launch environment

def load_nccl_env(path, environ):
    """The variables of the autodetect init container's nccl.env to add to
    the launch's environment. A variable already in the environment keeps its
    value (an explicit ``NCCL_DEBUG=TRACE mlinfra-train ...`` wins, as a user
    value wins over detection everywhere in nccl_detect; in a bash of the pod,
    BASH_ENV has already sourced the same file, so the values agree).
    Returns (variables to add, report)."""
    report = {"path": path, "found": False, "variables": {}, "kept_from_environment": {}, "error": None}
    if not path:
        return {}, report
    try:
        variables = nccl_detect.read_env_file(path)
    except (IOError, OSError) as exc:
        if exc.errno != errno.ENOENT:
            report["error"] = "cannot read %s: %s" % (path, exc.strerror or exc)
        return {}, report
    except ValueError as exc:
        report["error"] = "%s: %s" % (path, exc)
        return {}, report
    report["found"] = True
    report["variables"] = variables
    added = {}
    for name, value in variables.items():
        if name in environ and environ[name] != value:
            report["kept_from_environment"][name] = {"environment": environ[name], "nccl_env": value}
        elif name not in environ:
            added[name] = value
    return added, report


def _limit(value):
    return "unlimited" if value == resource.RLIM_INFINITY else value


def raise_memlock():
    """Raises this process's RLIMIT_MEMLOCK (which the launch inherits) to
    unlimited where permitted (raising the hard limit needs CAP_SYS_RESOURCE;
    otherwise the soft limit goes up to the hard one). RDMA registers the
    buffers it sends from; a process with CAP_IPC_LOCK may lock beyond the
    limit anyway."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    error = None
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError) as exc:
        error = "cannot raise the hard limit (%s): the container needs CAP_SYS_RESOURCE, or CAP_IPC_LOCK to " \
                "lock memory beyond it" % exc
        if soft != hard:
            try:
                resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
            except (ValueError, OSError):
                pass
    new_soft, new_hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {"soft": _limit(new_soft), "hard": _limit(new_hard), "before": {"soft": _limit(soft), "hard": _limit(hard)},
            "unlimited": new_soft == resource.RLIM_INFINITY, "error": None if new_soft == resource.RLIM_INFINITY
            else error}


def _memlock_words(memlock):
    if memlock["soft"] == "unlimited":
        return "unlimited"
    return "%d KiB (%s)" % (memlock["soft"] // 1024, memlock["error"] or "not unlimited")


def rdma_devices(host_root):
    """The RDMA devices of /sys/class/infiniband under host_root (node_facts'
    reading, without the GID tables)."""
    rdma = node_facts.gather_rdma(node_facts.NodeReader(host_root or "/"))
    return [{"name": dev["name"], "netdevs": dev["netdevs"],
             "ports": [{"port": port["port"], "state": port["state"], "link_layer": port["link_layer"],
                        "rate": port["rate"]} for port in dev["ports"]]} for dev in rdma["devices"]]


def list_gpus(environ):
    """``nvidia-smi -L`` lines, or None where there is no nvidia-smi."""
    for directory in environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory, "nvidia-smi")
        if directory and os.access(path, os.X_OK):
            break
    else:
        return None
    try:
        # The in-pod commands run without Ansible: no run_command to use.
        # pylint: disable-next=ansible-bad-function
        output = subprocess.run([path, "-L"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=_NVIDIA_SMI_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return ["nvidia-smi -L failed: %s" % exc]
    return [line.strip() for line in output.stdout.decode("utf-8", "replace").splitlines() if line.strip()]


def rdma_configuration(env, memlock, host_root):
    """What the launch prints about its RDMA set-up, as a hand-run lm-train.sh
    does: the NCCL variables, memlock, the RDMA devices and the GPUs."""
    return {
        "nccl": dict((name, env[name]) for name in sorted(env) if name.startswith("NCCL_")),
        "memlock": memlock,
        "host_root": host_root or "/",
        "devices": rdma_devices(host_root),
        "gpus": list_gpus(env),
    }


def banner(launch):
    """The first lines of the node's log."""
    rdma = launch["rdma"]
    lines = ["=" * 60, "mlinfra-train: run %s, node %d of %d" % (launch["run_id"], launch["node_rank"],
                                                                 launch["nnodes"]), "=" * 60]
    info = [("pod", launch["pod"]), ("node_rank", launch["node_rank"]), ("nnodes", launch["nnodes"]),
            ("nproc_per_node", launch["nproc_per_node"]),
            ("total_processes", launch["nnodes"] * launch["nproc_per_node"]),
            ("rdzv_endpoint", launch["rdzv_endpoint"]), ("workload", launch["workload"]),
            ("workdir", launch["workdir"])]
    lines += ["[INFO] %s=%s" % item for item in info]
    nccl_env = launch["nccl_env"]
    if nccl_env["found"]:
        lines.append("[INFO] nccl.env: %s (%d variable(s); the environment's value kept for: %s)" % (
            nccl_env["path"], len(nccl_env["variables"]), ", ".join(sorted(nccl_env["kept_from_environment"]))
            or "none"))
    else:
        lines.append("[INFO] nccl.env: %s" % (nccl_env["error"] or "none at %s" % nccl_env["path"]
                                              if nccl_env["path"] else "not read (no $MLINFRA_RUN_DIR, no --nccl-env)"))
    lines.append("")
    lines.append("[INFO] RDMA Configuration:")
    lines += ["[INFO]   %s=%s" % item for item in sorted(rdma["nccl"].items())] or ["[INFO]   no NCCL_* variables"]
    lines.append("[INFO]   Memlock: %s" % _memlock_words(rdma["memlock"]))
    lines.append("[INFO] RDMA devices (%s):" % os.path.join(rdma["host_root"], "sys/class/infiniband"))
    for dev in rdma["devices"]:
        for port in dev["ports"]:
            lines.append("[INFO]   %s port %s: %s, %s, %s%s" % (
                dev["name"], port["port"], port["state"], port["link_layer"], port["rate"],
                ", netdev " + ",".join(dev["netdevs"]) if dev["netdevs"] else ""))
    if not rdma["devices"]:
        lines.append("[INFO]   none: NCCL uses sockets")
    lines.append("=" * 60)
    lines.append("")
    if rdma["gpus"] is None:
        lines.append("[INFO] Available GPUs: no nvidia-smi")
    else:
        lines.append("[INFO] Available GPUs:")
        lines += ["  " + gpu for gpu in rdma["gpus"]] or ["  none"]
    lines.append("")
    lines.append("[INFO] command: %s" % " ".join(shlex.quote(word) for word in launch["command"]))
    lines.append("[INFO] Starting torchrun...")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- run dir

_UNREADABLE = object()


def _read_json_file(run_dir, name):
    """The JSON value of a run directory's file, or _UNREADABLE when it is
    missing or not JSON."""
    try:
        with open(os.path.join(run_dir, name)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return _UNREADABLE


def read_launch(run_dir):
    launch = _read_json_file(run_dir, LAUNCH_FILE)
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
    stop = _read_json_file(run_dir, STOP_FILE)
    if stop is _UNREADABLE:
        return None
    return stop if isinstance(stop, dict) else {}


class _Lock:
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


def _signal(pid, number):
    try:
        os.kill(pid, number)
        return True
    except OSError:
        return False


def _signal_group(pgid, number):
    try:
        os.killpg(pgid, number)
        return True
    except OSError:
        return False


# ------------------------------------------------------------------ status

def log_tail(path, count=TAIL_LINES):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            data = handle.read()
    except (IOError, OSError):
        return []
    lines = data.decode("utf-8", "replace").replace("\r", "\n").splitlines()
    if size > _TAIL_BYTES and lines:
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
    moved = _read_json_file(run_dir, PORT_COUNTERS_FILE)
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
            head = handle.read(_TAIL_BYTES).decode("utf-8", "replace").splitlines()
    except (IOError, OSError):
        head = []
    rendezvous = torchrun_log.rendezvous_result(head) or {}
    return {"assigned_node_rank": rendezvous.get("group_rank"), "global_ranks": rendezvous.get("global_ranks"),
            "first_failure": torchrun_log.first_failure(tail)}


# ------------------------------------------------------------------- start

def _refuse(result, message):
    result.update(state=FAILED_TO_START, started=False, error=message)
    return result


def _resolve(host, port, timeout=0):
    """Fails unless host resolves within timeout seconds: a Job's pods start
    in any order, and pod 0's name resolves once it exists (its service
    publishes it before it is ready); the exec start mode waits for nothing,
    its pods are all running already."""
    deadline = time.time() + timeout
    while True:
        try:
            socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
            return
        except (socket.gaierror, socket.herror, UnicodeError) as exc:
            if time.time() < deadline:
                time.sleep(min(2.0, max(0.0, deadline - time.time())))
                continue
            error = exc
        break
    if timeout:
        raise LaunchError("the rendezvous host %s did not resolve within %d s (%s): did pod 0 of the job start? "
                          "Its events say why not." % (host, timeout, error))
    raise LaunchError("the rendezvous host %s does not resolve (%s): torchrun would wait for it until the "
                      "rendezvous times out. Is pod 0 running and ready (its headless-service name resolves "
                      "only then), and is the name right?" % (host, error))


def _missing_modules(python, modules):
    """The modules python cannot find (without importing them)."""
    code = "import importlib.util as u, sys; print(','.join(m for m in sys.argv[1:] if u.find_spec(m) is None))"
    try:
        # pylint: disable-next=ansible-bad-function
        found = subprocess.run([python, "-c", code] + list(modules), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise LaunchError("cannot run %s: %s" % (python, exc))
    if found.returncode != 0:
        raise LaunchError("%s cannot run: %s" % (python, found.stderr.decode("utf-8", "replace").strip()[-300:]))
    return [name for name in found.stdout.decode().strip().split(",") if name]


def _settle(options, environ):
    """Checks everything that would make the launch hang or fail at once;
    returns (node rank, host, port). Raises LaunchError."""
    if options.nnodes < 1 or options.nproc_per_node < 1:
        raise LaunchError("--nnodes and --nproc-per-node must be at least 1, got %d and %d"
                          % (options.nnodes, options.nproc_per_node))
    node_rank = options.node_rank
    if node_rank is None:
        try:
            # POD_NAME (the downward API) first: with host networking
            # HOSTNAME is the node's name.
            node_rank = ordinal_of(environ.get("POD_NAME") or environ.get("HOSTNAME"))
        except ValueError as exc:
            raise LaunchError(str(exc))
    if not 0 <= node_rank < options.nnodes:
        raise LaunchError("node rank %d is outside 0..%d (--nnodes %d): the rendezvous would wait for a node "
                          "that never comes; is the StatefulSet scaled to more pods than the job has nodes?"
                          % (node_rank, options.nnodes - 1, options.nnodes))
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", options.run_id):
        raise LaunchError("run id %r must be letters, digits, '.', '_' and '-'" % options.run_id)
    host = options.rdzv_host or environ.get("MASTER_ADDR")
    if not host:
        raise LaunchError("no --rdzv-host and no MASTER_ADDR in the environment (the StatefulSet sets it to pod "
                          "0's headless-service name)")
    port = options.rdzv_port
    if port is None:
        try:
            port = int(environ.get("MASTER_PORT") or DEFAULT_PORT)
        except ValueError:
            raise LaunchError("MASTER_PORT=%r is not a port number; pass --rdzv-port" % environ.get("MASTER_PORT"))
    if not 0 < port < 65536:
        raise LaunchError("rendezvous port %d is not a port number" % port)
    _resolve(host, port, options.resolve_timeout)
    options.workdir = os.path.abspath(options.workdir or os.getcwd())
    if not os.path.isdir(options.workdir):
        raise LaunchError("--workdir %s is not a directory" % options.workdir)
    # Relative paths are the run's, which runs in the working directory.
    options.script, options.config = [os.path.join(options.workdir, path) if path else path
                                      for path in (options.script, options.config)]
    if options.workload == "demo":
        if options.override or options.script:
            raise LaunchError("--workload demo runs the collection's tiny_lm.py: no --script, no --override; give "
                              "its options after --")
        plugins = environ.get("MLINFRA_PLUGINS_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        options.script = os.path.normpath(os.path.join(plugins, "..", DEMO_SCRIPT))
        if not os.path.isfile(options.script):
            raise LaunchError("the demo's %s is not in this pod (the autodetect-train ConfigMap mounts it)"
                              % options.script)
    elif options.workload == "script":
        if not options.script:
            raise LaunchError("--workload script needs --script PATH")
        if not os.path.isfile(options.script):
            raise LaunchError("the script %s does not exist in this pod" % options.script)
        if options.override:
            raise LaunchError("--override is for --workload torchtitan; give the script's options after --")
    elif options.config and not os.path.isfile(options.config):
        raise LaunchError("the TorchTitan config %s does not exist in this pod" % options.config)
    for override in options.override:
        format_override(override)
    modules = ["torch"] + (["torchtitan"] if options.workload == "torchtitan" else [])
    missing = _missing_modules(options.python, modules)
    if missing:
        raise LaunchError("%s cannot import %s: run with the training image's python (--python)"
                          % (options.python, ", ".join(missing)))
    return node_rank, host, port


def _set_aside(run_dir, launch):
    """Keeps the files of a finished launch as *.prev before a new one."""
    names = [LAUNCH_FILE, EXIT_CODE_FILE, STOP_FILE]
    if launch.get("log") and os.path.dirname(os.path.abspath(launch["log"])) == os.path.abspath(run_dir):
        names.append(os.path.basename(launch["log"]))
    for name in names:
        path = os.path.join(run_dir, name)
        if os.path.exists(path):
            os.rename(path, path + ".prev")


def start(options, environ=None):
    """Starts this node's part detached and returns at once."""
    environ = dict(os.environ if environ is None else environ)
    run_dir = os.path.abspath(options.run_dir)
    result = {"state": FAILED_TO_START, "started": False, "already_running": False, "already_finished": False,
              "run_id": options.run_id,
              "run_dir": run_dir, "node_rank": options.node_rank, "error": None}
    if options.workload is None:
        options.workload = "script" if options.script else "torchtitan"
    try:
        node_rank, host, port = _settle(options, environ)
    except LaunchError as exc:
        return _refuse(result, str(exc))
    result["node_rank"] = node_rank
    try:
        if not os.path.isdir(run_dir):
            os.makedirs(run_dir)
        with _Lock(run_dir):
            return _start_locked(options, environ, run_dir, node_rank, host, port, result)
    except LaunchError as exc:
        return _refuse(result, str(exc))
    except (IOError, OSError) as exc:
        return _refuse(result, "cannot use the run directory %s: %s" % (run_dir, exc))


def _start_locked(options, environ, run_dir, node_rank, host, port, result):
    nccl_path = options.nccl_env
    if nccl_path is None:
        nccl_path = os.path.join(environ["MLINFRA_RUN_DIR"], "nccl.env") if environ.get("MLINFRA_RUN_DIR") else ""
    added, nccl_report = load_nccl_env(nccl_path, environ)
    if nccl_report["error"]:
        # Half an NCCL environment can make NCCL pick ports that are down,
        # or fall back to sockets without a word.
        raise LaunchError("%s; repair it (the autodetect init container writes it) or pass --nccl-env ''"
                          % nccl_report["error"])
    previous = read_launch(run_dir)
    if previous is not None:
        alive = launch_processes(previous)
        code = read_exit_code(run_dir)[0]
        if alive and code is None:
            if previous.get("run_id") == options.run_id and previous.get("node_rank") == node_rank:
                current = status(run_dir)
                current.update(started=False, already_running=True, already_finished=False)
                return current
            raise LaunchError("%s holds the running launch of run %s, node %s (pid %s): stop it first "
                              "(mlinfra-train stop --run-dir %s) or use another run directory"
                              % (run_dir, previous.get("run_id"), previous.get("node_rank"), previous.get("pid"),
                                 run_dir))
        if previous.get("run_id") == options.run_id and previous.get("node_rank") == node_rank and code is not None:
            # A run id names one run: once it ended here it is reported as
            # it ended, never trained again (after a lost controller, the
            # same command picks up its result).
            current = status(run_dir)
            current.update(started=False, already_running=False, already_finished=True)
            return current
        _set_aside(run_dir, previous)
    for name in (EXIT_CODE_FILE, STOP_FILE):
        if os.path.exists(os.path.join(run_dir, name)):
            os.remove(os.path.join(run_dir, name))

    token = binascii.hexlify(os.urandom(12)).decode()
    env = dict(environ)
    env.update(added)
    env.update({TOKEN_VARIABLE: token, "PYTHONUNBUFFERED": "1", "MLINFRA_TRAIN_RUN_ID": options.run_id,
                "MLINFRA_TRAIN_RUN_DIR": run_dir, "MLINFRA_TRAIN_NODE_RANK": str(node_rank)})
    if options.backend_hint != "auto":
        env["MLINFRA_TRAIN_BACKEND"] = options.backend_hint
    # torchrun's default prefix holds the local rank, the same on every node.
    env.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[rank${rank}]:")
    # The agent says at INFO which node rank the rendezvous gave this pod
    # (status reads it back: c10d orders nodes as they arrive).
    env.setdefault("LOGLEVEL", "INFO")
    memlock = raise_memlock()

    if options.workload == "torchtitan":
        entry = torchtitan_entry(options.config, options.override, options.extra)
    else:
        entry = [options.script] + list(options.extra)
    command = torchrun_command(options.python, options.nnodes, options.nproc_per_node, node_rank, host, port,
                               options.run_id, entry, local_addr=options.local_addr,
                               join_timeout=options.join_timeout, log_dir=os.path.join(run_dir, "ranks"))
    log_path = os.path.join(run_dir, "node-%d.log" % node_rank)
    workdir = options.workdir
    launch = {
        "run_id": options.run_id, "node_rank": node_rank, "nnodes": options.nnodes,
        "nproc_per_node": options.nproc_per_node, "rdzv_endpoint": rdzv_endpoint(host, port),
        "pod": environ.get("POD_NAME") or environ.get("HOSTNAME") or socket.gethostname(),
        "workload": options.workload, "config": options.config, "script": options.script, "workdir": workdir,
        "command": command, "log": log_path, "token": token, "memlock": memlock, "nccl_env": nccl_report,
        "rdma": rdma_configuration(env, memlock, node_facts.node_root(environ)),
    }
    with open(log_path, "w") as log:
        log.write(banner(launch))
    plugins = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(log_path, "ab") as log:
        try:
            # A session of its own: no terminal, nothing tied to the exec
            # that started it, and one process group for stop to signal.
            # pylint: disable-next=ansible-bad-function,consider-using-with
            process = subprocess.Popen([sys.executable, "-c", _SUPERVISOR_CODE, plugins, run_dir,
                                        json.dumps(command)], env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        except OSError as exc:
            raise LaunchError("cannot start the supervisor (%s -c ...): %s" % (sys.executable, exc))
    launch.update(pid=process.pid, pgid=process.pid, started=time.time(),
                  started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    write_atomically(os.path.join(run_dir, LAUNCH_FILE), json.dumps(launch, indent=2, sort_keys=True) + "\n")
    current = status(run_dir)
    if current["state"] == NOT_STARTED:
        current["state"] = RUNNING
    current.update(started=True, already_running=False, already_finished=False, command=command,
                   rdzv_endpoint=launch["rdzv_endpoint"], nproc_per_node=options.nproc_per_node, memlock=memlock,
                   nccl_env=nccl_report, rdma=launch["rdma"])
    return current


# -------------------------------------------------------------- supervisor

def supervise(run_dir, command_json):
    """The detached process that start leaves behind: runs torchrun (in its
    own process group, with the log as output), waits for it and writes its
    exit status to run_dir/exit_code. A signal to the group reaches torchrun
    too, which stops its workers; the supervisor only waits on."""
    command = json.loads(command_json)
    received = []

    def note(number, frame):  # pylint: disable=unused-argument
        received.append(number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, note)
    host_root = node_facts.node_root(os.environ)
    counters_before = port_counters.read_port_counters(node_facts.NodeReader(host_root))
    started = time.time()
    try:
        # pylint: disable-next=ansible-bad-function,consider-using-with
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    except OSError as exc:
        sys.stdout.write("[mlinfra-train] cannot start torchrun: %s\n" % exc)
        code = 127
    else:
        code = child.wait()
    sys.stdout.write("[mlinfra-train] torchrun exited with %d after %.1fs%s\n" % (
        code, time.time() - started, " (signals received: %s)" % ", ".join(str(n) for n in received)
        if received else ""))
    sys.stdout.flush()
    moved = port_counters.port_deltas(counters_before,
                                      port_counters.read_port_counters(node_facts.NodeReader(host_root)))
    write_atomically(os.path.join(run_dir, PORT_COUNTERS_FILE), json.dumps(moved, sort_keys=True) + "\n")
    write_atomically(os.path.join(run_dir, EXIT_CODE_FILE), "%d\n" % code)
    return 0


# -------------------------------------------------------------------- stop

def stop(run_dir, grace=DEFAULT_GRACE):
    """SIGTERM to every process of the launch, SIGKILL to what is left after
    grace seconds; returns the status, with what was signalled and what (if
    anything) is left."""
    run_dir = os.path.abspath(run_dir)
    launch = read_launch(run_dir)
    if launch is None:
        result = status(run_dir)
        result.update(stopped=False, terminated=[], killed=[], left=[], error="no launch in %s" % run_dir)
        return result
    with _Lock(run_dir):
        alive = launch_processes(launch)
        if not alive:
            result = status(run_dir)
            result.update(stopped=False, terminated=[], killed=[], left=[])
            return result
        requested = time.time()
        write_atomically(os.path.join(run_dir, STOP_FILE), json.dumps({"requested": requested, "grace": grace}))
        terminated = set()
        deadline = time.time() + grace
        while alive and time.time() < deadline:
            fresh = [pid for pid in alive if pid not in terminated]
            if fresh:
                _signal_group(launch["pgid"], signal.SIGTERM)
                for pid in fresh:
                    _signal(pid, signal.SIGTERM)
                terminated.update(fresh)
            time.sleep(_POLL)
            alive = launch_processes(launch)
        killed = []
        deadline = time.time() + _KILL_WAIT
        while alive and time.time() < deadline:
            _signal_group(launch["pgid"], signal.SIGKILL)
            for pid in alive:
                if _signal(pid, signal.SIGKILL) and pid not in killed:
                    killed.append(pid)
            time.sleep(_POLL)
            alive = launch_processes(launch)
        write_atomically(os.path.join(run_dir, STOP_FILE),
                         json.dumps({"requested": requested, "stopped": time.time(), "grace": grace}))
    result = status(run_dir)
    result.update(stopped=not alive, terminated=sorted(terminated), killed=sorted(killed), left=alive)
    if alive:
        result["error"] = "processes %s of the launch are still there after SIGKILL" % alive
    return result


# ------------------------------------------------------------- foreground

def _copy_new(path, position, out):
    """Writes what path gained since position to out; the new position."""
    try:
        with open(path, "rb") as handle:
            handle.seek(position)
            data = handle.read()
    except (IOError, OSError):
        return position
    if data:
        out.write(data.decode("utf-8", "replace"))
        out.flush()
    return position + len(data)


def exit_status(result):
    """The process exit status that tells how the run ended: 0 only when it
    succeeded; torchrun's own status when it failed; 128 + the signal when a
    signal ended it (as a shell reports it); 1 otherwise."""
    code = result.get("exit_code")
    if result.get("state") == SUCCEEDED:
        return 0
    if isinstance(code, int) and code < 0:
        return 128 + (-code)
    if isinstance(code, int) and 0 < code < 256:
        return code
    return 1


def _exit_notice(pid):
    """A descriptor that becomes readable when process pid exits (Linux's
    pidfd, Python 3.9 and later), or None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError, TypeError):
        return None


def wait(result, out, grace=DEFAULT_GRACE, poll=1.0):
    """For ``start --wait``: copies the node's log to out while torchrun runs
    (a Job's container log is then the node's log), stops the run on
    SIGTERM or SIGINT (Kubernetes deleting the pod) and returns the final
    status. A start that was refused is returned as it is."""
    if not (result.get("started") or result.get("already_running")):
        return result
    run_dir = result["run_dir"]
    launch = read_launch(run_dir)
    received = []

    def note(number, frame):  # pylint: disable=unused-argument
        received.append(number)

    previous = dict((number, signal.signal(number, note)) for number in (signal.SIGTERM, signal.SIGINT))
    position, stopped = 0, False
    supervisor_exit = _exit_notice(launch.get("pid"))
    try:
        while True:
            position = _copy_new(launch["log"], position, out)
            if received and not stopped:
                stop(run_dir, grace)
                stopped = True
            if read_exit_code(run_dir)[0] is not None or not launch_processes(launch):
                break
            if supervisor_exit is None:
                time.sleep(poll)
            else:
                # Wakes as soon as the supervisor exits (it writes the exit
                # status last), not up to a poll later.
                select.select([supervisor_exit], [], [], poll)
    finally:
        if supervisor_exit is not None:
            os.close(supervisor_exit)
        for number, handler in previous.items():
            signal.signal(number, handler)
    _copy_new(launch["log"], position, out)
    return status(run_dir)


# --------------------------------------------------------------------- CLI

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError("%s: %s" % (self.prog, message))


def build_parser():
    parser = _Parser(
        prog="mlinfra-train",
        description="Start this pod's part of a multi-node training run (torchrun, c10d rendezvous on pod 0) "
                    "detached, report its state and metrics, stop it. Prints one JSON object; exit status 0 when "
                    "it could report (a refused start too: state failed-to-start), 2 on a bad command line.")
    commands = parser.add_subparsers(dest="subcommand", metavar="{start,status,stop}")
    commands.required = True

    run = commands.add_parser("start", help="start this node's part, detached")
    run.add_argument("--run-dir", required=True, help="directory of this launch's files (created)")
    run.add_argument("--run-id", required=True, help="the job's id, the same on every node (the rendezvous id)")
    run.add_argument("--nnodes", type=int, required=True, help="number of pods in the job")
    run.add_argument("--nproc-per-node", type=int, required=True, help="processes (GPUs) per pod")
    run.add_argument("--node-rank", type=int, help="this pod's rank (default: the ordinal of $POD_NAME or $HOSTNAME)")
    run.add_argument("--rdzv-host", help="rendezvous host, pod 0 (default $MASTER_ADDR)")
    run.add_argument("--rdzv-port", type=int, help="rendezvous port (default $MASTER_PORT or %d)" % DEFAULT_PORT)
    run.add_argument("--join-timeout", type=int, default=DEFAULT_JOIN_TIMEOUT,
                     help="seconds the rendezvous waits for every node (default %(default)s)")
    run.add_argument("--local-addr", help="this node's address for the rendezvous (torchrun --local-addr; default: "
                                          "its fully qualified host name)")
    run.add_argument("--backend-hint", choices=BACKENDS, default="auto",
                     help="exported as MLINFRA_TRAIN_BACKEND to the workload (tiny_lm.py reads it); auto: unset")
    run.add_argument("--workload", choices=WORKLOADS,
                     help="torchtitan (python -m torchtitan.train), script, or demo (the collection's tiny_lm.py; "
                          "default: script when --script is given, else torchtitan)")
    run.add_argument("--config", help="TorchTitan job TOML (--job.config_file)")
    run.add_argument("--override", action="append", default=[], metavar="SECTION.KEY=VALUE",
                     help="TorchTitan option, as --section.key value (true/false: flags); repeatable")
    run.add_argument("--script", help="the training script of --workload script")
    run.add_argument("--workdir", help="working directory of the run (default: the current one)")
    run.add_argument("--nccl-env", help="NCCL environment file (default $MLINFRA_RUN_DIR/nccl.env; '' for none)")
    run.add_argument("--python", default=sys.executable, help="python that runs torchrun (default: this one)")
    run.add_argument("--resolve-timeout", type=int, default=0,
                     help="seconds to wait for the rendezvous host to resolve (default: fail at once)")
    run.add_argument("--wait", action="store_true",
                     help="stay in the foreground: copy the node's log to standard output until torchrun ends, "
                          "then print the JSON status and exit with torchrun's status (a Job's container); "
                          "SIGTERM stops the run")

    report = commands.add_parser("status", help="state, exit status, latest metrics and log tail")
    report.add_argument("--run-dir", required=True)

    halt = commands.add_parser("stop", help="SIGTERM, then SIGKILL after the grace period")
    halt.add_argument("--run-dir", required=True)
    halt.add_argument("--grace", type=float, default=DEFAULT_GRACE,
                      help="seconds between SIGTERM and SIGKILL (default %(default)s)")
    return parser


def parse(argv):
    """The options; what follows the first ``--`` goes to the workload."""
    argv = list(argv)
    extra = []
    if "--" in argv:
        index = argv.index("--")
        argv, extra = argv[:index], argv[index + 1:]
    options = build_parser().parse_args(argv)
    if extra and options.subcommand != "start":
        raise UsageError("mlinfra-train %s: takes no arguments after --" % options.subcommand)
    options.extra = extra
    return options


def run(options, environ=None):
    if options.subcommand == "start":
        return start(options, environ)
    if options.subcommand == "status":
        return status(options.run_dir)
    if options.grace < 0:
        raise UsageError("mlinfra-train stop: --grace must be 0 or more")
    return stop(options.run_dir, options.grace)


def main(argv=None, environ=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        options = parse(argv)
        result = run(options, environ)
    except UsageError as exc:
        sys.stderr.write("%s\n" % exc)
        build_parser().print_usage(sys.stderr)
        sys.stdout.write(json.dumps({"state": BAD_USAGE, "error": str(exc)}, sort_keys=True) + "\n")
        return 2
    if options.subcommand == "start" and options.wait:
        result = wait(result, sys.stdout)
        # The log above already holds the tail; repeated inside this line,
        # its metrics lines would be read twice by whoever parses the log.
        result.pop("log_tail", None)
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        return exit_status(result)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0
