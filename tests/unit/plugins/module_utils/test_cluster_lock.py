"""module_utils/cluster/lock.py: who holds a deployment's lock, when a lock
may be taken over, and what a play that waited in vain says. The process
table is a directory laid out as /proc is."""

import datetime
import os

import pytest
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import lock as cluster_lock

NOW = datetime.datetime(2026, 11, 28, 2, 0, 0, tzinfo=datetime.timezone.utc)


def fake_process(proc, pid, parent, cmdline, start):
    os.makedirs(str(proc / str(pid)))
    # pid (comm) state ppid ... field 22 is the start time; comm may hold spaces.
    fields = ["S", str(parent)] + ["0"] * 17 + [str(start)] + ["0"] * 10
    (proc / str(pid) / "stat").write_text("%d (%s) %s\n" % (pid, cmdline.split("\0")[0][:15], " ".join(fields)))
    (proc / str(pid) / "cmdline").write_bytes(cmdline.encode())


@pytest.fixture
def proc(tmp_path):
    """init, a shell, ansible-playbook (pid 100), its worker (200), the
    module's shell (300) and the module (400)."""
    fake_process(tmp_path, 1, 0, "/sbin/init", 1)
    fake_process(tmp_path, 50, 1, "bash", 40)
    fake_process(tmp_path, 100, 50, "/usr/bin/python3\0/usr/bin/ansible-playbook\0deploy.yml", 5000)
    fake_process(tmp_path, 200, 100, "/usr/bin/python3\0/usr/bin/ansible-playbook\0deploy.yml", 5100)
    fake_process(tmp_path, 300, 200, "/bin/sh\0-c\0python3 module", 5200)
    fake_process(tmp_path, 400, 300, "python3\0module", 5300)
    return tmp_path


def test_the_holder_is_the_plays_main_process_not_the_worker_of_one_task(proc):
    assert cluster_lock.play_process(300, str(proc)) == 100
    assert cluster_lock.process_start(100, str(proc)) == 5000
    assert cluster_lock.process_start(999, str(proc)) is None
    assert cluster_lock.play_process(50, str(proc)) is None


def test_a_holder_reads_back():
    identity = cluster_lock.holder_identity("deploy.yml", "alice", "bastion", 100, 5000)
    assert identity == "deploy.yml by alice@bastion, pid 100 (start 5000)"
    assert cluster_lock.parse_holder(identity) == {"action": "deploy.yml", "user": "alice", "host": "bastion",
                                                   "pid": 100, "start": 5000}
    assert cluster_lock.parse_holder("kube-controller-manager_1234") is None


def spec(identity, minutes_ago=1, duration=3600):
    taken = cluster_lock.micro_time(NOW - datetime.timedelta(minutes=minutes_ago))
    return {"holderIdentity": identity, "leaseDurationSeconds": duration, "acquireTime": taken, "renewTime": taken}


ME = "deploy.yml by bob@bastion, pid 100 (start 5000)"


@pytest.mark.parametrize("live,verdict", [
    ({}, ("take", "free")),
    (spec(ME), ("take", "ours")),
    (spec("teardown.yml by alice@laptop, pid 7 (start 1)", minutes_ago=61), ("take", "expired")),
    # Another host: nothing here can see its process, so it is honoured.
    (spec("teardown.yml by alice@laptop, pid 7 (start 1)"), ("wait", "teardown.yml by alice@laptop, pid 7 (start 1)")),
    # This host, a process that is gone (or whose pid now is another's).
    (spec("scale.yml by bob@bastion, pid 999 (start 1)"), ("take", "its process is gone")),
    (spec("scale.yml by bob@bastion, pid 200 (start 1)"), ("take", "its process is gone")),
    # This host, another play that still runs.
    (spec("scale.yml by bob@bastion, pid 200 (start 5100)"), ("wait", "scale.yml by bob@bastion, pid 200 (start 5100)")),
    # A holder of another tool's format is honoured until it expires.
    (spec("someone-else"), ("wait", "someone-else")),
])
def test_when_a_lock_may_be_taken(proc, live, verdict):
    assert cluster_lock.judge(live, ME, NOW, "bastion", str(proc)) == verdict


def test_the_refusal_names_the_holder_and_the_fixes():
    held = spec("teardown.yml by alice@laptop, pid 7 (start 1)", minutes_ago=2)
    assert cluster_lock.held_message(held["holderIdentity"], held, 60, "team", "h-kim", NOW) == (
        "another play changes this deployment: the lock team/h-kim-lock is held by teardown.yml by alice@laptop, "
        "pid 7 (start 1) since 01:58:00 UTC (120 s ago); waited 60 s (cluster_lock_wait). Fix: run again when it "
        "has finished, or raise cluster_lock_wait to wait longer; if that play is gone (its controller host is "
        "down), delete the lock: kubectl -n team delete lease h-kim-lock")
