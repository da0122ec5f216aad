# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Command-line entry points of the node checks and NCCL detection.

The commands in ``files/bin`` (``mlinfra node-check``, ``mlinfra autodetect``)
call these functions inside pods, where Ansible is not installed; the
Ansible modules call the same gatherers and deciders. Standard library only.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import sys

from ..common.files import write_atomically
from ..fabric.nccl_env import TRANSPORT_MODES, VARIABLES, compute_nccl_env, find_nccl_version, override_error, \
    parse_version, render_env_file
from .checks import CHECK_NAMES, MODES, POD_CHECK_NAMES, Expectations, failed, run_checks, summarize
from .facts import ROOT_ENV, NodeReader, gather_node_facts, node_root
from .record import record_node
from ..fabric.port_counters import read_port_counters

__metaclass__ = type

FAIL_ON = ("fail", "warn", "never")


def traffic_class(text):
    """NCCL_IB_TC as argparse takes it: a whole number of 0 to 255."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError("NCCL_IB_TC is a traffic class byte, 0 to 255, not %r" % text)
    return value


def _default_root():
    return node_root(os.environ)


def node_check_report(root="/", mode="rdma", expect_gpus=None, expect_rdma_devices=None, require_gpudirect=True,
                      min_mtu=9000, min_link_rate_gbps=None, checks=None, nvidia_smi=None, fail_on="fail",
                      in_pod=False, min_gpus=None, nccl_ib_tc=None):
    """Gather, check and summarise one node: what the module and the
    command both return."""
    facts = gather_node_facts(root, nvidia_smi=nvidia_smi,
                              topology=not checks or "nvlink_topology" in checks)
    expect = Expectations(mode=mode, gpus=expect_gpus, rdma_devices=expect_rdma_devices,
                          require_gpudirect=require_gpudirect, min_mtu=min_mtu,
                          min_link_rate_gbps=min_link_rate_gbps, min_gpus=min_gpus, nccl_ib_tc=nccl_ib_tc)
    results = run_checks(facts, expect, only=checks, in_pod=in_pod)
    failing = failed(results, fail_on)
    return {
        "checks": results,
        "summary": summarize(results),
        "failed_checks": [result["name"] for result in failing],
        "ok": not failing,
        "facts": facts,
    }


def format_report(report):
    width = max(len(name) for name in CHECK_NAMES + POD_CHECK_NAMES)
    lines = []
    for check in report["checks"]:
        lines.append("%-4s  %-*s  %s" % (check["status"].upper(), width, check["name"], check["message"]))
        if check["status"] in ("fail", "warn") and check["remediation"]:
            lines.append("      %-*s  fix: %s" % (width, "", check["remediation"]))
    summary = report["summary"]
    lines.append("%d checks: %d pass, %d warn, %d fail, %d skip" % (
        summary["total"], summary["pass"], summary["warn"], summary["fail"], summary["skip"]))
    for error in report["facts"]["errors"]:
        lines.append("note: could not read %s" % error)
    return "\n".join(lines)


# -- the command verify-rdma.yml runs, in a node's probe pod or a pod ----------

def check_command(settings, in_pod=False):
    """The argument list that runs mlinfra node-check in a probe pod (the
    node) or, ``in_pod``, in a training pod (what the pod sees; the GPUs it
    asked for exactly): JSON out, never a failing exit (the verdict is the
    controller's), the inventory's expectations. ``settings``: network_mode,
    gpus, mtu, rdma_devices (the NICs the inventory names), require_gpudirect,
    min_link_rate_gbps (0: none), nccl_ib_tc (None: NCCL's). A probe first
    touches the file its idle timer watches (the probe's liveness)."""
    script = 'exec python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra" node-check "$@"'
    if not in_pod:
        script = 'touch "$MLINFRA_PROBE_ALIVE" 2>/dev/null; ' + script
    command = ["sh", "-c", script, "mlinfra node-check"] + (["--in-pod"] if in_pod else []) + [
        "--format", "json", "--fail-on", "never", "--mode", settings["network_mode"],
        "--expect-gpus" if in_pod else "--min-gpus", str(settings["gpus"]), "--min-mtu", str(settings["mtu"])]
    if settings["network_mode"] == "rdma" and settings.get("rdma_devices"):
        command += ["--expect-rdma-devices", str(settings["rdma_devices"])]
    if not settings.get("require_gpudirect", True):
        command.append("--no-require-gpudirect")
    if float(settings.get("min_link_rate_gbps") or 0) > 0:
        command += ["--min-link-rate-gbps", str(settings["min_link_rate_gbps"])]
    if settings.get("nccl_ib_tc") is not None:
        command += ["--nccl-ib-tc", str(settings["nccl_ib_tc"])]
    return command


def node_check_parser():
    parser = argparse.ArgumentParser(prog="mlinfra node-check",
                                     description="Check one GPU node (or the pod it runs in) for RDMA training.")
    parser.add_argument("--root", default=_default_root(),
                        help="directory holding the node's /proc and /sys (default: $%s or /)" % ROOT_ENV)
    parser.add_argument("--mode", choices=MODES, default="rdma")
    gpus = parser.add_mutually_exclusive_group()
    gpus.add_argument("--expect-gpus", type=int, help="the exact number of GPUs (what a pod asked for)")
    gpus.add_argument("--min-gpus", type=int, help="the fewest GPUs (a node may hold more than a pod asks for)")
    parser.add_argument("--expect-rdma-devices", type=int)
    parser.add_argument("--no-require-gpudirect", dest="require_gpudirect", action="store_false")
    parser.add_argument("--min-mtu", type=int, default=9000)
    parser.add_argument("--min-link-rate-gbps", type=float)
    parser.add_argument("--nccl-ib-tc", type=traffic_class, metavar="0-255",
                        help="the traffic class NCCL's RoCE packets carry (NCCL_IB_TC; default: NCCL's, 0)")
    parser.add_argument("--in-pod", action="store_true",
                        help="also check what this pod sees: IPC_LOCK and /dev/infiniband")
    parser.add_argument("--check", action="append", choices=CHECK_NAMES + POD_CHECK_NAMES, dest="checks",
                        help="run only this check (repeatable)")
    parser.add_argument("--nvidia-smi", help="path of nvidia-smi (default: found on PATH)")
    parser.add_argument("--fail-on", choices=FAIL_ON, default="fail",
                        help="exit 1 when a check has this status or worse")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--record", metavar="DIR",
                        help="first copy what the checks read (and nothing else) into DIR, a new directory: a "
                             "snapshot that mlinfra node-check --root DIR checks as this node")
    parser.add_argument("--read-counters", action="store_true",
                        help="check nothing: print every RDMA port's counters as JSON (read before and after a "
                             "benchmark, the difference is what the port moved)")
    return parser


def main_node_check(argv=None):
    parser = node_check_parser()
    args = parser.parse_args(argv)
    if args.read_counters:
        json.dump({"root": args.root, "port_counters": read_port_counters(NodeReader(args.root))}, sys.stdout,
                  indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    if args.record:
        try:
            facts = record_node(args.root, args.record, nvidia_smi=args.nvidia_smi)
        except (OSError, ValueError) as exc:
            parser.error("--record: %s" % exc)
        files = sum(len(names) for _dirpath, _dirs, names in os.walk(args.record))
        topology = " (with nvidia-smi topo -m)" if facts["topology"].get("available") else ""
        sys.stderr.write("recorded %d files of %s into %s%s; check it as this node with: mlinfra node-check --root "
                         "%s\n" % (files, args.root, args.record, topology, args.record))
    report = node_check_report(root=args.root, mode=args.mode, expect_gpus=args.expect_gpus,
                               expect_rdma_devices=args.expect_rdma_devices,
                               require_gpudirect=args.require_gpudirect, min_mtu=args.min_mtu,
                               min_link_rate_gbps=args.min_link_rate_gbps, checks=args.checks,
                               nvidia_smi=args.nvidia_smi, fail_on=args.fail_on, in_pod=args.in_pod,
                               min_gpus=args.min_gpus, nccl_ib_tc=args.nccl_ib_tc)
    if args.format == "json":
        json.dump(report, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(report) + "\n")
    return 0 if report["ok"] else 1


def detect_report(root="/", mode="auto", overrides=None, environ=None, nccl_version=None, nvidia_smi=None,
                  facts=None):
    """Facts (given or gathered) to the NCCL environment, with the NCCL
    version found where the job will run unless one is given."""
    if facts is None:
        facts = gather_node_facts(root, nvidia_smi=nvidia_smi)
    if nccl_version:
        version, source = parse_version(nccl_version), "given"
    else:
        version, source = find_nccl_version()
    result = compute_nccl_env(facts, mode=mode, overrides=overrides, environ=environ, nccl_version=version)
    result["nccl_version_source"] = source
    return result, facts


def main_autodetect(argv=None):
    parser = argparse.ArgumentParser(
        prog="mlinfra autodetect",
        description="Detect the NCCL and launch environment of this node or pod and write it as a shell file.")
    parser.add_argument("--root", default=_default_root(),
                        help="directory holding the node's /proc and /sys (default: $%s or /)" % ROOT_ENV)
    parser.add_argument("--mode", choices=TRANSPORT_MODES, default=os.environ.get("MLINFRA_TRANSPORT", "auto"))
    parser.add_argument("--output", help="write the shell environment here (default: standard output)")
    parser.add_argument("--json", dest="json_path", help="also write the full result as JSON here")
    parser.add_argument("--nccl-version", help="NCCL version to decide for (default: found in this environment)")
    parser.add_argument("--ignore-environment", action="store_true",
                        help="decide every variable even if it is already set in the environment")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a user value, which always wins (repeatable)")
    parser.add_argument("--unset", action="append", default=[], metavar="NAME",
                        help="a variable left out, whatever detection decides (repeatable)")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error("--set takes NAME=VALUE, got %r" % item)
        if override_error(name, value):
            parser.error("--set %s" % override_error(name, value))
        overrides[name] = value
    for name in args.unset:
        if override_error(name, None):
            parser.error("--unset %s" % override_error(name, None))
        overrides[name] = None
    environ = {} if args.ignore_environment else dict(
        (name, os.environ[name]) for name in VARIABLES if name in os.environ)
    result = detect_report(root=args.root, mode=args.mode, overrides=overrides, environ=environ,
                           nccl_version=args.nccl_version)[0]
    text = render_env_file(result)
    if args.output:
        write_atomically(args.output, text)
    else:
        sys.stdout.write(text)
    if args.json_path:
        write_atomically(args.json_path, json.dumps(result, indent=2, sort_keys=True) + "\n")
    # The launcher's log shows what was decided, as hand-run launch scripts print it.
    log = sys.stderr if not args.output else sys.stdout
    log.write("[autodetect] transport=%s (%s)\n" % (result["transport"], result["transport_reason"]))
    for detail in result["details"]:
        value = detail["value"] if detail["set"] else "(unset)"
        log.write("[autodetect]   %s=%s  # %s\n" % (detail["name"], value, detail["reason"]))
    for error in result["errors"]:
        log.write("[autodetect] ERROR: %s\n" % error)
    return 1 if result["errors"] else 0
