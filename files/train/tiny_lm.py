# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""A tiny causal language model trained with DistributedDataParallel: the
demo workload of ``mlinfra train start --workload script``.

Run by torchrun (one process per GPU, or per CPU slot without GPUs): the
backend is nccl where CUDA is available and gloo otherwise (``--backend``, or
MLINFRA_TRAIN_BACKEND, which ``mlinfra train --backend-hint`` sets, can pin
it). The tokenizer is the 256 byte values, so nothing is downloaded; the text
is corpus.txt beside this file (``--data`` for another). Each rank trains on
its own contiguous shard of the text, batches of random windows drawn with
its own seed; DDP averages the gradients.

Local rank 0 of every node prints TorchTitan's metrics line every
``--log-freq`` steps (and at step 1 and the last step), so that each pod's log
reads as a TorchTitan log (plugins/module_utils/report/throughput.py parses it)::

    [tiny_lm] 2026-01-01 12:00:00,000 - root - INFO - step: 10  loss:  3.1234  grad_norm:  0.8123  \
memory:  0.31GiB(0.98%)  tps: 12,345  tflops: 0.01

The loss is the mean over all ranks; tps (tokens per second per process),
tflops and memory are this process's (memory: the CUDA caching allocator's
peak, or the process's peak resident size on the CPU). mfu is printed only
where the device's peak is known (bf16 dense peak of A100, H100, H200).
The last line is ``Training completed: ...``.

Test hook: ``--fail-on-rank R`` (with ``--fail-at-step S``, default 3) makes
global rank R exit with status 1 at step S, for tests of how a failed rank
is reported; it is left out of --help.
"""

import argparse
import datetime
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

GIB = 1024 ** 3
# Dense bf16 peak FLOP/s, for mfu; devices not listed print none.
PEAK_FLOPS = (("H200", 989.5e12), ("H100", 989.5e12), ("A100", 312e12))


def log(message):
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    sys.stdout.write("[tiny_lm] %s - root - INFO - %s\n" % (stamp, message))
    sys.stdout.flush()


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(dim, dim=2)
        q, k, v = (t.view(batch, length, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """A GPT-style decoder over bytes, its output layer tied to its input
    embedding."""

    def __init__(self, seq_len, dim, layers, heads, vocab=256):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for layer in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tokens.weight
        # GPT-2's initialisation: small weights, so that the first logits
        # are near 0 and the first loss near ln(256) = 5.55.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tokens(idx) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def flops_per_token(model, seq_len, dim, layers):
    """TorchTitan's estimate: 6 per parameter outside the embeddings, and
    the attention scores: 12 * layers * dim * seq_len."""
    params = sum(p.numel() for p in model.parameters()) - model.tokens.weight.numel() - \
        model.positions.weight.numel()
    return 6 * params + 12 * layers * dim * seq_len


def load_shard(path, rank, world_size, seq_len):
    with open(path, "rb") as handle:
        data = handle.read()
    size = len(data) // world_size
    shard = data[rank * size:(rank + 1) * size]
    if len(shard) < seq_len + 2:
        raise SystemExit("tiny_lm: %s has %d bytes, too few for %d ranks of windows of %d" % (
            path, len(data), world_size, seq_len + 1))
    return torch.frombuffer(bytearray(shard), dtype=torch.uint8).long()


def batch_of(shard, batch_size, seq_len, generator):
    # Drawn where the generator is (the GPU's own stream of numbers on CUDA).
    starts = torch.randint(0, len(shard) - seq_len - 1, (batch_size,), generator=generator, device=generator.device)
    windows = torch.stack([shard[start:start + seq_len + 1] for start in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


def memory_figures(device):
    """(GiB, percent of the device's or the machine's memory)."""
    if device.type == "cuda":
        used = torch.cuda.max_memory_reserved(device)
        total = torch.cuda.get_device_properties(device).total_memory
    else:
        used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return used / GIB, 100.0 * used / total if total else 0.0


def peak_flops(device):
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for model, peak in PEAK_FLOPS:
        if model in name:
            return peak
    return None


def build_parser():
    parser = argparse.ArgumentParser(description="Train a tiny byte-level causal language model with DDP "
                                                 "(run it with torchrun).")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--data", default=os.path.join(here, "corpus.txt"), help="text file (default %(default)s)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per rank and step")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--log-freq", type=int, default=10, help="steps between metrics lines")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"),
                        default=os.environ.get("MLINFRA_TRAIN_BACKEND") or "auto")
    # Test hooks (see the module's docstring).
    parser.add_argument("--fail-on-rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--fail-at-step", type=int, default=3, help=argparse.SUPPRESS)
    # A test hook too: a run kept long so that it can be stopped, timed out
    # or queued behind, idle between its steps instead of keeping every
    # core of a test machine busy.
    parser.add_argument("--step-pause", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if min(args.steps, args.batch_size, args.seq_len, args.log_freq) < 1 or args.dim % args.heads:
        raise SystemExit("tiny_lm: --steps, --batch-size, --seq-len and --log-freq must be at least 1, and --dim a "
                         "multiple of --heads")
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    talk = local_rank == 0

    torch.manual_seed(args.seed)
    model = TinyLM(args.seq_len, args.dim, args.layers, args.heads).to(device)
    per_token = flops_per_token(model, args.seq_len, args.dim, args.layers)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    shard = load_shard(args.data, rank, world_size, args.seq_len).to(device)
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed * 1000003 + rank)
    peak = peak_flops(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    if talk:
        params = sum(p.numel() for p in model.parameters())
        log("Training starts at step 1: %d parameters, world size %d (rank %d here), backend %s, %d tokens per "
            "rank and step, %d bytes of text per rank" % (params, world_size, rank, backend,
                                                          args.batch_size * args.seq_len, len(shard)))

    started = last_time = time.perf_counter()
    last_step = 0
    first_loss = loss_value = None
    for step in range(1, args.steps + 1):
        if args.fail_on_rank == rank and step == args.fail_at_step:
            sys.stderr.write("tiny_lm: rank %d fails on purpose at step %d (--fail-on-rank, a test hook)\n"
                             % (rank, step))
            sys.stderr.flush()
            sys.exit(1)
        inputs, targets = batch_of(shard, args.batch_size, args.seq_len, generator)
        with autocast:
            logits = ddp(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        optimizer.step()
        if step == 1 or step % args.log_freq == 0 or step == args.steps:
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            loss_value = mean.item() / world_size
            first_loss = loss_value if first_loss is None else first_loss
            now = time.perf_counter()
            tps = (step - last_step) * args.batch_size * args.seq_len / max(now - last_time, 1e-9)
            last_time, last_step = now, step
            tflops = per_token * tps / 1e12
            gib, percent = memory_figures(device)
            line = "step: %2d  loss: %7.4f  grad_norm: %7.4f  memory: %5.2fGiB(%.2f%%)  tps: %s  tflops: %.2f" % (
                step, loss_value, float(grad_norm), gib, percent, "{:,}".format(int(round(tps))), tflops)
            if peak:
                line += "  mfu: %.2f%%" % (100.0 * tflops * 1e12 / peak)
            if talk:
                log(line)
            if not math.isfinite(loss_value):
                raise SystemExit("tiny_lm: the loss is %s at step %d; lower --lr" % (loss_value, step))
        if args.step_pause > 0:
            time.sleep(args.step_pause)
    if talk:
        log("Training completed: %d steps in %.1fs, loss %.4f -> %.4f (world size %d, %s)" % (
            args.steps, time.perf_counter() - started, first_loss, loss_value, world_size, backend))
    # Every rank leaves together, and the DDP reducer (which holds the
    # process group) goes before the group does.
    dist.barrier()
    del ddp, optimizer
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    status = main()
    # Leave without the interpreter's and the C++ runtime's finalization:
    # torch (2.11, gloo) now and then aborts a rank there ("terminate called
    # without an active exception", SIGABRT) after a run that completed and
    # destroyed its process group, and torchrun then fails the whole job.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
