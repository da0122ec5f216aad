"""Times the playbooks that touch every node on local clusters of 2, 32 and
256 fake GPU nodes (--sizes), side by side in one call, the sizes taking
turns in each round so that a change of load hits them alike:

    .venv/bin/python tools/perf/fleet_timing.py [--sizes 2 32 256] [--rounds 1] [--out DIR]

For each size n, with cluster_gpu_node_selector choosing the first n fake
nodes of tools/perf/fleet_nodes.py (one in 16 on a faulty snapshot):

  verify-rdma  the node checks on all n nodes and each node labelled with its
               verdict (-e verify_pod_checks=false -e verify_label_nodes=true);
               the run counts only if every node has a verdict and the
               faulty ones, and only they, did not pass
  deploy       deploy.yml of min(6, n) replicas by selector (the healthy ones:
               pods on a faulty node would rightly fail deploy's agreement
               check), tcp network mode (the SR-IOV operator's per-node work
               is not what this measures)
  status       status.yml
  scale        scale.yml to one replica
  teardown     teardown.yml

Each playbook's wall time, the controller's CPU (ansible-playbook and every
process it waited for) and its largest process's peak memory are printed as
a table, with the ratio to the smallest size, and the slowest tasks of the
largest size's run (profile_tasks). Logs and reports go under --out
(default .work/perf/fleet-timing). The fake nodes and namespaces are
removed at the end, also when a run fails or the script is interrupted.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet_nodes  # noqa: E402  (beside this file)

ROOT = fleet_nodes.ROOT
PLAYBOOKS = ("verify-rdma", "deploy", "status", "scale", "teardown")


def run_playbook(name, extra_vars, log):
    """(wall seconds, controller CPU seconds, peak MiB, exit status) of one
    ansible-playbook run; its output goes to ``log``."""
    cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), str(ROOT / "playbooks" / (name + ".yml")),
           "-i", str(ROOT / "inventories" / "local"), "-e", json.dumps(extra_vars)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    began = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=out, stderr=subprocess.STDOUT)
        # wait4: the rusage of this run's process tree alone.
        _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (time.monotonic() - began, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, proc.returncode)


def slowest_tasks(log, count=5):
    text = Path(log).read_text(errors="replace")
    recap = text.split("TASKS RECAP", 1)[-1]
    found = re.findall(r"^(.+?) -+ ([0-9.]+)s$", recap, re.M)
    return sorted(((float(seconds), name.strip()) for name, seconds in found), reverse=True)[:count]


def verdicts_problem(report_dir, size):
    """'' when every node of the run has a verdict and exactly the faulty
    ones did not pass; else what is wrong."""
    try:
        report = json.loads((Path(report_dir) / "latest.json").read_text())
    except (OSError, ValueError) as err:
        return "no report: %s" % err
    status = {node["node"]: node["status"] for node in report["nodes"]}
    wanted = [fleet_nodes.name_of(index) for index in range(size)]
    faulty = set(fleet_nodes.faulty(size))
    unchecked = [name for name in wanted if status.get(name) not in ("pass", "warn", "fail")]
    wrong = [name for name in wanted if name in status and (status[name] == "pass") == (name in faulty)]
    if unchecked:
        return "%d of %d nodes without a verdict: %s" % (len(unchecked), size, ", ".join(unchecked[:5]))
    if wrong:
        return "unexpected verdicts: %s" % ", ".join("%s %s" % (name, status[name]) for name in wrong[:8])
    return ""


def measure(size, round_number, out, namespace):
    """The runs of one size: {playbook: (wall, cpu, peak, problem)}."""
    selector = "%s=true" % fleet_nodes.size_label(size)
    base = {"cluster_namespace": namespace, "cluster_gpu_nodes": [], "cluster_gpu_node_selector": selector}
    replicas = min(6, size - len(fleet_nodes.faulty(size)))
    deployed = dict(base, cluster_gpu_node_selector="%s,%s=true" % (selector, fleet_nodes.HEALTHY_LABEL),
                    cluster_network_mode="tcp", cluster_rdma_nics=[], replicas=replicas)
    report_dir = out / ("reports-%d" % size)
    settings = {
        "verify-rdma": dict(base, verify_pod_checks=False, verify_label_nodes=True, verify_fail_on="never",
                            verify_report_dir=str(report_dir)),
        "deploy": deployed,
        "status": deployed,
        "scale": dict(deployed, replicas=1),
        "teardown": deployed,
    }
    results = {}
    for name in PLAYBOOKS:
        log = out / ("%s-%d-round-%d.log" % (name, size, round_number))
        wall, cpu, peak, code = run_playbook(name, settings[name], log)
        problem = "" if code == 0 else "failed (exit %d), see %s" % (code, log)
        if name == "verify-rdma" and not problem:
            problem = verdicts_problem(report_dir, size)
        results[name] = (wall, cpu, peak, problem, log)
        print("[fleet] nodes=%-3d round %d %-11s %6.1f s, controller CPU %5.1f s, peak %4.0f MiB%s"
              % (size, round_number, name, wall, cpu, peak, ("; " + problem) if problem else ""), flush=True)
    return results


def table(sizes, rounds):
    smallest = sizes[0]
    mean = {}
    for size in sizes:
        for name in PLAYBOOKS:
            runs = [round_results[size][name] for round_results in rounds]
            mean[size, name] = tuple(sum(run[i] for run in runs) / len(runs) for i in range(3))
    lines = ["| playbook | " + " | ".join("%d nodes: s (CPU s, MiB)" % size for size in sizes)
             + " | %d / %d nodes, wall | CPU |" % (sizes[-1], smallest),
             "|---|" + "---|" * (len(sizes) + 2)]
    for name in PLAYBOOKS:
        cells = ["%.1f (%.1f, %.0f)" % mean[size, name] for size in sizes]
        lines.append("| %s | %s | %.2fx | %.2fx |" % (
            name, " | ".join(cells), mean[sizes[-1], name][0] / mean[smallest, name][0],
            mean[sizes[-1], name][1] / mean[smallest, name][1]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 32, 256])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / ".work" / "perf" / "fleet-timing"))
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes))
    for size in sizes:
        fleet_nodes.size_label(size)  # refuses a size no label marks, before anything is made
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(ROOT / "tools" / "localcluster" / "cluster.sh"), "up"], check=True,
                   stdout=subprocess.DEVNULL)
    # Interrupted: end as an exit does, so the clean-up below runs (once:
    # a second signal, as `timeout` passes on, must not cut it short).

    def interrupted(*_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.exit(143)
    signal.signal(signal.SIGTERM, interrupted)
    namespaces = {size: "perf-fleet-%d-%d" % (size, os.getpid()) for size in sizes}
    status = 0
    try:
        fleet_nodes.remove()  # left by an interrupted run
        fleet_nodes.add(sizes[-1])
        print("[fleet] load average at the start: %s (%d cores)"
              % (" ".join(open("/proc/loadavg").read().split()[:3]), os.cpu_count()), flush=True)
        rounds = []
        for round_number in range(1, args.rounds + 1):
            rounds.append({size: measure(size, round_number, out, namespaces[size]) for size in sizes})
        if any(run[3] for round_results in rounds for results in round_results.values() for run in results.values()):
            status = 1
        print()
        print(table(sizes, rounds))
        print()
        for name in PLAYBOOKS:
            log = rounds[0][sizes[-1]][name][4]
            print("%s at %d nodes, slowest tasks: %s" % (name, sizes[-1], "; ".join(
                "%s %.1f s" % (task, seconds) for seconds, task in slowest_tasks(log))))
    finally:
        kubectl = ["bash", str(ROOT / "tools" / "localcluster" / "cluster.sh"), "kubectl"]
        for namespace in namespaces.values():
            subprocess.run(kubectl + ["delete", "namespace", namespace, "--ignore-not-found", "--wait=false"],
                           stdout=subprocess.DEVNULL, check=False)
        fleet_nodes.remove()
    return status


if __name__ == "__main__":
    sys.exit(main())
