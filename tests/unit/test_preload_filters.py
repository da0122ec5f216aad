"""The preload_filters callback, on a real ansible-playbook run: without it,
every task that uses one of the collection's filters loads every filter file
of the collection again in its worker process (Ansible's filter loader reads
each file of a collection to find a filter by name); with it, the controller
loads them once before the first task, and the workers forked after it read
none.

What is counted: the files of plugins/filter/ that a process of the run
opens (a source or its bytecode), by Python's own audit hook, which a
sitecustomize module installs in the controller and which each forked
worker inherits."""

import os
import subprocess
import sys
import textwrap

from ansible_cli import ansible_env
from conftest import REPO

TASKS = 4
PLAYBOOK = "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(
    "    - ansible.builtin.debug:\n        msg: \"{{ 'app-%d' | mlinfra.multinode.owner_labels }}\"\n" % number
    for number in range(TASKS))
SITECUSTOMIZE = textwrap.dedent('''
    import os, sys
    def _opened(event, args):
        if event == "open" and isinstance(args[0], str) and "/plugins/filter/" in args[0]:
            with open(os.environ["FILTER_OPENS"], "a") as handle:
                handle.write("%d %s\\n" % (os.getpid(), os.path.basename(args[0]).split(".")[0]))
    sys.addaudithook(_opened)
''')


def opens(tmp_path, callbacks):
    """(the processes that opened filter files, how often each file was
    opened) in one run of the playbook with ``callbacks`` enabled."""
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    log = tmp_path / ("opens-%d.log" % len(callbacks))
    env = ansible_env(PYTHONPATH=str(tmp_path), FILTER_OPENS=str(log), ANSIBLE_CALLBACKS_ENABLED=",".join(callbacks),
                      ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", str(tmp_path / "pb.yml")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0 and "app.kubernetes.io/instance: app-3" in proc.stdout, proc.stdout
    entries = [line.split() for line in log.read_text().splitlines()]
    counts = {}
    for _pid, name in entries:
        if name.endswith("__pycache__") or name == "__init__":
            continue
        counts[name] = counts.get(name, 0) + 1
    return set(pid for pid, _name in entries), counts


def test_the_workers_load_no_filter_file_once_the_controller_has(tmp_path):
    without_pids, without = opens(tmp_path, ["ansible.posix.profile_tasks"])
    with_pids, loaded = opens(tmp_path, ["ansible.posix.profile_tasks", "mlinfra.multinode.preload_filters"])
    # Without it, each task's worker opened every filter file: those of the
    # filter used, and all the others (owner_labels is in ownership.py).
    assert without["ownership"] >= TASKS and without["workload_manifests"] >= TASKS, without
    assert len(without_pids) >= TASKS
    # With it, one process (the controller) opened them all, whatever the
    # number of tasks (ansible-core 2.20 reads some twice, 2.21 once).
    assert len(with_pids) == 1, with_pids
    assert set(loaded) == set(without) and max(loaded.values()) < TASKS, loaded
