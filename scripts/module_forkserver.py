# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""A fork server for the Ansible module processes of the test suite.

Every task of a playbook runs its module as a new Python process
(``python AnsiballZ_<module>.py``), and most of such a process's time here is
importing: ansible's module_utils and, for kubernetes.core's modules, the
kubernetes client with urllib3, requests, yaml and pydantic, 0.3 to 0.45 s of
a k8s_info that takes about 0.8 s (docs/measurements/test-suite-history.md,
"A fork server for the modules"). The suite starts a few thousand of them.

The server imports those third-party packages once and forks a copy of
itself for each module process: the process Ansible started (the client)
hands the server its standard streams, arguments, working directory and
environment, and waits; the forked copy runs the AnsiballZ script exactly as
``python script`` would (``runpy.run_path`` as ``__main__``) and sends back
the exit status, which the client exits with. A signal the client gets is
passed on to the copy. The code under test (ansible's module wrapper, the
module, its module_utils, the collections' code) is imported by the copy
from the module's own zip as always; only packages installed in the
environment are imported ahead.

Only the test suite uses it: tests/ansible_cli.py starts a server per
pytest process and names its socket directory in MLINFRA_MODULE_FORKSERVER
for the ansible processes it runs. README's commands, the molecule stage,
oldest-core's converge run and every user run modules the ordinary way, so
that path stays tested too. Anything unusual (no server for this
interpreter, another PYTHONPATH, an async task, pipelining) runs the module
the ordinary way; MLINFRA_MODULE_FORKSERVER=0 turns it off.

scripts/setup.sh installs this file with a .pth file that imports it into
the environments it makes (as scripts/zipimport_cache.py); at interpreter
start-up it only looks at two environment variables and sys.argv unless it
delegates.
"""

import os
import sys

ENV = "MLINFRA_MODULE_FORKSERVER"
# Installed packages that Ansible modules import; each is imported ahead if
# the environment has it.
PRELOAD = ("ansible.module_utils.basic", "kubernetes.client", "kubernetes.config", "kubernetes.dynamic",
           "kubernetes.stream", "kubernetes.watch", "urllib3", "requests", "yaml", "jsonpatch", "jinja2")
# Request length, then status words (the copy's pid, its exit status).
_LENGTH = "!I"
_STATUS = "!i"
# The signals a client passes on to its copy.
_FORWARDED_NAMES = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def socket_path(directory):
    """The socket of the server for this interpreter and PYTHONPATH: a module
    process of another environment never reaches it."""
    import hashlib

    key = "\0".join((sys.prefix, sys.version, os.environ.get("PYTHONPATH", "")))
    return os.path.join(directory, hashlib.sha256(key.encode("utf-8")).hexdigest()[:16] + ".sock")


def _is_module_script(argv):
    name = os.path.basename(argv[0]) if argv and argv[0] else ""
    # async_wrapper daemonizes; leave it to an interpreter of its own.
    return name.startswith("AnsiballZ_") and name.endswith(".py") and "async" not in name


def _recv_exact(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the connection closed after %d of %d bytes" % (len(data), size))
        data += chunk
    return data


# The client: the module process Ansible started.

def delegate():
    """Run this module process in the server, if there is one for it, and
    exit with its status; else return and let the interpreter go on."""
    directory = os.environ.get(ENV)
    if not directory or directory == "0" or not _is_module_script(sys.argv):
        return
    import json
    import signal
    import socket
    import struct

    # Held until the copy is known and they can be passed on to it: one
    # that came while the copy started would kill this process only and
    # leave the copy running (a loaded machine showed it).
    forwarded = [getattr(signal, name) for name in _FORWARDED_NAMES]
    signal.pthread_sigmask(signal.SIG_BLOCK, forwarded)
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(socket_path(directory))
        request = json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode("utf-8")
        socket.send_fds(conn, [struct.pack(_LENGTH, len(request))], [0, 1, 2])
        conn.sendall(request)
        child = struct.unpack(_STATUS, _recv_exact(conn, struct.calcsize(_STATUS)))[0]
    except (OSError, EOFError):
        # Nothing ran yet: run the module here.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
        return
    _forward_signals(child, forwarded)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
    try:
        status = struct.unpack(_STATUS, _recv_exact(conn, struct.calcsize(_STATUS)))[0]
    except (OSError, EOFError):
        # The copy died without a status (killed): as a shell reports it.
        status = 1
    os._exit(status)


def _forward_signals(child, forwarded):
    import signal

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for signum in forwarded:
        signal.signal(signum, forward)


# The server and its copies.

def _preload():
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # pylint: disable=broad-exception-caught
            pass


def _reset_process_state(env):
    """What the imported packages read from the environment at import time,
    read again from the module process's."""
    os.environ.clear()
    os.environ.update(env)
    import tempfile

    tempfile.tempdir = None
    kube_config = sys.modules.get("kubernetes.config.kube_config")
    if kube_config is not None:
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = os.environ.get("KUBECONFIG", "~/.kube/config")


def _run_copy(conn):
    """In the forked copy: become the module process and run its script."""
    import atexit
    import json
    import runpy
    import signal
    import socket
    import struct
    import traceback

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    message, fds, _flags, _address = socket.recv_fds(conn, struct.calcsize(_LENGTH), 3)
    request = json.loads(_recv_exact(conn, struct.unpack(_LENGTH, message)[0]).decode("utf-8"))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    _reset_process_state(request["env"])
    argv = request["argv"]
    sys.argv = list(argv)
    # As `python script` puts the script's directory first.
    sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
    conn.sendall(struct.pack(_STATUS, os.getpid()))
    status = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code
        else:
            sys.stderr.write("%s\n" % (exc.code,))
            status = 1
    except BaseException:  # pylint: disable=broad-exception-caught
        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()  # pylint: disable=protected-access
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.sendall(struct.pack(_STATUS, status))
        finally:
            os._exit(status)


def serve(directory):
    """Import ahead, listen on this interpreter's socket in directory, fork a
    copy per connection; end when the process that started it has gone."""
    import signal
    import socket

    _preload()
    path = socket_path(directory)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    partial = "%s.%d" % (path, os.getpid())
    listener.bind(partial)
    listener.listen(128)
    os.rename(partial, path)
    # The copies are reaped by the kernel; each resets this for its module.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    parent = os.getppid()
    listener.settimeout(2)
    while os.getppid() == parent:
        try:
            conn, _address = listener.accept()
        except socket.timeout:
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            listener.close()
            _run_copy(conn)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
else:
    delegate()
