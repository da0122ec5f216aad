# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The collective-communication benchmark's torch half: one process per GPU
under torchrun (``mlinfra nccl-bench``), nccl-tests-compatible output.

Run one process per GPU on every node, for example on 2 pods of 8 GPUs:

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        mlinfra nccl-bench --ops all_reduce,all_gather -b 1M -e 8G --min-busbw 1G=194 --json /tmp/bench.json

docs/benchmark.md describes the options, the table, the JSON document and
the formulas. What needs no torch (sizes, formulas, table, thresholds,
verdict, pairwise analysis) lives in collective_bench.py and its neighbours;
this file runs the collectives. torch is imported only once the arguments
are read, so that --help and bad usage answer without it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import os
import socket
import sys
import time

from . import collective_bench as cb
from . import bench_options
from . import bench_pairs
from . import bench_table

# Rows of a period pattern compared per slice when counting wrong elements,
# so that the comparison's temporary stays near 64 Mi elements and not the
# size of an 8 GiB buffer.
CHECK_SLICE_ELEMENTS = 1 << 26
# The spin kernel counts GPU clock cycles; at this rate (about the highest
# SM clock of current data-centre GPUs) a spin lasts at least as long as
# asked, longer on a slower clock, which costs nothing that is timed.
SPIN_CYCLES_PER_SECOND = 2.2e9


class Context:
    """What every collective call needs: torch, the group and this rank in it."""

    def __init__(self, torch, dist, options, group=None):
        self.torch = torch
        self.dist = dist
        self.group = group
        self.options = options
        self.dtype = getattr(torch, options["dtype"])
        self.cuda = options["device"] == "cuda"
        self.device = torch.device("cuda", options["local_rank"]) if self.cuda else torch.device("cpu")
        self.rank = dist.get_rank(group) if group is not None else dist.get_rank()
        self.nranks = dist.get_world_size(group) if group is not None else dist.get_world_size()
        self._align = None

    def row(self, values):
        """A period row as a tensor of the benchmark's type on its device."""
        return self.torch.tensor(values, dtype=self.dtype, device=self.device)

    def synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def all_reduce_scalar(self, value, op):
        """One number reduced across the group (float64 keeps microseconds
        and element counts exact)."""
        tensor = self.torch.tensor([float(value)], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(tensor, op=op, group=self.group)
        return tensor.item()

    def hold(self, seconds):
        """Queues, on this rank's GPU, a spin of at least ``seconds`` (longer
        where the GPU's clock is below SPIN_CYCLES_PER_SECOND) and then a
        one-element all_reduce, which every rank's GPU leaves at once
        whatever each one's spin lasted: what the CPU queues next starts at
        the same moment on every rank, once it is queued (cb.MIN_HOLD_SECONDS
        says why). Without torch's spin kernel only the all_reduce is there."""
        if self._align is None:
            self._align = self.torch.zeros(1, dtype=self.torch.float32, device=self.device)
        sleep = getattr(self.torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(int(seconds * SPIN_CYCLES_PER_SECOND))
        self.dist.all_reduce(self._align, group=self.group)


def _rolled(torch, row, offset):
    shift = offset % row.numel()
    return torch.cat([row[shift:], row[:shift]]) if shift else row


def fill_periodic(torch, tensor, row, offset=0):
    """tensor[j] = row[(offset + j) % len(row)], by broadcast copies (no
    index tensor as large as the buffer)."""
    row = _rolled(torch, row, offset)
    period = row.numel()
    full = tensor.numel() // period
    if full:
        tensor[:full * period].view(full, period).copy_(row.expand(full, period))
    tail = tensor.numel() - full * period
    if tail:
        tensor[full * period:].copy_(row[:tail])


def count_wrong(torch, tensor, row, offset=0):
    """Elements of tensor that differ from the periodic row (a NaN differs
    from everything), as a 0-d int64 tensor on the tensor's device."""
    row = _rolled(torch, row, offset)
    period = row.numel()
    wrong = torch.zeros((), dtype=torch.int64, device=tensor.device)
    full = tensor.numel() // period
    step = max(1, CHECK_SLICE_ELEMENTS // period)
    for start in range(0, full, step):
        rows = min(step, full - start)
        wrong += (tensor[start * period:(start + rows) * period].view(rows, period) != row).sum()
    tail = tensor.numel() - full * period
    if tail:
        wrong += (tensor[full * period:] != row[:tail]).sum()
    return wrong


class Collective:
    """One op's buffers, allocated once for the largest size of the sweep;
    each size works on views of their beginning."""

    def __init__(self, ctx, op, largest):
        self.ctx = ctx
        self.op = op

        def empty(elements):
            return ctx.torch.empty(elements, dtype=ctx.dtype, device=ctx.device)

        if op == "all_reduce":
            self.input = empty(largest["elements"])
            self.output = self.input
        elif op == "all_gather":
            self.input = empty(largest["chunk"])
            self.output = empty(largest["elements"])
        else:
            self.input = empty(largest["elements"])
            self.output = empty(largest["chunk"] if op == "reduce_scatter" else largest["elements"])
        mode = cb.reduce_mode(ctx.nranks, ctx.options["dtype"])
        self.reduce_input = ctx.row(cb.reduce_input_row(ctx.rank, ctx.nranks, mode))
        self.reduce_expected = ctx.row(cb.reduce_expected_row(ctx.nranks, mode))
        self.labels = ctx.row(cb.label_row())

    def views(self, shape):
        """(input, output) of one size."""
        if self.op == "all_reduce":
            view = self.input[:shape["elements"]]
            return view, view
        if self.op == "all_gather":
            return self.input[:shape["chunk"]], self.output[:shape["elements"]]
        if self.op == "reduce_scatter":
            return self.input[:shape["elements"]], self.output[:shape["chunk"]]
        return self.input[:shape["elements"]], self.output[:shape["elements"]]

    def launch(self, tensors):
        dist = self.ctx.dist
        source, target = tensors
        if self.op == "all_reduce":
            dist.all_reduce(target, op=dist.ReduceOp.SUM, group=self.ctx.group)
        elif self.op == "all_gather":
            dist.all_gather_into_tensor(target, source, group=self.ctx.group)
        elif self.op == "reduce_scatter":
            dist.reduce_scatter_tensor(target, source, op=dist.ReduceOp.SUM, group=self.ctx.group)
        else:
            dist.all_to_all_single(target, source, group=self.ctx.group)

    def prepare(self, shape, tensors):
        """Check values into the input; the output is zeroed first (as
        nccl-tests does) so that what a smaller size left there cannot pass
        for a right result."""
        torch = self.ctx.torch
        source, target = tensors
        rank, nranks = self.ctx.rank, self.ctx.nranks
        if self.op in ("all_gather", "reduce_scatter", "alltoall"):
            target.zero_()
        if self.op in ("all_reduce", "reduce_scatter"):
            fill_periodic(torch, source, self.reduce_input)
        elif self.op == "all_gather":
            fill_periodic(torch, source, self.labels, rank)
        else:
            chunk = shape["chunk"]
            for destination in range(nranks):
                fill_periodic(torch, source[destination * chunk:(destination + 1) * chunk], self.labels,
                              cb.alltoall_label(rank, destination, nranks))

    def wrong(self, shape, tensors):
        """Wrong elements of this rank's result (0-d tensor)."""
        torch = self.ctx.torch
        target = tensors[1]
        rank, nranks = self.ctx.rank, self.ctx.nranks
        if self.op == "all_reduce":
            return count_wrong(torch, target, self.reduce_expected)
        chunk = shape["chunk"]
        if self.op == "reduce_scatter":
            # Rank r receives elements r*chunk ... of the reduced input.
            return count_wrong(torch, target, self.reduce_expected, rank * chunk)
        wrong = torch.zeros((), dtype=torch.int64, device=target.device)
        for source in range(nranks):
            label = source if self.op == "all_gather" else cb.alltoall_label(source, rank, nranks)
            wrong += count_wrong(torch, target[source * chunk:(source + 1) * chunk], self.labels, label)
        return wrong


def measure(collective, shape, warmup, iters):
    """(seconds per operation of the slowest rank, wrong elements of all
    ranks, how the timed iterations were issued) of one size: one checked
    call, then warm-up, then the timed loop (see --launch)."""
    ctx = collective.ctx
    dist = ctx.dist
    tensors = collective.views(shape)
    collective.prepare(shape, tensors)
    collective.launch(tensors)
    ctx.synchronize()
    wrong = ctx.all_reduce_scalar(collective.wrong(shape, tensors).item(), dist.ReduceOp.SUM)
    began = time.perf_counter()
    for _iteration in range(warmup):
        collective.launch(tensors)
    hold = cb.hold_seconds((time.perf_counter() - began) / max(warmup, 1), iters)
    ctx.synchronize()
    launch = ctx.options.get("launch") if ctx.cuda else "eager"
    if launch == "graph":
        elapsed = time_graph(collective, tensors, iters, hold)
    else:
        elapsed, issued, started_early = time_eager(collective, tensors, iters, hold)
        if launch == "auto":
            # Every rank must take the same way: a graph's capture holds
            # collectives that a rank left out would wait for forever.
            bound = started_early and cb.launch_bound(issued, elapsed)
            if ctx.all_reduce_scalar(1 if bound else 0, dist.ReduceOp.MAX):
                elapsed = time_graph(collective, tensors, iters, hold)
                launch = "graph"
            else:
                launch = "eager"
    # The slowest rank's time: a collective is done when its last rank is
    # (nccl-tests' -a 3; its default, -a 1, averages the ranks).
    return ctx.all_reduce_scalar(elapsed, dist.ReduceOp.MAX), int(wrong), launch


def start_together(ctx):
    """A barrier with the GPU idle on both sides, so that the first timed
    call does not include waiting for a rank still busy with earlier work."""
    ctx.synchronize()
    ctx.dist.barrier(group=ctx.group)
    ctx.synchronize()


def time_eager(collective, tensors, iters, hold):
    """(seconds per operation, CPU seconds per operation spent issuing the
    calls, whether the GPU started before they were all queued) of a loop of
    torch calls. On GPUs the first is what CUDA events saw, the GPU held for
    ``hold`` seconds while the calls are queued; on CPUs the calls run as
    they are issued and the two are one."""
    ctx = collective.ctx
    torch = ctx.torch
    start_together(ctx)
    if not ctx.cuda:
        began = time.perf_counter()
        for _iteration in range(iters):
            collective.launch(tensors)
        elapsed = (time.perf_counter() - began) / iters
        return elapsed, elapsed, True
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    ctx.hold(hold)
    start.record()
    began = time.perf_counter()
    for _iteration in range(iters):
        collective.launch(tensors)
    issued = (time.perf_counter() - began) / iters
    # The hold was too short where the GPU has already passed the start.
    started_early = start.query()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1.0e3 / iters, issued, started_early


def time_graph(collective, tensors, iters, hold):
    """Seconds per operation of the iterations captured as one CUDA graph
    and replayed once between two events, the GPU held as in time_eager."""
    ctx = collective.ctx
    torch = ctx.torch
    start_together(ctx)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _iteration in range(iters):
            collective.launch(tensors)
    # A graph's first launch uploads it to the GPU: untimed, and the ranks
    # start the timed one together again.
    graph.replay()
    start_together(ctx)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    ctx.hold(hold)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    del graph
    return start.elapsed_time(end) / 1.0e3 / iters


def allocate(ctx, op, largest):
    """The op's buffers, or None on every rank when any rank could not
    allocate them (a rank that went on alone would wait forever in the
    first collective)."""
    collective = None
    try:
        collective = Collective(ctx, op, largest)
    except RuntimeError:  # torch.cuda.OutOfMemoryError is one
        collective = None
        if ctx.cuda:
            ctx.torch.cuda.empty_cache()
    allocated = ctx.all_reduce_scalar(1 if collective is not None else 0, ctx.dist.ReduceOp.MIN)
    return collective if allocated else None


def run_sweep(ctx, options, emit):
    """Every op over every size; rows printed as they are measured."""
    ops = {}
    nranks = ctx.nranks
    for op in options["ops"]:
        shapes = []
        for size in options["sizes"]:
            shape = cb.layout(op, size, nranks, options["dtype"])
            if shape is None:
                emit("# %s: %s skipped, fewer than one aligned element per rank\n" % (op, cb.format_size(size)))
            else:
                shapes.append(shape)
        for line in bench_table.table_preamble(op, bench_options.settings_of(options), options["devices"]) + list(bench_table.TABLE_HEADER):
            emit(line + "\n")
        largest = max(shapes, key=lambda shape: shape["elements"])
        collective = allocate(ctx, op, largest)
        rows = []
        for shape in shapes:
            if collective is None:
                row = cb.unmeasured_row(shape, "could not allocate %d bytes of buffers on every rank" % (
                    largest["size"] * (1 if op == "all_reduce" else 2)), options["thresholds"])
            else:
                seconds, wrong, launch = measure(collective, shape, options["warmup_iters"], options["iters"])
                row = cb.measured_row(op, shape, nranks, seconds, wrong, options["thresholds"], launch)
            rows.append(row)
            emit(bench_table.format_row(op, options["dtype"], row) + "\n")
        for line in bench_table.table_footer(op, rows):
            emit(line + "\n")
        ops[op] = cb.op_block(op, rows)
        # Give the memory back before the next op allocates its own.
        del collective
        if ctx.cuda:
            ctx.torch.cuda.empty_cache()
    return ops


def run_pairwise(ctx, options, nodes, names):
    """all_reduce within every pair of nodes, disjoint pairs at once."""
    torch, dist = ctx.torch, ctx.dist
    rank = ctx.rank
    # new_group is collective: every rank creates every pair's group, in the
    # same order, even those it is not part of.
    groups = {}
    for first, second in itertools.combinations(range(len(nodes)), 2):
        groups[(first, second)] = dist.new_group(ranks=nodes[first] + nodes[second])
    mine = []
    schedule = bench_pairs.round_robin(len(nodes))
    for number, pairs in enumerate(schedule):
        for first, second in pairs:
            members = nodes[first] + nodes[second]
            if rank not in members:
                continue
            pair_ctx = Context(torch, dist, options, groups[(first, second)])
            shape = cb.layout("all_reduce", options["pairwise_size"], pair_ctx.nranks, options["dtype"])
            collective = allocate(pair_ctx, "all_reduce", shape)
            if collective is None:
                result = {"status": "not-measured", "note": "could not allocate %d bytes on every rank" % shape["size"]}
            else:
                seconds, wrong, launch = measure(collective, shape, options["warmup_iters"], options["iters"])
                result = {"status": "measured", "seconds": seconds, "wrong": wrong, "launch": launch}
            del collective
            if pair_ctx.rank == 0:
                result.update({"round": number, "pair": [first, second], "ranks": members, "shape": shape})
                mine.append(result)
        # Rounds one after the other: pairs of different rounds share nodes.
        dist.barrier()
    gathered = [None] * ctx.nranks
    dist.all_gather_object(gathered, mine)
    pairs = []
    for result in sorted((result for results in gathered for result in results),
                         key=lambda result: (result["round"], result["pair"])):
        shape = result["shape"]
        pair = {"round": result["round"], "nodes": [names[index] for index in result["pair"]],
                "ranks": result["ranks"], "size": shape["size"], "count": shape["count"], "status": result["status"],
                "note": result.get("note"), "time_us": None, "algbw_gbps": None, "busbw_gbps": None, "wrong": None,
                "launch": None}
        if result["status"] == "measured":
            algbw, busbw = cb.bandwidth("all_reduce", shape["size"], result["seconds"], len(result["ranks"]))
            pair.update({"time_us": result["seconds"] * 1.0e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
                         "wrong": result["wrong"], "launch": result["launch"]})
        pairs.append(pair)
    minimum = cb.threshold_for(options["pairwise_size"], options["thresholds"])
    analysis = bench_pairs.analyze_pairs(pairs, options["slow_fraction"], minimum)
    return pairs, analysis, minimum, [[[names[first], names[second]] for first, second in pairs_of_round]
                                      for pairs_of_round in schedule]


def describe_ranks(torch, options):
    """What this rank tells the others: host, node key, device."""
    local_rank = options["local_rank"]
    info = {"rank": options["rank"], "pid": os.getpid(), "hostname": socket.gethostname(),
            "node_name": os.environ.get("MLINFRA_NODE_NAME") or None, "local_rank": local_rank}
    if options["ranks_per_node"]:
        info["node_key"] = options["rank"] // options["ranks_per_node"]
    elif os.environ.get("GROUP_RANK", "").isdigit():
        info["node_key"] = int(os.environ["GROUP_RANK"])
    else:
        info["node_key"] = options["rank"] // options["local_world_size"]
    if options["device"] == "cuda":
        properties = torch.cuda.get_device_properties(local_rank)
        bus = [getattr(properties, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
        info.update({"device": local_rank, "name": properties.name,
                     "bus_id": "%04x:%02x:%02x" % tuple(bus) if None not in bus else "?"})
    else:
        info.update({"device": "-", "name": "CPU", "bus_id": "cpu"})
    return info


def _emit_from(rank):
    def emit(text):
        if rank == 0 and text:
            sys.stdout.write(text)
            sys.stdout.flush()
    return emit


# How long the other ranks wait before they exit on bad usage: torchrun stops
# the whole job when the first rank exits, and rank 0, which alone prints
# the message, was stopped before it had printed it (on a loaded machine).
USAGE_ERROR_GRACE_SECONDS = 5


def _usage_error(message, rank):
    # Every rank reaches the same verdict on its arguments; one message is enough.
    if rank in (None, "", "0"):
        sys.stderr.write("%s: error: %s\n" % (cb.COMMAND, message))
        sys.stderr.flush()
    else:
        time.sleep(USAGE_ERROR_GRACE_SECONDS)
    return cb.EXIT_USAGE


def main(argv=None):
    args = bench_options.build_parser().parse_args(argv)
    try:
        options = bench_options.resolve_options(args, os.environ)
    except ValueError as exc:
        return _usage_error(str(exc), os.environ.get("RANK"))
    # torch is imported only now: --help and bad arguments answer at once.
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        return _usage_error("cannot import torch (%s): run this with the python of the training image, or of "
                            ".work/venv-workload (bash scripts/setup.sh)" % exc, os.environ.get("RANK"))
    try:
        options = bench_options.resolve_device(options, torch.cuda.is_available())
    except ValueError as exc:
        return _usage_error(str(exc), os.environ.get("RANK"))

    init = {"backend": options["backend"]}
    if options["device"] == "cuda":
        torch.cuda.set_device(options["local_rank"])
        # Binds the process group to this GPU (torch >= 2.3), which barrier()
        # otherwise has to guess.
        init["device_id"] = torch.device("cuda", options["local_rank"])
    try:
        dist.init_process_group(**init)
    except TypeError:
        init.pop("device_id", None)
        dist.init_process_group(**init)
    try:
        return run(torch, dist, options)
    finally:
        dist.destroy_process_group()


def run(torch, dist, options):
    emit = _emit_from(options["rank"])
    infos = [None] * options["world_size"]
    dist.all_gather_object(infos, describe_ranks(torch, options))
    nodes = bench_pairs.group_nodes([info["node_key"] for info in infos])
    names = bench_pairs.name_nodes(nodes, infos)
    options["devices"] = [{"rank": info["rank"], "pid": info["pid"], "host": info["hostname"],
                           "device": info["device"], "bus_id": info["bus_id"], "name": info["name"]} for info in infos]
    nccl_version = None
    if options["backend"] == "nccl":
        version = torch.cuda.nccl.version()
        nccl_version = ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)
    document = {
        "tool": cb.TOOL, "version": cb.VERSION, "schema": cb.SCHEMA_VERSION,
        "mode": "pairwise" if options["pairwise"] else "sweep",
        "backend": options["backend"], "device": options["device"], "torch_version": torch.__version__,
        "nccl_version": nccl_version, "world_size": options["world_size"], "dtype": options["dtype"],
        "nodes": [{"name": name, "ranks": ranks, "hostnames": sorted(set(infos[rank]["hostname"] for rank in ranks))}
                  for name, ranks in zip(names, nodes)],
        "settings": bench_options.settings_of(options),
        "thresholds": [{"size": size, "min_busbw_gbps": gbps} for size, gbps in options["thresholds"]],
        "ops": {}, "pairs": None, "slow_pairs": None, "suspect_nodes": None, "slowest_pair": None, "pairwise": None,
    }
    context = Context(torch, dist, options)
    if options["pairwise"]:
        pairs, analysis, minimum, schedule = run_pairwise(context, options, nodes, names)
        document.update({"pairs": pairs, "slow_pairs": analysis["slow_pairs"],
                         "suspect_nodes": analysis["suspect_nodes"], "slowest_pair": analysis["slowest_pair"],
                         "pairwise": {"size": options["pairwise_size"], "fraction": options["slow_fraction"],
                                      "min_busbw_gbps": minimum, "median_busbw_gbps": analysis["median_busbw_gbps"],
                                      "note": analysis["note"], "rounds": schedule}})
        emit(bench_pairs.format_pairs(document))
    else:
        emit(bench_table.title_line(document) + "\n")
        document["ops"] = run_sweep(context, options, emit)
    cb.finish_document(document)
    emit("# verdict: %s%s\n" % (document["verdict"], "".join("\n#   %s" % reason for reason in document["reasons"])))
    if options["rank"] == 0 and options["json"]:
        with open(options["json"], "w", encoding="utf-8") as handle:
            handle.write(cb.render_document(document))
    # Every rank computed the same document from the same reduced figures,
    # so every rank exits with the same status.
    return cb.EXIT_OK if document["passed"] else cb.EXIT_FAILED
