# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The command line of ``mlinfra train`` (start, status, stop): its parser
and the one JSON object each subcommand prints.

Standard library only: runs in the pods.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import sys

from .launch import BACKENDS, BAD_USAGE, DEFAULT_GRACE, DEFAULT_JOIN_TIMEOUT, DEFAULT_PORT, UsageError, WORKLOADS
from .run_status import status
from .supervisor import exit_status, start, stop, wait


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError("%s: %s" % (self.prog, message))


def build_parser():
    parser = _Parser(
        prog="mlinfra train",
        description="Start this pod's part of a multi-node training run (torchrun, c10d rendezvous on pod 0) "
                    "detached, report its state and metrics, stop it. Prints one JSON object; exit status 0 when "
                    "it could report (a refused start too: state failed-to-start), 2 on a bad command line.")
    commands = parser.add_subparsers(dest="subcommand", metavar="{start,status,stop}")
    commands.required = True

    run = commands.add_parser("start", help="start this node's part, detached")
    run.add_argument("--run-dir", required=True, help="directory of this launch's files (created)")
    run.add_argument("--run-id", required=True, help="the job's id, the same on every node (the rendezvous id)")
    run.add_argument("--nnodes", type=int, required=True, help="number of pods in the job")
    run.add_argument("--nproc-per-node", type=int, required=True, help="processes (GPUs) per pod")
    run.add_argument("--node-rank", type=int, help="this pod's rank (default: the ordinal of $POD_NAME or $HOSTNAME)")
    run.add_argument("--rdzv-host", help="rendezvous host, pod 0 (default $MASTER_ADDR)")
    run.add_argument("--rdzv-port", type=int, help="rendezvous port (default $MASTER_PORT or %d)" % DEFAULT_PORT)
    run.add_argument("--join-timeout", type=int, default=DEFAULT_JOIN_TIMEOUT,
                     help="seconds the rendezvous waits for every node (default %(default)s)")
    run.add_argument("--local-addr", help="this node's address for the rendezvous (torchrun --local-addr; default: "
                                          "its fully qualified host name)")
    run.add_argument("--backend-hint", choices=BACKENDS, default="auto",
                     help="exported as MLINFRA_TRAIN_BACKEND to the workload (tiny_lm.py reads it); auto: unset")
    run.add_argument("--workload", choices=WORKLOADS,
                     help="torchtitan (python -m torchtitan.train), script, or demo (the collection's tiny_lm.py; "
                          "default: script when --script is given, else torchtitan)")
    run.add_argument("--config", help="TorchTitan job TOML (--job.config_file)")
    run.add_argument("--override", action="append", default=[], metavar="SECTION.KEY=VALUE",
                     help="TorchTitan option, as --section.key value (true/false: flags); repeatable")
    run.add_argument("--script", help="the training script of --workload script")
    run.add_argument("--workdir", help="working directory of the run (default: the current one)")
    run.add_argument("--nccl-env", help="NCCL environment file (default $MLINFRA_RUN_DIR/nccl.env; '' for none)")
    run.add_argument("--python", default=sys.executable, help="python that runs torchrun (default: this one)")
    run.add_argument("--resolve-timeout", type=int, default=0,
                     help="seconds to wait for the rendezvous host to resolve (default: fail at once)")
    run.add_argument("--wait", action="store_true",
                     help="stay in the foreground: copy the node's log to standard output until torchrun ends, "
                          "then print the JSON status and exit with torchrun's status (a Job's container); "
                          "SIGTERM stops the run")

    report = commands.add_parser("status", help="state, exit status, latest metrics and log tail")
    report.add_argument("--run-dir", required=True)

    halt = commands.add_parser("stop", help="SIGTERM, then SIGKILL after the grace period")
    halt.add_argument("--run-dir", required=True)
    halt.add_argument("--grace", type=float, default=DEFAULT_GRACE,
                      help="seconds between SIGTERM and SIGKILL (default %(default)s)")
    return parser


def parse(argv):
    """The options; what follows the first ``--`` goes to the workload."""
    argv = list(argv)
    extra = []
    if "--" in argv:
        index = argv.index("--")
        argv, extra = argv[:index], argv[index + 1:]
    options = build_parser().parse_args(argv)
    if extra and options.subcommand != "start":
        raise UsageError("mlinfra train %s: takes no arguments after --" % options.subcommand)
    options.extra = extra
    return options


def run(options, environ=None):
    if options.subcommand == "start":
        return start(options, environ)
    if options.subcommand == "status":
        return status(options.run_dir)
    if options.grace < 0:
        raise UsageError("mlinfra train stop: --grace must be 0 or more")
    return stop(options.run_dir, options.grace)


def main(argv=None, environ=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        options = parse(argv)
        result = run(options, environ)
    except UsageError as exc:
        sys.stderr.write("%s\n" % exc)
        build_parser().print_usage(sys.stderr)
        sys.stdout.write(json.dumps({"state": BAD_USAGE, "error": str(exc)}, sort_keys=True) + "\n")
        return 2
    if options.subcommand == "start" and options.wait:
        result = wait(result, sys.stdout)
        # The log above already holds the tail; repeated inside this line,
        # its metrics lines would be read twice by whoever parses the log.
        result.pop("log_tail", None)
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        return exit_status(result)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0
