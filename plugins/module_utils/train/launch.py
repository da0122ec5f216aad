# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""One pod's part of a multi-node training run: start it detached, report on
it, stop it.

The train role runs ``mlinfra train`` in every pod of the StatefulSet at once
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

This file holds what a launch is made of: its files' names, states and
defaults, the torchrun and TorchTitan command lines, and the environment a
launch starts in. Beside it: run_dir.py (the run directory and the launch's
processes), run_status.py (``status``), supervisor.py (``start``, the
supervisor, ``stop``, the foreground wait) and launch_cli.py (the command
line).

Standard library only: runs in the pods as ``mlinfra train``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import resource
import shlex
import subprocess

from ..fabric import nccl_env as nccl_detect
from ..node import facts as node_facts
from ..common.errors import MlinfraError

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
TAIL_BYTES = 64 * 1024
_NVIDIA_SMI_TIMEOUT = 20
POLL = 0.2
# After SIGKILL, how long to wait for the processes to be gone.
KILL_WAIT = 10

# The plugins directory this file lies in (plugins/module_utils/train/).
PLUGINS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The detached supervisor: this module run by the same python, found through
# the plugins directory, so that nothing of it is added to the workload's
# environment.
SUPERVISOR_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
                   "from module_utils.train.supervisor import supervise; sys.exit(supervise(sys.argv[2], sys.argv[3]))")

_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)+$")


class LaunchError(MlinfraError):
    """Why a launch is refused before anything starts; the message says how
    to fix it."""


class UsageError(MlinfraError):
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
    value (an explicit ``NCCL_DEBUG=TRACE mlinfra train ...`` wins, as a user
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
    lines = ["=" * 60, "mlinfra train: run %s, node %d of %d" % (launch["run_id"], launch["node_rank"],
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
