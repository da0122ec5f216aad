"""tools/localcluster/faults.py: the faults the local cluster plays on a
node for the soak's attribution tests - which pods get them, the pod's own
copy of the node root (its CPU set replaced, its port counters advancing
while it runs torchrun) and its processes stopped for a share of the time."""

import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1].parent
SPEC = importlib.util.spec_from_file_location("faults", ROOT / "tools" / "localcluster" / "faults.py")
faults = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(faults)
SNAPSHOT = ROOT / "tests" / "fixtures" / "nodes" / "roce-counters"
PORT = Path("sys/class/infiniband/mlx5_6/ports/1")


@pytest.mark.parametrize("spec, words", [
    ({"pods": "some"}, "'every' or 'odd'"), ({"cpus": "0-3;7"}, "a CPU list"), ({"slowdown": 1}, "below 1"),
    ({"sloowdown": 0.5}, "unknown fault keys ['sloowdown']")])
def test_a_bad_fault_is_refused(spec, words):
    with pytest.raises(faults.FaultError, match=words.replace("[", r"\[").replace("]", r"\]")):
        faults.Fault(spec)


def test_every_other_pod_on_the_node_gets_its_own_root_with_the_fault(tmp_path):
    fault = faults.Fault({"pods": "odd", "cpus": "0-31,64-95", "slowdown": 0.5,
                          "counters": {"mlx5_6/1": {"symbol_error": 100}}})
    played = faults.Faults(tmp_path / "state", lambda pdir: [])

    def place(uid, pdir=None, node="node-x", fault=fault, runs=True):
        """As the pod sync does: the root, then the count once the pod runs."""
        root = played.root_for(node, uid, pdir or tmp_path / uid, SNAPSHOT, fault)
        if runs:
            played.counted(node, uid, fault)
        return root

    roots = [place(uid) for uid in ("a", "b", "c", "a")]
    # The first and third pod; the first again when configured again.
    assert roots == [tmp_path / "a" / "root", None, tmp_path / "c" / "root", tmp_path / "a" / "root"]
    # A pod replaced before it ran takes no place: the one after it is the
    # fourth (no fault), and the next the fifth.
    assert [place("x", runs=False), place("y"), place("z")] == [None, None, tmp_path / "z" / "root"]
    played.forget("z")
    assert sorted(pod.uid for pod in played.pods.values()) == ["a", "c"]
    status = (roots[0] / "proc" / "self" / "status").read_text()
    assert "Cpus_allowed_list:\t0-31,64-95\n" in status and "Cpus_allowed_list:\t0-127" not in status
    # Another node counts its own pods, and so does another fault.
    assert place("b", node="node-y") == tmp_path / "b" / "root"
    other = faults.Fault({"pods": "odd", "slowdown": 0.5})
    assert place("d", fault=other) == tmp_path / "d" / "root"
    played.forget("c")
    assert sorted(pod.uid for pod in played.pods.values()) == ["a", "b", "d"]
    # A pod that takes over a directory (a StatefulSet's pod of that name,
    # made again) replaces the faulted one there, its deletion seen or not.
    assert place("e", pdir=tmp_path / "a", fault=None) is None
    assert sorted(pod.uid for pod in played.pods.values()) == ["b", "d"]


def test_the_counters_advance_with_the_time_the_pod_runs(tmp_path):
    fault = faults.Fault({"counters": {"mlx5_6/1": {"symbol_error": 10.5, "np_cnp_sent": 2}},
                          "gigabytes_per_second": 2})
    pod = faults.FaultedPod("u", tmp_path, faults.Faults(tmp_path, list).root_for(
        "n", "u", tmp_path, SNAPSHOT, fault), fault)

    def read(directory, name):
        return int((pod.root / PORT / directory / name).read_text())

    before = read("counters", "port_xmit_data")
    pod.advance(1.0)
    pod.advance(1.0)
    assert read("counters", "symbol_error") == 21 and read("hw_counters", "np_cnp_sent") == 220413 + 4
    assert read("counters", "port_xmit_data") - before == 2 * 2 * 10 ** 9 // 4
    # The snapshot itself is untouched.
    assert int((SNAPSHOT / PORT / "counters" / "symbol_error").read_text()) == 0


def test_a_faulted_pod_s_processes_are_stopped_for_their_share_of_each_period(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.001)"])
    try:
        pod = faults.FaultedPod("u", tmp_path, tmp_path, faults.Fault({"slowdown": 0.8}))
        pod.workers = [child.pid]
        states = []
        done = threading.Event()

        def watch():
            while not done.is_set():
                states.append(Path("/proc/%d/stat" % child.pid).read_text().rsplit(")", 1)[1].split()[0])
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        for _period in range(3):
            faults.Faults._throttle([pod])
        done.set()
        watcher.join()
        assert "T" in states and set(states) - {"T"}
        assert Path("/proc/%d/stat" % child.pid).read_text().rsplit(")", 1)[1].split()[0] != "T"
    finally:
        child.kill()
        child.wait()


AGENT = """
import socket, subprocess, sys, time
quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
talking = subprocess.Popen([sys.executable, "-c", "import socket, time; s = socket.socket(); time.sleep(60)"])
print(quiet.pid, talking.pid, flush=True)
time.sleep(60)
"""


def test_only_workers_past_their_imports_are_slowed_and_the_agent_never(tmp_path):
    # The argument names the agent as torchrun's does (python -m torch.distributed.run).
    agent = subprocess.Popen([sys.executable, "-c", AGENT, "torch.distributed.run"], stdout=subprocess.PIPE, text=True)
    try:
        quiet, talking = (int(pid) for pid in agent.stdout.readline().split())
        deadline = time.time() + 10
        while not faults._has_socket(talking) and time.time() < deadline:
            time.sleep(0.05)
        played = faults.Faults(tmp_path, lambda pdir: [agent.pid, quiet, talking])
        pod = played.pods[tmp_path] = faults.FaultedPod("u", tmp_path, tmp_path, faults.Fault({"slowdown": 0.5}))
        assert played._rescan() == [pod] and sorted(pod.children) == sorted([quiet, talking])
        # The quiet one is still importing, as far as anyone can tell.
        assert pod.find_workers() and pod.workers == [talking]
    finally:
        subprocess.run(["pkill", "-P", str(agent.pid)], check=False)
        agent.kill()
        agent.wait()


def cpu_seconds(pid):
    fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_cpu_quota_holds_a_slowed_pod_s_workers_to_their_share_and_is_removed(tmp_path):
    name = "mlinfra-test-%d" % os.getpid()
    quota = faults.CpuQuota.find(name)
    if quota is None:
        pytest.skip("no writable cgroup hierarchy with the cpu controller here: the faults stop workers with signals")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        quota.limit("pod-uid", [busy.pid], 0.8)
        assert quota.groups["pod-uid"].is_dir()
        before, started = cpu_seconds(busy.pid), time.monotonic()
        time.sleep(1.0)
        share = (cpu_seconds(busy.pid) - before) / (time.monotonic() - started)
        # A fifth of a CPU (the clock ticks make it coarse); unlimited, it
        # takes a whole one on an idle core and at least a third when busy.
        assert 0.05 < share < 0.3, share
        quota.release("pod-uid")
        assert not (quota.base / "pod-uid").exists() and busy.poll() is None
    finally:
        busy.kill()
        busy.wait()
        faults.CpuQuota.remove_all(name)
    assert not quota.base.exists()
