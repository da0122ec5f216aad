"""A plain torch.distributed all_reduce loop, as users time one by hand:
one process per GPU (torchrun), CUDA events around the timed iterations,
busbw by nccl-tests' formula. The yardstick that tells the collection's
benchmark apart from torch itself (tools/gpu/measure.sh torch-loop).

Each size is timed in several ways, one variable changed at a time against
the way a user would write it (``fresh``: a tensor of its own, eager loop):

- ``view``: the beginning of one buffer of the largest size, as the
  benchmark does;
- ``aligned``: a view, with a one-element all_reduce just before the start
  event, so that both ranks' timers start once both GPUs are there;
- ``graph1``: the iterations captured as one CUDA graph and replayed once
  between the events, as the benchmark's graph launch does;
- ``graph20``: that graph replayed 20 times between the events, as
  nccl-tests' -G 20 does;
- ``held``: aligned, and then the GPU held (a spin kernel) while the CPU
  queues every timed call, so that neither the ranks' skew nor the time to
  issue the calls is timed;
- ``heldgraph``: held, with the iterations replayed once as a CUDA graph.

Each timing is printed as rank 0 saw it, as the slowest rank did (the
benchmark's MAX) and as the fastest did. One JSON object per line on rank 0:
{"size", "buffer", "rank0_busbw_gbps", "slowest_busbw_gbps", "fastest_busbw_gbps"}.

    torchrun --nproc-per-node 2 tools/gpu/torch_loop.py -b 1M -e 512M [--bind-device]
"""

import argparse
import json
import os

import torch
import torch.distributed as dist

UNITS = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
WAYS = ("fresh", "view", "aligned", "graph1", "graph20", "held", "heldgraph")
# GPU cycles of the spin that holds the GPU: about 2 ms at 1.98 GHz, longer
# than queueing 20 all_reduce calls takes.
HOLD_CYCLES = 4000000


def size_bytes(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def start_together():
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()


def between_events(work, iters):
    """Seconds per iteration of work() run between two CUDA events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1.0e3 / iters


def timed_eager(tensor, warmup, iters, align=None, hold=False):
    for _iteration in range(warmup):
        dist.all_reduce(tensor)
    start_together()
    if align is not None:
        dist.all_reduce(align)
    if hold:
        torch.cuda._sleep(HOLD_CYCLES)  # pylint: disable=protected-access

    def loop():
        for _iteration in range(iters):
            dist.all_reduce(tensor)
    return between_events(loop, iters)


def timed_graph(tensor, warmup, iters, replays, align=None):
    for _iteration in range(warmup):
        dist.all_reduce(tensor)
    start_together()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _iteration in range(iters):
            dist.all_reduce(tensor)
    graph.replay()
    start_together()
    if align is not None:
        dist.all_reduce(align)
        torch.cuda._sleep(HOLD_CYCLES)  # pylint: disable=protected-access

    def replay():
        for _replay in range(replays):
            graph.replay()
    seconds = between_events(replay, iters * replays)
    del graph
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-b", "--min-bytes", default="16M")
    parser.add_argument("-e", "--max-bytes", default="512M")
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--bind-device", action="store_true",
                        help="init_process_group(device_id=...), as the benchmark does")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    if args.bind_device:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("nccl")
    nranks = dist.get_world_size()
    dtype = getattr(torch, args.dtype)
    element = torch.empty((), dtype=dtype).element_size()
    sizes = []
    size = size_bytes(args.min_bytes)
    while size <= size_bytes(args.max_bytes):
        sizes.append(size)
        size *= 2
    # Zeros stay zeros however often they are summed (ones would reach
    # infinity in bf16); the reduction costs the same whatever the values.
    big = torch.zeros(sizes[-1] // element, dtype=dtype, device="cuda")
    one = torch.zeros(1, dtype=dtype, device="cuda")
    for size in sizes:
        fresh = torch.zeros(size // element, dtype=dtype, device="cuda")
        view = big[:size // element]
        timings = {
            "fresh": lambda: timed_eager(fresh, args.warmup, args.iters),
            "view": lambda: timed_eager(view, args.warmup, args.iters),
            "aligned": lambda: timed_eager(view, args.warmup, args.iters, align=one),
            "graph1": lambda: timed_graph(view, args.warmup, args.iters, 1),
            "graph20": lambda: timed_graph(view, args.warmup, args.iters, 20),
            "held": lambda: timed_eager(view, args.warmup, args.iters, align=one, hold=True),
            "heldgraph": lambda: timed_graph(view, args.warmup, args.iters, 1, align=one),
        }
        for way in WAYS:
            seconds = timings[way]()
            spread = torch.tensor([seconds, -seconds], dtype=torch.float64, device="cuda")
            dist.all_reduce(spread, op=dist.ReduceOp.MAX)
            bus = 2.0 * (nranks - 1) / nranks * size / 1.0e9
            if dist.get_rank() == 0:
                print(json.dumps({"size": size, "buffer": way, "rank0_busbw_gbps": round(bus / seconds, 2),
                                  "slowest_busbw_gbps": round(bus / spread[0].item(), 2),
                                  "fastest_busbw_gbps": round(bus / -spread[1].item(), 2)}), flush=True)
        del fresh
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
