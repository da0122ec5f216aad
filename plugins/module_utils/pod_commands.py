# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The subcommands of ``mlinfra``, the collection's one program inside pods
(files/bin/mlinfra finds the plugins directory and calls ``main``).

Each subcommand imports its code only when it is run, so that ``mlinfra
node-check`` never loads the benchmark and ``mlinfra nccl-bench`` loads torch
only after its arguments are read. pod_runtime.py reads the imports below to
know which module_utils files the pods need: a subcommand added here ships
its code with nothing else to change.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

PROGRAM = "mlinfra"


def _autodetect(argv):
    from .node.cli import main_autodetect
    return main_autodetect(argv)


def _node_check(argv):
    from .node.cli import main_node_check
    return main_node_check(argv)


def _nccl_bench(argv):
    from .fabric.bench_collectives import main
    return main(argv)


def _pod_bench(argv):
    from .fabric.pod_bench import main
    return main(argv, bench=[os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), PROGRAM), "nccl-bench"])


def _nccl_log(argv):
    from .fabric.nccl_log import main
    return main(argv)


def _throughput_report(argv):
    from .report.throughput import main
    return main(argv)


def _train(argv):
    from .train.launch_cli import main
    return main(argv)


# name: (what it does, its entry)
SUBCOMMANDS = {
    "autodetect": ("detect this node's NCCL and launch environment and write it as a shell file", _autodetect),
    "node-check": ("check this node (or a recorded snapshot) for multi-node training over RDMA", _node_check),
    "nccl-bench": ("the collective benchmark, one process per GPU under torchrun (nccl-tests output)", _nccl_bench),
    "pod-bench": ("this pod's part of the benchmark run across the training pods", _pod_bench),
    "nccl-log": ("which transport NCCL really used, from its NCCL_DEBUG=INFO log", _nccl_log),
    "throughput-report": ("training throughput from logs, and which runs are degraded", _throughput_report),
    "train": ("this pod's part of a multi-node training run: start, status, stop", _train),
}


def usage():
    width = max(len(name) for name in SUBCOMMANDS)
    return "usage: %s <subcommand> [options]   (%s <subcommand> --help for its options)\n\n%s\n" % (
        PROGRAM, PROGRAM, "\n".join("  %-*s  %s" % (width, name, SUBCOMMANDS[name][0]) for name in sorted(SUBCOMMANDS)))


def main(argv):
    """Runs the subcommand ``argv[0]`` with the rest; returns its exit
    status (2 for a missing or unknown subcommand, as argparse does)."""
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(usage())
        return 0 if argv else 2
    entry = SUBCOMMANDS.get(argv[0])
    if entry is None:
        sys.stderr.write("%s: unknown subcommand %r\n%s" % (PROGRAM, argv[0], usage()))
        return 2
    return entry[1](argv[1:])
