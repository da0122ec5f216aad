"""A plain torch.distributed all_reduce loop, as users time one by hand:
one process per GPU (torchrun), CUDA events around the timed iterations,
busbw by nccl-tests' formula. The yardstick that tells the collection's
benchmark apart from torch itself (tools/gpu/measure.sh torch-loop).

Each size is timed twice: on a tensor of its own (``fresh``) and on the
beginning of one buffer of the largest size (``view``, as the benchmark does),
and each timing is printed as rank 0 saw it and as the slowest rank did (the
benchmark's MAX). One JSON object per line on rank 0:
{"size", "buffer", "rank0_busbw_gbps", "max_busbw_gbps"}.

    torchrun --nproc-per-node 2 tools/gpu/torch_loop.py -b 16M -e 512M
"""

import argparse
import json
import os

import torch
import torch.distributed as dist

UNITS = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def size_bytes(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def timed(tensor, warmup, iters):
    """Seconds per all_reduce of ``tensor`` on this rank."""
    for _iteration in range(warmup):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _iteration in range(iters):
        dist.all_reduce(tensor)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1.0e3 / iters


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-b", "--min-bytes", default="16M")
    parser.add_argument("-e", "--max-bytes", default="512M")
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
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
    for size in sizes:
        fresh = torch.zeros(size // element, dtype=dtype, device="cuda")
        for buffer, tensor in (("fresh", fresh), ("view", big[:size // element])):
            seconds = timed(tensor, args.warmup, args.iters)
            slowest = torch.tensor([seconds], dtype=torch.float64, device="cuda")
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            bus = 2.0 * (nranks - 1) / nranks * size / 1.0e9
            if dist.get_rank() == 0:
                print(json.dumps({"size": size, "buffer": buffer, "rank0_busbw_gbps": round(bus / seconds, 2),
                                  "max_busbw_gbps": round(bus / slowest.item(), 2)}), flush=True)
        del fresh
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
