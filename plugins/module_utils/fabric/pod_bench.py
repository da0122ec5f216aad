# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""One pod's part of the collective benchmark run across the training pods.

verify-rdma runs ``mlinfra pod-bench`` in every pod of the StatefulSet at
once. Each starts torchrun as node ``node_rank`` of the job (the ordinal of
its StatefulSet pod's name), with ``NCCL_DEBUG=INFO`` so that NCCL says which
transport it really used, waits for it, and prints one JSON object: the exit
status, the transport check of its NCCL log lines (nccl_log), the tail of the
log, what each RDMA port's counters moved during the run (port_counters),
where the pod's CPUs and NICs sit against its GPUs (node_rails: what a soak
attributes degraded runs to), and on node 0 the benchmark's document
(collective_bench). The object is
printed whatever happened, so that a failed run is reported as that, with its
reason, and never taken for a pass.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import collective_bench
from . import nccl_log
from . import port_counters
from ..node.facts import NodeReader, gather_cpus, gather_netdevs, gather_numa, gather_nvidia, gather_rdma, node_root
from ..node.rails import cpu_placement, pod_rail_table, rail_bandwidth

LOG_TAIL_LINES = 25
# NCCL prints its transport lines at INFO; INIT and NET hold the network
# selection, the HCAs and the channel connections nccl_log reads.
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
# NCCL_IB_HCA's syntax: device names, each with an optional :port, after an
# optional ^ (exclude) or = (exact names). Nothing else reaches torchrun's
# environment from the command line.
IB_HCA = re.compile(r"^[\^=]?[A-Za-z0-9_.-]+(:[0-9]+)?(,[A-Za-z0-9_.-]+(:[0-9]+)?)*$")


def ordinal_of(hostname):
    """The StatefulSet ordinal of a pod name (``h-kim-3`` -> 3)."""
    match = re.search(r"-(\d+)$", hostname or "")
    if not match:
        raise ValueError("cannot tell this pod's node rank from its name %r: a StatefulSet pod is called "
                         "<name>-<ordinal>; pass --node-rank" % (hostname,))
    return int(match.group(1))


def torchrun_command(python, bench, nnodes, node_rank, nproc_per_node, master_addr, master_port, bench_args,
                     json_path):
    """torchrun (as ``python -m torch.distributed.run``, so that the pod's
    python with torch is the one used) starting the benchmark on this node;
    ``bench`` is its command (``[.../mlinfra, nccl-bench]``)."""
    return [python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--node-rank", str(node_rank),
            "--nproc-per-node", str(nproc_per_node), "--master-addr", master_addr, "--master-port",
            str(master_port)] + list(bench) + list(bench_args) + ["--json", json_path]


def run_with_timeout(command, env, log_path, timeout):
    """Runs command with its output to log_path; on timeout kills its whole
    process group (torchrun and its workers). Returns (exit code, timed out)."""
    with open(log_path, "wb") as log:
        # Not a module: this runs in the pod, with no AnsibleModule to run commands.
        # pylint: disable-next=ansible-bad-function,consider-using-with
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return process.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(), True


def tail(path, count=LOG_TAIL_LINES):
    with open(path, "rb") as handle:
        lines = handle.read().decode("utf-8", "replace").splitlines()
    return lines[-count:]


def summarize_nccl(parsed):
    """What the report shows of a parsed NCCL log."""
    keys = ("nccl_version", "net", "net_kind", "gpudirect", "nranks", "nodes", "net_channels", "gdr_channels")
    summary = dict((key, parsed.get(key)) for key in keys)
    summary["hcas"] = sorted(set("%s:%s" % (hca["device"], hca["port"]) for hca in parsed.get("hcas") or ()))
    summary["evidence"] = parsed.get("evidence")
    return summary


def pod_layout(reader):
    """Where this pod's CPUs and NICs sit against its GPUs: its CPU
    placement, each GPU's nearest NIC of the pod's own, and what those
    rails carry (the benchmark's expected bus bandwidth rests on it)."""
    facts = {"cpus": gather_cpus(reader), "numa": gather_numa(reader), "nvidia": gather_nvidia(reader),
             "rdma": gather_rdma(reader), "netdevs": gather_netdevs(reader)}
    table = pod_rail_table(facts)[0]
    return {"placement": cpu_placement(facts),
            "rails": [dict((key, rail[key]) for key in ("gpu", "nic", "distance", "gpu_numa", "nic_numa"))
                      for rail in table["rails"]],
            "rail_bandwidth": rail_bandwidth(facts, table)}


def run_node(options, environ=None):
    """Runs this node's part and returns the result object ("log" is the
    log's path when --workdir keeps it, else None)."""
    environ = dict(os.environ if environ is None else environ)
    # A directory of its own is removed at the end (the result holds the
    # log's tail): every run left one in each pod's /tmp before.
    workdir = options.workdir or tempfile.mkdtemp(prefix="mlinfra-bench-")
    try:
        result = _run_in(options, environ, workdir)
    finally:
        if not options.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if not options.workdir:
        result["log"] = None
    return result


def _run_in(options, environ, workdir):
    if not os.path.isdir(workdir):
        os.makedirs(workdir)
    log_path = os.path.join(workdir, "bench-node%d.log" % options.node_rank)
    json_path = os.path.join(workdir, "bench.json")
    if options.node_rank == 0 and os.path.exists(json_path):
        os.remove(json_path)
    command = torchrun_command(options.python, options.bench, options.nnodes, options.node_rank,
                               options.nproc_per_node, options.master_addr, options.master_port,
                               options.bench_args, json_path)
    env = dict(environ, PYTHONUNBUFFERED="1", **NCCL_DEBUG_ENV)
    # After BASH_ENV's NCCL environment (read before this program started),
    # so that a run on some of the node's ports wins over the detected list.
    if options.ib_hca:
        env["NCCL_IB_HCA"] = options.ib_hca
    # The ports as this pod sees them (on the local cluster: its node's
    # recorded root), read just before and just after the run.
    counters_root = node_root(environ)
    layout = pod_layout(NodeReader(counters_root))
    counters_before = port_counters.read_port_counters(NodeReader(counters_root))
    started = time.time()
    try:
        code, timed_out = run_with_timeout(command, env, log_path, options.timeout)
        error = "timed out after %ss" % options.timeout if timed_out else None
    except OSError as exc:
        code, timed_out, error = None, False, "cannot start torchrun: %s" % exc
        with open(log_path, "w") as log:
            log.write(error + "\n")
    seconds = time.time() - started
    counters = port_counters.port_deltas(counters_before, port_counters.read_port_counters(NodeReader(counters_root)))
    with open(log_path, "rb") as log:
        parsed = nccl_log.parse_nccl_log(log.read())
    result = {
        "node_rank": options.node_rank, "nnodes": options.nnodes, "nproc_per_node": options.nproc_per_node,
        "exit_code": code, "timed_out": timed_out, "error": error, "seconds": round(seconds, 1),
        "ib_hca": env.get("NCCL_IB_HCA"),
        "command": command, "log": log_path, "log_tail": tail(log_path),
        "nccl": summarize_nccl(parsed),
        "transport": nccl_log.check_nccl_transport(parsed, options.mode, require_gpudirect=options.require_gpudirect),
        "port_counters": counters,
        "placement": layout["placement"], "rails": layout["rails"], "rail_bandwidth": layout["rail_bandwidth"],
        "document": None,
    }
    if options.node_rank == 0 and os.path.exists(json_path):
        try:
            result["document"] = collective_bench.read_document(json_path)
        except ValueError as exc:
            result["error"] = result["error"] or str(exc)
    elif options.node_rank == 0 and not result["error"]:
        result["error"] = "the benchmark wrote no result (exit status %s); see the log's tail" % code
    return result


# -- on the controller: whether it may run, and the command each pod runs ----

def plan(statefulsets, pods, settings):
    """What verify-rdma.yml runs in the pods: ``{pods, blocker, command}``.
    ``statefulsets`` and ``pods``: the objects of the deployment's
    StatefulSet and pods; ``settings``: app, namespace, check_mode,
    single_pod, and what the command takes (nproc_per_pod, port, network_mode,
    timeout, master_addr, require_gpudirect, ops, min_size, max_size,
    thresholds, pairwise, extra_args). torchrun's ranks are the pods'
    ordinals, so every pod must run, or none does: ``blocker`` says why not
    (None when it may run)."""
    app = settings["app"]
    replicas = int((statefulsets[0].get("spec") or {}).get("replicas") or 0) if statefulsets else 0
    expected = ["%s-%d" % (app, ordinal) for ordinal in range(replicas)]
    running = set(pod["metadata"]["name"] for pod in pods or ()
                  if (pod.get("status") or {}).get("phase") == "Running")
    missing = [name for name in expected if name not in running]
    if settings.get("check_mode"):
        blocker = "check mode runs no benchmark"
    elif not statefulsets:
        blocker = "StatefulSet %s/%s is not deployed" % (settings["namespace"], app)
    elif replicas == 0:
        blocker = "%s is scaled to 0" % app
    elif replicas == 1 and not settings.get("single_pod"):
        blocker = "%s runs on one pod only: the benchmark needs two pods to cross the network (-e replicas=2)" % app
    elif missing:
        blocker = "not all pods run (%s not Running): the benchmark needs every pod of the job" % ", ".join(missing)
    else:
        blocker = None
    return {"pods": expected, "blocker": blocker, "command": exec_command(len(expected), settings)}


def exec_command(nnodes, settings):
    """The command each pod runs: this program through bash, which reads
    BASH_ENV (the NCCL environment the init container detected), with the
    arguments build_parser reads and, after --, mlinfra nccl-bench's."""
    command = ["bash", "-c", 'exec python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra" pod-bench "$@"',
               "mlinfra pod-bench", "--nnodes", str(nnodes), "--nproc-per-node", str(settings["nproc_per_pod"]),
               "--master-port", str(settings["port"]), "--mode", settings["network_mode"],
               "--timeout", str(settings["timeout"])]
    if settings.get("master_addr"):
        command += ["--master-addr", settings["master_addr"]]
    if settings.get("ib_hca"):
        command += ["--ib-hca", settings["ib_hca"]]
    if not settings.get("require_gpudirect", True):
        command.append("--no-require-gpudirect")
    command += ["--", "--ops", ",".join(settings["ops"]), "-b", str(settings["min_size"]),
                "-e", str(settings["max_size"])]
    command += ["--min-busbw=%s" % threshold for threshold in settings.get("thresholds") or ()]
    if settings.get("pairwise"):
        command += ["--pairwise", "--pairwise-size", str(settings["max_size"])]
    return command + [str(argument) for argument in settings.get("extra_args") or ()]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mlinfra pod-bench",
        description="Run this pod's part of the collective benchmark across the StatefulSet's pods with torchrun "
                    "and NCCL_DEBUG=INFO; print the exit status, the NCCL transport check and, on node 0, the "
                    "benchmark's document as one JSON object. Arguments after -- go to mlinfra nccl-bench.")
    parser.add_argument("--nnodes", type=int, required=True, help="number of pods in the job")
    parser.add_argument("--node-rank", type=int,
                        help="this pod's rank (default: the ordinal of $POD_NAME or $HOSTNAME)")
    parser.add_argument("--nproc-per-node", type=int, default=1, help="processes (GPUs) per pod")
    parser.add_argument("--master-addr", help="address of node 0 (default $MASTER_ADDR)")
    parser.add_argument("--master-port", type=int, default=29511, help="rendezvous port (default %(default)s)")
    parser.add_argument("--mode", choices=nccl_log.MODES, default="rdma", help="transport the cluster must use")
    parser.add_argument("--no-require-gpudirect", dest="require_gpudirect", action="store_false",
                        help="in rdma mode, network connections without GPUDirect RDMA warn rather than fail")
    parser.add_argument("--ib-hca", metavar="LIST",
                        help="NCCL_IB_HCA for this run, over the detected NCCL environment's: the RDMA devices "
                             "(and ports) to use, e.g. mlx5_0:1,mlx5_3:1, ^mlx5_2 for all but one, or =mlx5_0 "
                             "for that name exactly")
    parser.add_argument("--timeout", type=int, default=600, help="seconds the run may take")
    parser.add_argument("--workdir", help="directory for the log and the document (default: a new temporary one)")
    parser.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    # A benchmark program of its own (tests): run as the script torchrun starts.
    parser.add_argument("--bench", help=argparse.SUPPRESS)
    parser.add_argument("bench_args", nargs="*", help="options of mlinfra nccl-bench (after --)")
    return parser


def main(argv=None, environ=None, bench=None):
    environ = os.environ if environ is None else environ
    parser = build_parser()
    options = parser.parse_args(argv)
    options.bench = [options.bench] if options.bench else list(bench or ())
    if options.node_rank is None:
        try:
            # POD_NAME (the StatefulSet's downward API) first: with host
            # networking HOSTNAME is the node's name.
            options.node_rank = ordinal_of(environ.get("POD_NAME") or environ.get("HOSTNAME"))
        except ValueError as exc:
            parser.error(str(exc))
    options.master_addr = options.master_addr or environ.get("MASTER_ADDR")
    if not options.master_addr:
        parser.error("no --master-addr and no MASTER_ADDR in the environment")
    if options.nnodes < 1 or not 0 <= options.node_rank < options.nnodes:
        parser.error("node rank %d is outside 0..%d (--nnodes %d)" % (options.node_rank, options.nnodes - 1,
                                                                      options.nnodes))
    if options.nproc_per_node < 1 or options.timeout < 1:
        parser.error("--nproc-per-node and --timeout must be at least 1")
    if options.ib_hca is not None and not IB_HCA.match(options.ib_hca):
        parser.error("--ib-hca %r is not an NCCL_IB_HCA list: device names with an optional :port, separated by "
                     "commas, after an optional ^ (all but these) or = (these names exactly)" % options.ib_hca)
    sys.stdout.write(json.dumps(run_node(options, environ), sort_keys=True) + "\n")
    return 0
