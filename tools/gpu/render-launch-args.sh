#!/usr/bin/env bash
# Renders, with the train role, the launcher arguments of each TorchTitan
# variant that `tools/gpu/measure.sh torchtitan` runs on the GPU host:
#
#   bash tools/gpu/render-launch-args.sh [OUTDIR]
#
# OUTDIR (default docs/measurements/h200x2-torchtitan) gets
# launch-args-VARIANT.json for bf16-compile (the published figures'
# settings), bf16-eager (torch.compile off) and float8-compile (train_float8),
# two-nodes (two pods of one GPU each, 30 steps, no compile: measure.sh
# two-nodes), two-nodes-4gpu (two pods of four GPUs each, 40 steps,
# torch.compile: the StatefulSet guide's topology on an eight-GPU host), and smoke (four steps without compile: does it start, does it fit).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$ROOT/docs/measurements/h200x2-torchtitan}"
mkdir -p "$out"
cd "$ROOT"
render() {
  local variant="$1"; shift
  "$ROOT/.venv/bin/ansible-playbook" tools/gpu/launch-args.yml -i inventories/local \
    -e @tools/gpu/llama3-8b-h200x2.yml -e "launch_args_file=$out/launch-args-$variant.json" "$@" > /dev/null
  echo "$out/launch-args-$variant.json"
}
render bf16-compile
render bf16-eager -e train_compile=false
render float8-compile -e train_float8=true
render two-nodes -e replicas=2 -e train_nproc_per_pod=1 -e train_steps=30 -e train_compile=false
render two-nodes-4gpu -e replicas=2 -e train_nproc_per_pod=4 -e train_steps=40
render smoke -e '{"train_steps": 4, "train_compile": false, "train_overrides": {"job.dump_folder": "/tmp/mlinfra-gpu/outputs", "lr_scheduler.warmup_steps": 2, "metrics.log_freq": 1}}'
