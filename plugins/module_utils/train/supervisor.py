# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Starting, supervising and stopping a run: ``mlinfra train start`` (the
launch settled and refused before anything starts, then torchrun under a
detached supervisor), the supervisor itself, ``stop``, and the foreground
wait of ``start --wait`` (a Job's pod).

Standard library only: runs in the pods (``mlinfra train``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

from ..common.files import write_atomically
from ..fabric import port_counters
from ..fabric.pod_bench import ordinal_of
from ..node import facts as node_facts
from .launch import (
    KILL_WAIT, PLUGINS_DIR, POLL, SUPERVISOR_CODE, DEFAULT_GRACE, DEFAULT_PORT, DEMO_SCRIPT, EXIT_CODE_FILE,
    FAILED_TO_START, LAUNCH_FILE, NOT_STARTED, PORT_COUNTERS_FILE, RUNNING, STOP_FILE, SUCCEEDED, TOKEN_VARIABLE,
    banner, format_override, LaunchError, load_nccl_env, raise_memlock, rdma_configuration, rdzv_endpoint,
    torchrun_command, torchtitan_entry)
from .run_dir import RunLock, signal_pid, signal_group, launch_processes, read_exit_code, read_launch
from .run_status import status


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
        plugins = environ.get("MLINFRA_PLUGINS_DIR") or PLUGINS_DIR
        options.script = os.path.normpath(os.path.join(plugins, "..", DEMO_SCRIPT))
        if not os.path.isfile(options.script):
            raise LaunchError("the demo's %s is not in this pod (the train-assets ConfigMap mounts it)"
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
        with RunLock(run_dir):
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
                              "(mlinfra train stop --run-dir %s) or use another run directory"
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
    plugins = PLUGINS_DIR
    with open(log_path, "ab") as log:
        try:
            # A session of its own: no terminal, nothing tied to the exec
            # that started it, and one process group for stop to signal.
            # pylint: disable-next=ansible-bad-function,consider-using-with
            process = subprocess.Popen([sys.executable, "-c", SUPERVISOR_CODE, plugins, run_dir,
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
        sys.stdout.write("[mlinfra train] cannot start torchrun: %s\n" % exc)
        code = 127
    else:
        code = child.wait()
    sys.stdout.write("[mlinfra train] torchrun exited with %d after %.1fs%s\n" % (
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
    with RunLock(run_dir):
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
                signal_group(launch["pgid"], signal.SIGTERM)
                for pid in fresh:
                    signal_pid(pid, signal.SIGTERM)
                terminated.update(fresh)
            time.sleep(POLL)
            alive = launch_processes(launch)
        killed = []
        deadline = time.time() + KILL_WAIT
        while alive and time.time() < deadline:
            signal_group(launch["pgid"], signal.SIGKILL)
            for pid in alive:
                if signal_pid(pid, signal.SIGKILL) and pid not in killed:
                    killed.append(pid)
            time.sleep(POLL)
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
