"""Faults the local cluster plays on a node: what a flaky link or a bad CPU
placement does to a pod there, for the tests of the soak's attribution.

Nothing here runs RDMA hardware, so a fault is imitated where the
collection can see it: a node whose annotation localcluster.mlinfra.io/fault
holds a fault (JSON, see Fault) gives some of the pods placed on it a root
of their own, a copy of the node's snapshot in the pod's directory, in
which

  cpus      replaces the pod's Cpus_allowed_list (proc/self/status): the
            CPU set a kubelet's CPU manager handed out;
  counters  {"<device>/<port>": {"<counter>": per second}}: those port
            counters (counters/ or hw_counters/) advance while the pod runs
            torchrun, with port_xmit_data and port_rcv_data at
            gigabytes_per_second, as a link that takes errors would;
  slowdown  torchrun's workers in the pod get 1 - slowdown of one CPU
            from their rendezvous on: the throughput the fault costs (the
            torchrun agent and the workers' imports are left alone, so that
            the start-up costs what it does on other pods). CpuQuota says
            how, and Faults._throttle where no cgroup can be had.

``pods`` says which pods placed on the node get the fault: "every", or
"odd" (the first, third, ... pod that ran there since the fault was set,
counted by uid once set up to run), so that a soak that recreates its pods
sees it come and go. The pod's exec sessions read the copy through MLINFRA_HOST_ROOT.
A pod that mounts the host's /sys (a probe) reads the node's own snapshot:
it is neither faulted nor counted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Callable

FAULT_ANNOTATION = "localcluster.mlinfra.io/fault"
# Where no cgroup is at hand, workers are stopped for a share of every PERIOD.
# A benchmark's measurement of one message size over gloo takes tens of
# milliseconds here: a period of 100 ms let whole measurements run between
# two stops. At 20 ms the faults' own wake-ups, late on a loaded machine,
# stretched the running share (a faulted run came out only 18% slow); 50 ms
# keeps both short of a measurement and long against those delays.
PERIOD = 0.05
# How often the pods' processes are looked for again.
RESCAN_SECONDS = 0.5
WORD_BYTES = 4
TORCHRUN = b"torch.distributed.run"


class FaultError(ValueError):
    pass


class Fault:
    """A node's fault, checked."""

    def __init__(self, spec: dict) -> None:
        # Pods are counted afresh for each fault a node is given.
        self.digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        unknown = set(spec) - {"pods", "cpus", "counters", "slowdown", "gigabytes_per_second"}
        if unknown:
            raise FaultError(f"unknown fault keys {sorted(unknown)}")
        self.pods = spec.get("pods", "every")
        if self.pods not in ("every", "odd"):
            raise FaultError(f"fault pods is 'every' or 'odd', not {self.pods!r}")
        self.cpus = spec.get("cpus")
        if self.cpus is not None and not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", str(self.cpus)):
            raise FaultError(f"fault cpus is a CPU list such as 0-63, not {self.cpus!r}")
        self.slowdown = float(spec.get("slowdown", 0))
        if not 0 <= self.slowdown < 1:
            raise FaultError(f"fault slowdown is a share of the time, 0 to below 1, not {self.slowdown}")
        self.counters = {port: {name: float(rate) for name, rate in rates.items()}
                         for port, rates in (spec.get("counters") or {}).items()}
        self.gigabytes_per_second = float(spec.get("gigabytes_per_second", 1))

    @classmethod
    def of_node(cls, node: dict) -> "Fault | None":
        text = (node["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION)
        return cls(json.loads(text)) if text else None

    def applies(self, count: int) -> bool:
        return self.pods == "every" or count % 2 == 1


class CpuQuota:
    """A cgroup of the cpu controller for each slowed pod, which holds its
    workers to (1 - slowdown) of one CPU in every PERIOD_US.

    Stops sent from here (Faults._throttle) come late on a loaded machine,
    and the benchmark's barrier before each timed loop lines the loop up with
    the moment a stopped worker goes on: a loop shorter than the running
    share of a period then ran whole between two stops, and a faulted run
    came out no slower than a normal one. The kernel keeps a quota whatever
    the load, and a 10 ms period is shorter than any measurement. Needs a
    writable cgroup hierarchy with the cpu controller (root on this machine:
    cgroup v1's cpu hierarchy or cgroup v2's root); find() returns None
    without one."""

    PERIOD_US = 10000

    def __init__(self, mount: Path, version: int, name: str) -> None:
        self.mount, self.version = mount, version
        self.base = mount / name
        self.groups: dict[str, Path] = {}
        self.moved: dict[str, set[int]] = {}

    @classmethod
    def find(cls, name: str) -> "CpuQuota | None":
        """The quota under ``name`` (a cgroup of this cluster's, emptied of
        what an earlier run left), or None where none can be made."""
        for mount, version in _cpu_hierarchies():
            quota = cls(mount, version, name)
            try:
                quota.base.mkdir(exist_ok=True)
                if version == 2:
                    (quota.base / "cgroup.subtree_control").write_text("+cpu\n")
                quota._remove_groups()
            except OSError:
                continue
            return quota
        return None

    @classmethod
    def remove_all(cls, name: str) -> None:
        """Removes the cgroups under ``name`` (the cluster is going down)."""
        for mount, version in _cpu_hierarchies():
            quota = cls(mount, version, name)
            if quota.base.is_dir():
                quota._remove_groups()
                quota._remove(quota.base)

    def limit(self, uid: str, pids: list[int], slowdown: float) -> None:
        """Puts the pod's ``pids`` (the new ones) under its quota."""
        group = self.groups.get(uid)
        if group is None:
            group = self.base / uid
            group.mkdir(exist_ok=True)
            quota_us = max(1000, int(self.PERIOD_US * (1 - slowdown)))
            if self.version == 1:
                (group / "cpu.cfs_period_us").write_text("%d\n" % self.PERIOD_US)
                (group / "cpu.cfs_quota_us").write_text("%d\n" % quota_us)
            else:
                (group / "cpu.max").write_text("%d %d\n" % (quota_us, self.PERIOD_US))
            self.groups[uid], self.moved[uid] = group, set()
        for pid in set(pids) - self.moved[uid]:
            try:
                (group / "cgroup.procs").write_text("%d\n" % pid)
            except OSError:
                continue  # gone meanwhile
            self.moved[uid].add(pid)

    def release(self, uid: str) -> None:
        group = self.groups.pop(uid, None)
        self.moved.pop(uid, None)
        if group is not None:
            self._remove(group)

    def _remove_groups(self) -> None:
        for group in self.base.iterdir():
            if group.is_dir():
                self._remove(group)

    def _remove(self, group: Path) -> None:
        """Moves what still runs in ``group`` back to the root, then removes
        it (a cgroup with processes cannot be)."""
        try:
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    (self.mount / "cgroup.procs").write_text(pid + "\n")
                except OSError:
                    pass
            group.rmdir()
        except OSError:
            pass


def _cpu_hierarchies() -> list[tuple[Path, int]]:
    """(mount point, cgroup version) of the hierarchies with the cpu
    controller, from /proc/self/mountinfo."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        try:
            separator = fields.index("-")
            mount, fstype, options = Path(fields[4]), fields[separator + 1], fields[separator + 3].split(",")
        except (ValueError, IndexError):
            continue
        if fstype == "cgroup" and "cpu" in options:
            found.append((mount, 1))
        elif fstype == "cgroup2":
            # The cpu controller must reach the root's children (ours).
            try:
                if "cpu" in (mount / "cgroup.subtree_control").read_text().split():
                    found.append((mount, 2))
            except OSError:
                continue
    return found


class FaultedPod:
    def __init__(self, uid: str, pdir: Path, root: Path, fault: Fault) -> None:
        self.uid, self.pdir, self.root, self.fault = uid, pdir, root, fault
        self.pids: list[int] = []
        # The torchrun agents' children, and those of them past their imports
        # (a socket open: from their rendezvous on), which the fault slows.
        self.children: list[int] = []
        self.workers: list[int] = []
        self.running = False
        self.carry: dict[Path, float] = {}
        self.files = self.counter_files()

    def counter_files(self) -> dict[Path, float]:
        """Each counter file to advance and its rate per second."""
        files = {}
        for port, rates in self.fault.counters.items():
            device, number = port.split("/")
            base = self.root / "sys" / "class" / "infiniband" / device / "ports" / number
            words = self.fault.gigabytes_per_second * 1e9 / WORD_BYTES
            for name, rate in dict(rates, port_xmit_data=words, port_rcv_data=words).items():
                for directory in ("counters", "hw_counters"):
                    if (base / directory / name).is_file():
                        files[base / directory / name] = rate
        return files

    def find_workers(self) -> bool:
        """Updates ``workers``; True while a child is still importing."""
        self.workers = [pid for pid in self.workers if pid in self.children]
        self.workers += [pid for pid in self.children if pid not in self.workers and _has_socket(pid)]
        return len(self.workers) < len(self.children)

    def advance(self, seconds: float) -> None:
        for path, rate in self.files.items():
            amount = self.carry.get(path, 0.0) + rate * seconds
            whole = int(amount)
            self.carry[path] = amount - whole
            if whole:
                try:
                    path.write_text("%d\n" % (int(path.read_text().split()[0]) + whole))
                except (OSError, ValueError, IndexError):
                    # The pod was deleted meanwhile (its directory with it).
                    continue


class Faults:
    """The faulted pods of a cluster and the thread that plays their faults.
    ``processes_of(pdir)``: the pids of a pod's exec sessions."""

    def __init__(self, state_dir: Path, processes_of: Callable[[Path], list[int]],
                 quota: "CpuQuota | None" = None) -> None:
        self.counts_dir = state_dir / "faults"
        self.processes_of = processes_of
        # By pod directory: a directory holds one pod at a time (its name's),
        # and a pod that takes it over replaces the one before it there,
        # whether or not that one's deletion was seen (a watch that broke
        # misses it, and the old pod's entry would slow the new one's
        # processes, which carry the same directory).
        self.pods: dict[Path, FaultedPod] = {}
        self.lock = threading.Lock()
        self.quota = quota

    def _counts_file(self, node_name: str, fault: Fault) -> Path:
        return self.counts_dir / f"{node_name}-{fault.digest}.json"

    def _count(self, node_name: str, uid: str, fault: Fault) -> int:
        """The pod's place among the pods that ran on the node since it has
        this fault (1 for the first): where counted() recorded it, else the
        next place."""
        path = self._counts_file(node_name, fault)
        seen = json.loads(path.read_text()) if path.exists() else []
        return seen.index(uid) + 1 if uid in seen else len(seen) + 1

    def counted(self, node_name: str, uid: str, fault: Fault | None) -> None:
        """Records the pod in its place once it is set up to run. A pod
        replaced before that (the StatefulSet made another of its name)
        takes no place, so that "odd" follows the pods that ran."""
        if fault is None:
            return
        path = self._counts_file(node_name, fault)
        path.parent.mkdir(parents=True, exist_ok=True)
        seen = json.loads(path.read_text()) if path.exists() else []
        if uid not in seen:
            path.write_text(json.dumps(seen + [uid]))

    def root_for(self, node_name: str, uid: str, pdir: Path, snapshot: Path, fault: Fault | None) -> Path | None:
        """The pod's own root when the node's fault applies to it, else None.
        Called for every pod placed on a node with a snapshot."""
        with self.lock:
            before = self.pods.get(pdir)
            if before and before.uid != uid:
                self._drop(pdir)
        if fault is None or not fault.applies(self._count(node_name, uid, fault)):
            return None
        root = pdir / "root"
        if not root.exists():
            shutil.copytree(snapshot, root, symlinks=True)
            if fault.cpus:
                status = root / "proc" / "self" / "status"
                lines = [f"Cpus_allowed_list:\t{fault.cpus}" if line.startswith("Cpus_allowed_list:") else line
                         for line in status.read_text().splitlines()]
                status.write_text("\n".join(lines) + "\n")
        with self.lock:
            self.pods[pdir] = FaultedPod(uid, pdir, root, fault)
        return root

    def forget(self, uid: str) -> None:
        with self.lock:
            for pdir in [pdir for pdir, pod in self.pods.items() if pod.uid == uid]:
                self._drop(pdir)

    def _drop(self, pdir: Path) -> None:
        """Under the lock."""
        pod = self.pods.pop(pdir)
        if self.quota:
            self.quota.release(pod.uid)

    def _rescan(self) -> list[FaultedPod]:
        with self.lock:
            pods = list(self.pods.values())
        for pod in pods:
            pod.pids = self.processes_of(pod.pdir)
            agents = [pid for pid in pod.pids if TORCHRUN in _cmdline(pid)]
            pod.running = bool(agents)
            pod.children = [pid for pid in pod.pids if _parent(pid) in agents]
        return [pod for pod in pods if pod.running]

    def run(self) -> None:
        active: list[FaultedPod] = []
        scanned = last = 0.0
        while True:
            try:
                now = time.monotonic()
                if now - scanned >= RESCAN_SECONDS:
                    active, scanned = self._rescan(), now
                importing = False
                for pod in active:
                    pod.advance(now - last if last else 0.0)
                    importing = pod.find_workers() or importing
                last = now
                if active and not self.quota:
                    self._throttle(active)
                    continue
                if self.quota:
                    self._limit(active)
                # A worker's rendezvous is followed by its first measurement
                # within a few hundred milliseconds: look for it often.
                time.sleep(PERIOD / 5 if importing else PERIOD)
            except Exception as err:  # pylint: disable=broad-except  # the faults must go on for the other pods
                print(f"{time.strftime('%H:%M:%S')} faults: {err}", flush=True)
                time.sleep(PERIOD)

    def _limit(self, active: list[FaultedPod]) -> None:
        for pod in active:
            if pod.fault.slowdown and pod.workers:
                with self.lock:
                    if self.pods.get(pod.pdir) is pod:  # not dropped meanwhile
                        self.quota.limit(pod.uid, pod.workers, pod.fault.slowdown)

    @staticmethod
    def _throttle(active: list[FaultedPod]) -> None:
        """One PERIOD: each pod's workers stopped for its share of it, where
        no CpuQuota can be had (less exact on a loaded machine)."""
        started = time.monotonic()
        stopped = []
        try:
            for pod in sorted(active, key=lambda pod: pod.fault.slowdown):
                if pod.fault.slowdown:
                    _signal_all(pod.workers, signal.SIGSTOP)
                    stopped.append(pod)
            for pod in stopped:
                time.sleep(max(0.0, started + PERIOD * pod.fault.slowdown - time.monotonic()))
                _signal_all(pod.workers, signal.SIGCONT)
        finally:
            for pod in stopped:
                _signal_all(pod.workers, signal.SIGCONT)
        time.sleep(max(0.0, started + PERIOD - time.monotonic()))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _has_socket(pid: int) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
