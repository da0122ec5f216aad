# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective benchmark's command line (``mlinfra nccl-bench``): its
parser, and the options resolved against torchrun's environment before
torch is imported.

Standard library only; shipped into the pods with the benchmark.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse

from .collective_bench import (
    COMMAND, DEFAULT_FACTOR, DEFAULT_ITERS, DEFAULT_MAX_BYTES, DEFAULT_MIN_BYTES, DEFAULT_PAIRWISE_SIZE_CPU,
    DEFAULT_PAIRWISE_SIZE_GPU, DEFAULT_SLOW_FRACTION, DEFAULT_WARMUP, DTYPES, LAUNCHES, OPS, check_thresholds_apply,
    format_size, layout, parse_size, parse_thresholds, plural, size_range, smallest_size)


def build_parser():
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="Time torch.distributed collectives across every rank of a torchrun job and print an "
                    "nccl-tests-compatible table. Exit status 0 when every result is right and every gate passes, "
                    "1 when not, 2 on bad usage.")
    parser.add_argument("--ops", help="comma-separated ops among %s (default all_reduce)" % ", ".join(OPS))
    parser.add_argument("-b", "--minbytes", default=DEFAULT_MIN_BYTES,
                        help="smallest size, bytes or with K/M/G/T (default %(default)s)")
    parser.add_argument("-e", "--maxbytes", default=DEFAULT_MAX_BYTES, help="largest size (default %(default)s)")
    parser.add_argument("-f", "--stepfactor", default=str(DEFAULT_FACTOR),
                        help="multiply the size by this between steps (default %(default)s)")
    parser.add_argument("--dtype", choices=DTYPES, help="element type (default bfloat16 with nccl, float32 with gloo)")
    parser.add_argument("-w", "--warmup-iters", default=str(DEFAULT_WARMUP),
                        help="untimed iterations per size (default %(default)s)")
    parser.add_argument("-n", "--iters", default=str(DEFAULT_ITERS),
                        help="timed iterations per size (default %(default)s)")
    parser.add_argument("--launch", choices=LAUNCHES, default="auto",
                        help="how the timed iterations are issued on GPUs. eager: one torch call per iteration, as a "
                             "training loop makes them; graph: captured once as a CUDA graph and replayed, so that "
                             "Python's and torch's cost per call (tens of microseconds) cannot hide the collective's "
                             "time at small sizes; auto: eager, and a size is timed again as a graph where the eager "
                             "loop was bound by issuing its calls (default %(default)s; CPUs always run eager)")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                        help="auto: nccl when CUDA is available, else gloo on the CPU")
    parser.add_argument("--min-busbw", action="append", default=[], metavar="SIZE=GBPS",
                        help="every measured size of SIZE or more must reach GBPS bus bandwidth (repeatable; the "
                             "strictest applicable one wins)")
    parser.add_argument("--json", metavar="PATH", help="write the result document here (rank 0)")
    parser.add_argument("--pairwise", action="store_true",
                        help="measure all_reduce between every pair of nodes instead of the sweep")
    parser.add_argument("--pairwise-size", metavar="SIZE",
                        help="size of the pairwise all_reduce (default %s on GPUs, %s on CPUs)" % (
                            DEFAULT_PAIRWISE_SIZE_GPU, DEFAULT_PAIRWISE_SIZE_CPU))
    parser.add_argument("--slow-fraction", default=str(DEFAULT_SLOW_FRACTION),
                        help="a pair below this fraction of the median pair is slow (default %(default)s)")
    parser.add_argument("--ranks-per-node", metavar="N",
                        help="group ranks into nodes of N consecutive ranks (default: torchrun's GROUP_RANK)")
    return parser


def _whole(text, option, minimum):
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("%s %r is not a whole number: give a whole number of at least %d" % (option, text, minimum))
    if value < minimum:
        raise ValueError("%s %d is too small: give at least %d" % (option, value, minimum))
    return value


def resolve_options(args, env):
    """The validated settings of parsed arguments and torchrun's environment
    (WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE), as far as they need no
    torch. Raises ValueError, a usage error, naming the option and the fix."""
    options = {"pairwise": bool(args.pairwise), "json": args.json, "backend": args.backend, "dtype": args.dtype,
               "launch": getattr(args, "launch", "auto")}
    if args.pairwise and args.ops is not None and [op.strip() for op in args.ops.split(",")] != ["all_reduce"]:
        raise ValueError("--pairwise measures all_reduce only: drop --ops %s" % args.ops)
    ops = [op.strip() for op in (args.ops or "all_reduce").split(",") if op.strip()]
    unknown = [op for op in ops if op not in OPS]
    if unknown or not ops:
        raise ValueError("--ops %r: unknown op %s; give a comma-separated list of %s" % (
            args.ops, ", ".join(unknown) or "(none given)", ", ".join(OPS)))
    if len(set(ops)) != len(ops):
        raise ValueError("--ops %r names an op twice: give each once" % args.ops)
    options["ops"] = ops
    min_bytes = parse_size(args.minbytes, "-b")
    max_bytes = parse_size(args.maxbytes, "-e")
    factor = _whole(args.stepfactor, "-f", 1)
    options["sizes"] = [] if args.pairwise else size_range(min_bytes, max_bytes, factor)
    options.update({"min_bytes": min_bytes, "max_bytes": max_bytes, "factor": factor})
    options["warmup_iters"] = _whole(args.warmup_iters, "-w", 0)
    options["iters"] = _whole(args.iters, "-n", 1)
    options["thresholds"] = parse_thresholds(args.min_busbw)
    options["pairwise_size"] = None if args.pairwise_size is None else parse_size(args.pairwise_size, "--pairwise-size")
    try:
        fraction = float(args.slow_fraction)
    except ValueError:
        fraction = None
    if fraction is None or not 0 < fraction < 1:
        raise ValueError("--slow-fraction %r must be a number between 0 and 1 (0.8: a pair below 80%% of the median "
                         "pair is slow)" % (args.slow_fraction,))
    options["slow_fraction"] = fraction
    options["ranks_per_node"] = None
    if args.ranks_per_node is not None:
        options["ranks_per_node"] = _whole(args.ranks_per_node, "--ranks-per-node", 1)
    missing = [name for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK") if not env.get(name)]
    if missing:
        raise ValueError("%s not set: run this under torchrun, for example torchrun --nproc-per-node 8 %s" % (
            ", ".join(missing), COMMAND))
    world = _whole(env["WORLD_SIZE"], "WORLD_SIZE", 1)
    options.update({"world_size": world, "rank": _whole(env["RANK"], "RANK", 0),
                    "local_rank": _whole(env["LOCAL_RANK"], "LOCAL_RANK", 0),
                    "local_world_size": _whole(env.get("LOCAL_WORLD_SIZE") or world, "LOCAL_WORLD_SIZE", 1)})
    if options["ranks_per_node"] and world % options["ranks_per_node"]:
        raise ValueError("--ranks-per-node %d does not divide the %d ranks into whole nodes: give a divisor of %d" % (
            options["ranks_per_node"], world, world))
    if args.pairwise:
        per_node = options["ranks_per_node"] or options["local_world_size"]
        if world // per_node < 2:
            raise ValueError("--pairwise needs at least 2 nodes, and the %d ranks make %s of %d ranks: run on more "
                             "nodes, or give --ranks-per-node" % (world, plural(world // per_node, "node"), per_node))
    return options


def resolve_device(options, cuda_available):
    """Backend, device, dtype and the sizes that need them; raises
    ValueError for usage errors."""
    backend = options["backend"]
    if backend == "auto":
        backend = "nccl" if cuda_available else "gloo"
    if backend == "nccl" and not cuda_available:
        raise ValueError("--backend nccl needs CUDA, and torch sees no GPU here: use --backend gloo (CPU), or run "
                         "where GPUs are visible")
    dtype = options["dtype"] or ("bfloat16" if backend == "nccl" else "float32")
    if backend == "gloo" and dtype != "float32":
        raise ValueError("--dtype %s is not supported with gloo, whose CPU reductions are float32 here: use --dtype "
                         "float32 or --backend nccl" % dtype)
    options.update({"backend": backend, "dtype": dtype, "device": "cuda" if backend == "nccl" else "cpu"})
    if options["device"] == "cpu":
        options["launch"] = "eager"
    if options["pairwise"]:
        if options["pairwise_size"] is None:
            options["pairwise_size"] = parse_size(DEFAULT_PAIRWISE_SIZE_GPU if backend == "nccl"
                                                  else DEFAULT_PAIRWISE_SIZE_CPU)
        per_node = options["ranks_per_node"] or options["local_world_size"]
        if layout("all_reduce", options["pairwise_size"], 2 * per_node, dtype) is None:
            raise ValueError("--pairwise-size %d is smaller than one %s element: give a larger size" % (
                options["pairwise_size"], dtype))
        check_thresholds_apply(options["thresholds"], [options["pairwise_size"]])
    else:
        for op in options["ops"]:
            if not any(layout(op, size, options["world_size"], dtype) for size in options["sizes"]):
                raise ValueError("-e %s is too small for %s on %s in %s: give -e of at least %s" % (
                    format_size(options["max_bytes"]), op, plural(options["world_size"], "rank"), dtype,
                    format_size(smallest_size(op, options["world_size"], dtype))))
        check_thresholds_apply(options["thresholds"], options["sizes"])
    return options


def settings_of(options):
    """What the document records of how it was run."""
    return {"min_bytes": options["min_bytes"], "max_bytes": options["max_bytes"], "factor": options["factor"],
            "warmup_iters": options["warmup_iters"], "iters": options["iters"],
            "time_across_ranks": "max", "check": "exact", "launch": options.get("launch", "eager")}
