#!/usr/bin/env bash
# GPU-host measurements of the collection, each done whole in one call:
#
#   tools/gpu/measure.sh node-report OUTDIR
#       rdma_node_check (as the in-pod command mlinfra node-check) in rdma and
#       tcp mode, and mlinfra autodetect, on this host; raw nvidia-smi and
#       sysfs listings beside them for comparison.
#
#   tools/gpu/measure.sh program OUTDIR
#       every subcommand of the pods' one program (files/bin/mlinfra) that
#       the GPUs answer, on this host from the shipped files alone (the
#       layout the pods' ConfigMaps give, MLINFRA_PLUGINS_DIR pointing at
#       it): node-report, pod-bench and one train-launcher run, each into
#       its own directory of OUTDIR, and a line per part in summary.txt.
#
#   tools/gpu/measure.sh record-node OUTDIR
#       mlinfra node-check --record: the snapshot of this host that the node
#       checks read (OUTDIR/snapshot), and the checks' reports on the host
#       and on the snapshot in rdma and tcp mode, which must be the same.
#
#   tools/gpu/measure.sh pod-bench OUTDIR
#       mlinfra pod-bench as verify-rdma runs it in a pod, as the only node of
#       the job with one process per GPU of this host (NCCL, NCCL_DEBUG=INFO):
#       its JSON result, the NCCL log it recorded, and mlinfra nccl-log's
#       verdicts on that log in rdma and tcp mode.
#
#   tools/gpu/measure.sh train-launcher OUTDIR [RUNS]
#       the train role's launcher (mlinfra train start --wait, as a Job's pod
#       runs it) against a hand-typed torchrun of the same job, alternating
#       RUNS times (default 3; each kind first in every other run, after
#       an untimed start that reads torch from disk): the collection's tiny
#       model on every GPU of this host as one node over NCCL, 300 steps;
#       each run's log, the tokens/s its metrics lines give (throughput.py),
#       its wall time, and the ratios of both.
#
#   tools/gpu/measure.sh bench-compare OUTDIR [ALL_REDUCE_PERF] [ROUNDS]
#       all_reduce busbw, 1 MiB to 8 GiB, bfloat16 and float32, 5 warm-up and
#       20 timed iterations: mlinfra pod-bench (as verify-rdma runs it, one
#       process per GPU) in three NCCL environments -- none set, the one
#       mlinfra autodetect writes for this host (given to the bench as a pod
#       gives it: BASH_ENV), and the fixed NCCL_ALGO=Ring,
#       NCCL_P2P_LEVEL=NVL, NCCL_NET_GDR_LEVEL=5 of hand-written launch
#       scripts -- and, when the path of a
#       built NVIDIA nccl-tests all_reduce_perf is given, that with the same
#       sizes, types and iterations (-g GPUS, one process), and with its
#       CUDA-graph mode (-G 20) to 256 MiB. Everything alternates ROUNDS times
#       (default 2); BENCH_ENVS="none detected" leaves the fixed environment
#       out, BENCH_DTYPES=bfloat16 the float32 runs. summary.txt has the per-size medians and their ratios, the
#       spread of each environment's rounds, and where NCCL's log of its
#       set-up differs from the run with none.
#
#   tools/gpu/measure.sh torchtitan OUTDIR VARIANT [ARGS_JSON] [RUNS]
#       TorchTitan through the train role's launcher, its arguments as the
#       role renders them (tools/gpu/launch-args.yml writes ARGS_JSON;
#       default docs/measurements/h200x2-torchtitan/launch-args-VARIANT.json),
#       and the same job started by a hand-typed torchrun (VARIANT
#       bf16-compile, bf16-eager or float8-compile), RUNS times (default 1),
#       each kind first in every other run. Needs TorchTitan and
#       its dependencies importable (PYTHONPATH); makes the tokenizer and the
#       data under /tmp/mlinfra-gpu/assets first (make_train_assets.py).
#
#   tools/gpu/measure.sh launch-compare OUTDIR ALL_REDUCE_PERF
#       how the way iterations are issued moves the figures, all_reduce bf16
#       1 MiB to 128 MiB, -w 5 -n 20, three rounds alternating: nccl-tests
#       as is and with its CUDA-graph mode (-G 20), and mlinfra pod-bench
#       with --launch graph, graph with NCCL_GRAPH_REGISTER=0, eager and
#       auto (which sizes auto timed as a graph is printed per round).
#       Prints the per-size medians (busbw GB/s).
#
#   tools/gpu/measure.sh torch-loop OUTDIR ALL_REDUCE_PERF [ROUNDS]
#       where the time of the benchmark's all_reduce goes: bf16, 1 MiB to
#       512 MiB, -w 5 -n 20, ROUNDS rounds (default 3) alternating:
#       nccl-tests as is and with -G 20, mlinfra pod-bench (--launch auto,
#       as verify-rdma runs it, and eager), and a plain torch.distributed
#       loop (tools/gpu/torch_loop.py) timed five ways, as users run it and
#       under the benchmark's conditions (its GPU bound, NCCL's INFO log).
#       tools/gpu/loop_summary.py prints the per-size medians and ratios.
#
#   tools/gpu/measure.sh two-nodes OUTDIR [ALL_REDUCE_PERF] [VARIANT]
#       this host's GPUs split into two "nodes" of half of them each
#       (CUDA_VISIBLE_DEVICES), each started as its own pod would be:
#       mlinfra pod-bench twice (the all_reduce sweep, bf16 1 MiB to 8 GiB,
#       then its pairwise mode) and, when ALL_REDUCE_PERF is given, nccl-tests
#       on every GPU (-g GPUS) before and after the sweep; then the train
#       role's launcher twice, TorchTitan with the arguments of
#       launch-args-VARIANT.json (default two-nodes: one GPU a node, no
#       compile; two-nodes-4gpu: four a node, torch.compile, 40 steps), and
#       the same job started by two hand-typed torchruns. c10d rendezvous on
#       127.0.0.1. The nodes share the host, so NCCL still joins them over
#       NVLink: this rehearses the launch and the rendezvous, not a network.
#
# ALL_REDUCE_PERF is a built nccl-tests all_reduce_perf, or the directory of
# NVIDIA nccl-tests' sources (carried with the call), which is then built
# once on the host against the NCCL that torch loads (/tmp/mlinfra-gpu).
#
# Results go to OUTDIR (created). NVLink SHARP / multicast stays off in every
# run: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1.
set -uo pipefail

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

# MEASURE_ROOT: another tree holding the collection's files/ and plugins/
# (program: the shipped files alone).
ROOT="${MEASURE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
what="${1:?usage: measure.sh node-report|pod-bench|train-launcher|bench-compare|torchtitan OUTDIR ...}"
out="${2:?usage: measure.sh $what OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Relative paths (the TorchTitan config in the rendered arguments) are the
# repository's.
cd "$ROOT" || exit 1
PY="${PYTHON:-python3}"

node_report() {
  {
    echo "== host"; uname -r; "$PY" --version
    echo "== nvidia-smi -L"; nvidia-smi -L
    echo "== nvidia-smi topo -m"; nvidia-smi topo -m
    echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version
    echo "== /sys/class/infiniband"; ls -la /sys/class/infiniband 2>&1
    echo "== lsmod (mlx5, nvidia, ib)"; grep -E '^(mlx5|nvidia|ib_|rdma)' /proc/modules 2>&1
    echo "== ulimit -l"; ulimit -l
  } > "$out/host-raw.txt" 2>&1
  for mode in rdma tcp; do
    "$PY" "$ROOT/files/bin/mlinfra" node-check --mode "$mode" --expect-gpus "$(nvidia-smi -L | grep -c '^GPU')" \
      > "$out/node-check-$mode.txt" 2>&1
    echo "exit status: $?" >> "$out/node-check-$mode.txt"
    "$PY" "$ROOT/files/bin/mlinfra" node-check --mode "$mode" --fail-on never --format json \
      > "$out/node-check-$mode.json" 2>>"$out/errors.txt"
  done
  "$PY" "$ROOT/files/bin/mlinfra" autodetect --output "$out/autodetect.env" --json "$out/autodetect.json"
  echo "autodetect exit status: $?"
  cat "$out"/node-check-rdma.txt "$out"/node-check-tcp.txt "$out/autodetect.env"
}

record_node() {
  local gpus mode
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  "$PY" "$ROOT/files/bin/mlinfra" node-check --record "$out/snapshot" --fail-on never --format json \
    > "$out/recording-report.json" 2> "$out/recording.txt"
  echo "record exit status: $?"; cat "$out/recording.txt"
  for mode in rdma tcp; do
    "$PY" "$ROOT/files/bin/mlinfra" node-check --mode "$mode" --min-gpus "$gpus" > "$out/host-$mode.txt" 2>&1
    "$PY" "$ROOT/files/bin/mlinfra" node-check --mode "$mode" --min-gpus "$gpus" --root "$out/snapshot" \
      > "$out/snapshot-$mode.txt" 2>&1
    if diff "$out/host-$mode.txt" "$out/snapshot-$mode.txt" > "$out/diff-$mode.txt"; then
      echo "$mode: the snapshot is checked as the host"
    else
      echo "$mode: the snapshot differs from the host:"; cat "$out/diff-$mode.txt"
    fi
    cat "$out/host-$mode.txt"
  done
  uname -r > "$out/uname-r.txt"
}

pod_bench() {
  local gpus
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  POD_NAME=bench-0 MASTER_ADDR=127.0.0.1 "$PY" "$ROOT/files/bin/mlinfra" pod-bench --nnodes 1 \
    --nproc-per-node "$gpus" --mode rdma --timeout 400 --workdir "$out/pod-bench" \
    -- --ops all_reduce,all_gather -b 1M -e 1G > "$out/pod-bench.json" 2> "$out/pod-bench.stderr"
  echo "pod-bench exit status: $?"
  for mode in rdma tcp; do
    "$PY" "$ROOT/files/bin/mlinfra" nccl-log --mode "$mode" "$out/pod-bench/bench-node0.log" > "$out/nccl-log-$mode.txt" 2>&1
    echo "nccl-log $mode exit status: $?" >> "$out/nccl-log-$mode.txt"
  done
  "$PY" - "$out/pod-bench.json" <<'PYEOF'
import json, sys
result = json.load(open(sys.argv[1]))
print("exit_code", result["exit_code"], "error", result["error"], "seconds", result["seconds"])
print("transport", result["transport"]["status"], result["transport"]["message"])
print("nccl", json.dumps(result["nccl"]))
document = result["document"] or {}
for op, block in (document.get("ops") or {}).items():
    for row in block["rows"]:
        print(op, row["size"], row["busbw_gbps"], row["wrong"])
PYEOF
  cat "$out"/nccl-log-*.txt
}

train_launcher() {
  local runs="${3:-3}" gpus steps="${TRAIN_STEPS:-300}" port=29620 run kind
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  local job=(--steps "$steps" --log-freq 50 --batch-size 32 --seq-len 256 --dim 256 --layers 4 --heads 8)
  one_start() {
    local kind="$1" run="$2" started
    started=$(date +%s.%N)
    if [[ "$kind" == launcher ]]; then
      MLINFRA_PLUGINS_DIR="$ROOT/plugins" POD_NAME="gpu-0" "$PY" "$ROOT/files/bin/mlinfra" train start --wait \
        --run-dir "$out/launcher-$run" --run-id "launcher-$run" --nnodes 1 --nproc-per-node "$gpus" \
        --rdzv-host 127.0.0.1 --rdzv-port "$port" --workload demo --nccl-env '' -- "${job[@]}" \
        > "$out/launcher-$run.out" 2>&1
    elif [[ "$kind" == torchrun ]]; then
      "$PY" -m torch.distributed.run --nnodes 1 --nproc-per-node "$gpus" --rdzv-backend c10d \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "torchrun-$run" "$ROOT/files/train/tiny_lm.py" "${job[@]}" \
        > "$out/torchrun-$run.out" 2>&1
    else
      # torchrun by hand with the launcher's own flags and environment (the
      # prefix is torchrun's template, expanded by torchrun).
      # shellcheck disable=SC2016
      LOGLEVEL=INFO TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank${rank}]:' "$PY" -m torch.distributed.run \
        --nnodes 1 --nproc-per-node "$gpus" --node-rank 0 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" \
        --rdzv-id "$kind-$run" --rdzv-conf is_host=1,join_timeout=600 --max-restarts 0 \
        --log-dir "$out/$kind-$run-ranks" --tee 3 "$ROOT/files/train/tiny_lm.py" "${job[@]}" > "$out/$kind-$run.out" 2>&1
    fi
    echo "$kind run $run: exit $?, $(elapsed_since "$started") s" | tee -a "$out/summary.txt"
  }
  # Untimed: the first start reads torch and CUDA's libraries from disk,
  # which would count against whichever kind went first.
  "$PY" -c 'import torch, torch.distributed.run; torch.zeros(1, device="cuda")' > /dev/null 2>&1
  local kinds=(launcher torchrun) extra_kinds=()
  read -r -a extra_kinds <<< "${TRAIN_EXTRA_KINDS:-}"
  kinds+=("${extra_kinds[@]}")
  for run in $(seq 1 "$runs"); do
    # Each kind goes first in turn.
    for kind in "${kinds[@]:$(( (run - 1) % ${#kinds[@]} ))}" "${kinds[@]:0:$(( (run - 1) % ${#kinds[@]} ))}"; do
      one_start "$kind" "$run"
    done
  done
  PYTHONPATH="$ROOT/plugins" "$PY" - "$out" "$runs" <<'PY' | tee -a "$out/summary.txt"
import re, sys
from module_utils.report import throughput
out, runs = sys.argv[1], int(sys.argv[2])
means = {}
walls = {"launcher": [], "torchrun": []}
for line in open("%s/summary.txt" % out):
    found = re.match(r"^(\S+) run \d+: exit 0, ([0-9.]+) s$", line.strip())
    if found:
        walls.setdefault(found.group(1), []).append(float(found.group(2)))
for kind, values in sorted(walls.items()):
    if values:
        print("%s wall time: median %.2f s of %d" % (kind, throughput.median(values), len(values)))
for kind in ("launcher", "torchrun"):
    values = []
    for run in range(1, runs + 1):
        parsed = throughput.parse_log("%s/%s-%d.out" % (out, kind, run), "torchtitan")
        # Steady state: the metrics lines after the first (compilation, warm-up).
        tps = [m["figures"]["tokens_per_sec_per_device"] for m in parsed["measurements"][1:]]
        values.append(throughput.median(tps))
        print("%s run %d: median tokens/s per device %.0f over %d lines" % (kind, run, values[-1], len(tps)))
    means[kind] = sum(values) / len(values)
print("launcher / torchrun tokens/s: %.4f (means %.0f / %.0f)" % (
    means["launcher"] / means["torchrun"], means["launcher"], means["torchrun"]))
if len(walls["launcher"]) == len(walls["torchrun"]) == runs:
    print("launcher / torchrun wall time: %.4f (medians %.1f / %.1f s; means %.2f / %.2f s)" % (
        throughput.median(walls["launcher"]) / throughput.median(walls["torchrun"]),
        throughput.median(walls["launcher"]), throughput.median(walls["torchrun"]),
        sum(walls["launcher"]) / runs, sum(walls["torchrun"]) / runs))
else:
    print("wall time: not every run exited 0: %s" % walls)
PY
}

# A built all_reduce_perf, or one built now from NVIDIA nccl-tests' sources
# (a directory, carried with the call) against the NCCL that torch loads:
#   nccl_tests_binary PATH_OR_SOURCE_DIR
nccl_tests_binary() {
  local source="$1" nccl build=/tmp/mlinfra-gpu/nccl-tests
  if [[ ! -d "$source" ]]; then echo "$source"; return 0; fi
  if [[ ! -x "$build/all_reduce_perf" ]]; then
    nccl="$("$PY" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])')" || return 1
    rm -rf "$build" && mkdir -p "$build/lib" && cp -r "$source" "$build/src-tree" || return 1
    # The wheel ships only libnccl.so.2: the link step looks for libnccl.so.
    ln -sf "$nccl/lib/libnccl.so.2" "$build/lib/libnccl.so"
    LIBRARY_PATH="$build/lib" make -C "$build/src-tree/src" -j 16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME="$nccl" \
      NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 BUILDDIR="$build/bin" "$build/bin/all_reduce_perf" \
      > "$out/nccl-tests-build.txt" 2>&1 || { tail -20 "$out/nccl-tests-build.txt" >&2; return 1; }
    # A wrapper that finds torch's NCCL; the wrapper's own variables stay
    # for it to expand.
    # shellcheck disable=SC2016
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$nccl" "$build/bin/all_reduce_perf" > "$build/all_reduce_perf"
    chmod +x "$build/all_reduce_perf"
  fi
  echo "$build/all_reduce_perf"
}

elapsed_since() {
  "$PY" -c "import sys,time; print(round(time.time() - float(sys.argv[1]), 1))" "$1"
}

bench_compare() {
  local all_reduce_perf="${3:-}" rounds="${4:-2}" gpus round dtype env_name started name unset_nccl=()
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  if [[ -n "$all_reduce_perf" ]]; then all_reduce_perf="$(nccl_tests_binary "$all_reduce_perf")" || return 1; fi
  for name in $(compgen -e | grep '^NCCL_'); do
    [[ "$name" == NCCL_NVLS_ENABLE ]] || unset_nccl+=(-u "$name")
  done
  "$PY" "$ROOT/files/bin/mlinfra" autodetect --output "$out/env-detected.sh" --json "$out/autodetect.json" \
    > "$out/autodetect.out" 2>&1
  printf 'export NCCL_ALGO=Ring NCCL_P2P_LEVEL=NVL NCCL_NET_GDR_LEVEL=5\n' > "$out/env-seed.sh"
  : > "$out/env-none.sh"
  for round in $(seq 1 "$rounds"); do
    for dtype in ${BENCH_DTYPES:-bfloat16 float32}; do
      if [[ -n "$all_reduce_perf" ]]; then
        started=$(date +%s.%N)
        # nccl-tests names float32 'float'.
        "$all_reduce_perf" -b 1M -e 8G -f 2 -g "$gpus" -w 5 -n 20 -d "${dtype/float32/float}" \
          > "$out/nccltests-$dtype-$round.txt" 2>&1
        echo "round $round $dtype nccl-tests: exit $?, $(elapsed_since "$started") s" | tee -a "$out/runs.txt"
        # Its CUDA-graph mode, where its own loop is launch-bound.
        "$all_reduce_perf" -b 1M -e 256M -f 2 -g "$gpus" -w 5 -n 20 -G 20 -d "${dtype/float32/float}" \
          > "$out/nccltests_graph-$dtype-$round.txt" 2>&1
      fi
      for env_name in ${BENCH_ENVS:-none detected seed}; do
        started=$(date +%s.%N)
        # Only NVLink SHARP stays off in every environment; the bench gets
        # its environment the way a pod's processes do (BASH_ENV).
        # shellcheck disable=SC2016  # $0 and $@ are the inner bash's
        env "${unset_nccl[@]}" BASH_ENV="$out/env-$env_name.sh" POD_NAME=bench-0 MASTER_ADDR=127.0.0.1 \
          bash -c 'exec "$0" "$@"' "$PY" "$ROOT/files/bin/mlinfra" pod-bench --nnodes 1 \
          --nproc-per-node "$gpus" --mode tcp --timeout 300 --workdir "$out/work-$env_name-$dtype-$round" \
          -- --ops all_reduce -b 1M -e 8G -f 2 --dtype "$dtype" -w 5 -n 20 \
          > "$out/bench-$env_name-$dtype-$round.json" 2> "$out/bench-$env_name-$dtype-$round.stderr"
        echo "round $round $dtype bench ($env_name): exit $?, $(elapsed_since "$started") s" | tee -a "$out/runs.txt"
      done
    done
  done
  PYTHONPATH="$ROOT/plugins" "$PY" "$ROOT/tools/gpu/bench_summary.py" "$out" | tee "$out/summary.txt"
}

# The TorchTitan job of the measurements as a user would type it: torchrun
# with c10d rendezvous on 127.0.0.1 and TorchTitan's own flags.
#   titan_by_hand NNODES NPROC_PER_NODE PORT RDZV_ID STEPS VARIANT_FLAGS...
titan_by_hand() {
  local assets=/tmp/mlinfra-gpu/assets
  "$PY" -m torch.distributed.run --nnodes "$1" --nproc-per-node "$2" --rdzv-backend c10d \
    --rdzv-endpoint "127.0.0.1:$3" --rdzv-id "$4" \
    -m torchtitan.train --job.config_file files/train/llama3_8b.toml \
    --training.steps "$5" --training.local_batch_size 2 --training.seq_len 8192 "${@:6}" \
    --model.hf_assets_path "$assets/tokenizer" --training.dataset c4_test --training.dataset_path "$assets/data" \
    --job.dump_folder /tmp/mlinfra-gpu/outputs --lr_scheduler.warmup_steps 10 --metrics.log_freq 10
}

# TorchTitan's own flags for each variant of the measurements, as a user
# would type them (what the train role's train_compile and train_float8
# render as overrides).
titan_variant_flags() {
  case "$1" in
    bf16-compile) echo --compile.enable ;;
    bf16-eager) echo --compile.no-enable ;;
    float8-compile) echo --compile.enable --model.converters quantize.linear.float8 \
      --quantize.linear.float8.enable_fsdp_float8_all_gather \
      --quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp ;;
    *) return 1 ;;
  esac
}

torchtitan_runs() {
  local variant="${3:?usage: measure.sh torchtitan OUTDIR VARIANT [ARGS_JSON] [RUNS]}"
  local args_json="${4:-$ROOT/docs/measurements/h200x2-torchtitan/launch-args-$variant.json}" runs="${5:-1}"
  local assets=/tmp/mlinfra-gpu/assets port=29641 run kind started launch_args by_hand=()
  [[ -s "$assets/tokenizer/tokenizer.json" ]] ||
    "$PY" "$ROOT/tools/gpu/make_train_assets.py" "$assets" > "$out/assets.json" || return 1
  "$PY" "$ROOT/files/bin/mlinfra" autodetect --output "$out/nccl.env" > /dev/null 2>&1 || return 1
  mapfile -t launch_args < <("$PY" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))))' "$args_json")
  # shellcheck disable=SC2207  # the flags are words without spaces
  by_hand=($(titan_variant_flags "$variant")) || by_hand=()
  # TorchTitan's own launcher script sets this; both starts get it.
  export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  for run in $(seq 1 "$runs"); do
    for kind in launcher torchrun; do
      # Every other run the hand-typed start goes first, so that neither
      # always meets a cold compile cache.
      (( run % 2 == 0 )) && kind=$([[ "$kind" == launcher ]] && echo torchrun || echo launcher)
      [[ "$kind" == torchrun && ${#by_hand[@]} -eq 0 ]] && continue
      started=$(date +%s.%N)
      if [[ "$kind" == launcher ]]; then
        MLINFRA_PLUGINS_DIR="$ROOT/plugins" POD_NAME="gpu-0" "$PY" "$ROOT/files/bin/mlinfra" train start --wait \
          --run-dir "$out/run-$variant-launcher-$run" --run-id "$variant-launcher-$run" --nccl-env "$out/nccl.env" \
          "${launch_args[@]}" > "$out/$variant-launcher-$run.out" 2>&1
      else
        (set -a; . "$out/nccl.env"; set +a
         titan_by_hand 1 2 "$port" "torchrun-$run" 40 "${by_hand[@]}") > "$out/$variant-torchrun-$run.out" 2>&1
      fi
      echo "$variant $kind run $run: exit $?, $(elapsed_since "$started") s" | tee -a "$out/runs.txt"
    done
  done
  PYTHONPATH="$ROOT/plugins" "$PY" "$ROOT/tools/gpu/titan_summary.py" "$out" | tee -a "$out/summary.txt"
}

launch_compare() {
  local all_reduce_perf="${3:?usage: measure.sh launch-compare OUTDIR ALL_REDUCE_PERF}" round
  all_reduce_perf="$(nccl_tests_binary "$all_reduce_perf")" || return 1
  bench_as() {
    local name="$1" round="$2"; shift 2
    POD_NAME=bench-0 MASTER_ADDR=127.0.0.1 timeout 60 "$PY" "$ROOT/files/bin/mlinfra" pod-bench --nnodes 1 \
      --nproc-per-node 2 --mode tcp --timeout 50 --workdir "$out/work-$name-$round" \
      -- --ops all_reduce -b 1M -e 128M --dtype bfloat16 -w 5 -n 20 "$@" > "$out/$name-$round.json" 2>/dev/null
  }
  for round in 1 2 3; do
    timeout 30 "$all_reduce_perf" -b 1M -e 128M -f 2 -g 2 -w 5 -n 20 -d bfloat16 > "$out/nccltests-$round.txt" 2>&1
    timeout 30 "$all_reduce_perf" -b 1M -e 128M -f 2 -g 2 -w 5 -n 20 -d bfloat16 -G 20 \
      > "$out/nccltests_graph-$round.txt" 2>&1
    bench_as graph "$round" --launch graph
    NCCL_GRAPH_REGISTER=0 bench_as graph_noregister "$round" --launch graph
    bench_as eager "$round" --launch eager
    bench_as auto "$round" --launch auto
  done
  PYTHONPATH="$ROOT/plugins:$ROOT/tools/gpu" "$PY" - "$out" <<'PY' | tee "$out/summary.txt"
import json, sys
from bench_summary import bench_rows as bench, nccl_tests_rows as nccl_tests
from module_utils.fabric import collective_bench as cb
from module_utils.common.stats import median
out = sys.argv[1]
kinds = (("nccltests", nccl_tests), ("nccltests_graph", nccl_tests), ("graph", bench), ("graph_noregister", bench),
         ("eager", bench), ("auto", bench))
series = dict((kind, [read("%s/%s-%d.%s" % (out, kind, r, "txt" if read is nccl_tests else "json"))
                      for r in (1, 2, 3)]) for kind, read in kinds)
print("median busbw GB/s of 3 rounds, all_reduce bf16")
print("%8s" % "size" + "".join("%18s" % kind for kind, _ in kinds))
for size in sorted(series["nccltests"][0]):
    print("%8s" % cb.format_size(size) + "".join("%18.1f" % median([rows[size] for rows in series[kind]])
                                                 for kind, _ in kinds))
for r in (1, 2, 3):
    result = json.loads(open("%s/auto-%d.json" % (out, r)).read().strip().splitlines()[-1])
    print("auto round %d timed as a graph: %s" % (r, " ".join(
        cb.format_size(row["size"]) for row in result["document"]["ops"]["all_reduce"]["rows"]
        if row.get("launch") == "graph")))
PY
}

torch_loop() {
  local all_reduce_perf="${3:?usage: measure.sh torch-loop OUTDIR ALL_REDUCE_PERF [ROUNDS]}" rounds="${4:-3}" round gpus
  local sizes=(-b 1M -e 512M)
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  all_reduce_perf="$(nccl_tests_binary "$all_reduce_perf")" || return 1
  bench_way() {
    local name="$1"; shift
    POD_NAME=bench-0 MASTER_ADDR=127.0.0.1 timeout 120 "$PY" "$ROOT/files/bin/mlinfra" pod-bench --nnodes 1 \
      --nproc-per-node "$gpus" --mode tcp --timeout 110 --workdir "$out/work-$name-$round" \
      -- --ops all_reduce "${sizes[@]}" --dtype bfloat16 -w 5 -n 20 "$@" > "$out/$name-$round.json" 2>/dev/null
  }
  loop_way() {
    local name="$1"; shift
    timeout 120 "$PY" -m torch.distributed.run --nnodes 1 --nproc-per-node "$gpus" --rdzv-backend c10d \
      --rdzv-endpoint 127.0.0.1:29660 --rdzv-id "$name-$round" "$ROOT/tools/gpu/torch_loop.py" "${sizes[@]}" "$@" \
      > "$out/$name-$round.jsonl" 2> "$out/$name-$round.stderr"
  }
  for round in $(seq 1 "$rounds"); do
    timeout 60 "$all_reduce_perf" "${sizes[@]}" -f 2 -g "$gpus" -w 5 -n 20 -d bfloat16 > "$out/nccltests-$round.txt" 2>&1
    timeout 60 "$all_reduce_perf" "${sizes[@]}" -f 2 -g "$gpus" -w 5 -n 20 -d bfloat16 -G 20 \
      > "$out/nccltests_graph-$round.txt" 2>&1
    bench_way bench
    bench_way bench_eager --launch eager
    loop_way loop
    # The benchmark's own conditions: the process group bound to its GPU,
    # NCCL's INFO log (as mlinfra pod-bench sets it).
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET loop_way loop_asbench --bind-device
    echo "round $round done" >> "$out/runs.txt"
  done
  PYTHONPATH="$ROOT/plugins:$ROOT/tools/gpu" "$PY" "$ROOT/tools/gpu/loop_summary.py" "$out" "$rounds" \
    | tee "$out/summary.txt"
}

two_nodes() {
  local all_reduce_perf="${3:-}" variant="${4:-two-nodes}" gpus half rank when port=29642
  local assets=/tmp/mlinfra-gpu/assets launch_args steps compile pids=()
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  half=$((gpus / 2))
  (( half >= 1 )) || { echo "two-nodes needs at least 2 GPUs" >&2; return 2; }
  if [[ -n "$all_reduce_perf" ]]; then all_reduce_perf="$(nccl_tests_binary "$all_reduce_perf")" || return 1; fi
  visible() { seq -s, $(($1 * half)) $(($1 * half + half - 1)); }
  [[ -s "$assets/tokenizer/tokenizer.json" ]] ||
    "$PY" "$ROOT/tools/gpu/make_train_assets.py" "$assets" > "$out/assets.json" || return 1
  nccl_tests() {
    [[ -n "$all_reduce_perf" ]] || return 0
    "$all_reduce_perf" -b 1M -e 8G -f 2 -g "$gpus" -w 5 -n 20 -d bfloat16 > "$out/nccltests-$1.txt" 2>&1
    echo "nccl-tests $1: exit $?" | tee -a "$out/runs.txt"
  }
  nccl_tests before
  for mode in sweep pairwise; do
    local bench_args=(--ops all_reduce -b 1M -e 8G --dtype bfloat16 -w 5 -n 20)
    [[ "$mode" == pairwise ]] && bench_args=(--pairwise --dtype bfloat16)
    pids=()
    for rank in 0 1; do
      CUDA_VISIBLE_DEVICES="$(visible "$rank")" POD_NAME="bench-$rank" MASTER_ADDR=127.0.0.1 \
        "$PY" "$ROOT/files/bin/mlinfra" pod-bench --nnodes 2 --nproc-per-node "$half" --mode tcp --timeout 200 \
        --workdir "$out/bench-$mode-node$rank" -- "${bench_args[@]}" > "$out/bench-$mode-node$rank.json" 2>&1 &
      pids+=($!)
    done
    for rank in 0 1; do wait "${pids[$rank]}"; echo "bench $mode node $rank: exit $?" | tee -a "$out/runs.txt"; done
  done
  nccl_tests after
  mapfile -t launch_args < <("$PY" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))))' \
    "$ROOT/docs/measurements/h200x2-torchtitan/launch-args-$variant.json")
  # The hand-typed job takes the rendered run's steps and compile setting.
  steps="$(printf '%s\n' "${launch_args[@]}" | sed -n 's/^--override=training.steps=//p')"
  compile="$(printf '%s\n' "${launch_args[@]}" | sed -n 's/^--override=compile.enable=//p')"
  [[ "$compile" == true ]] && compile=--compile.enable || compile=--compile.no-enable
  export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  for when in launcher torchrun; do
    pids=()
    for rank in 0 1; do
      if [[ "$when" == launcher ]]; then
        CUDA_VISIBLE_DEVICES="$(visible "$rank")" MLINFRA_PLUGINS_DIR="$ROOT/plugins" POD_NAME="gpu-$rank" \
          "$PY" "$ROOT/files/bin/mlinfra" train start --wait --run-dir "$out/train-node$rank" --run-id two-nodes \
          --nccl-env '' "${launch_args[@]}" > "$out/train-node$rank.out" 2>&1 &
      else
        CUDA_VISIBLE_DEVICES="$(visible "$rank")" \
          titan_by_hand 2 "$half" "$port" torchrun-two-nodes "${steps:-30}" "$compile" \
          > "$out/torchrun-node$rank.out" 2>&1 &
      fi
      pids+=($!)
    done
    for rank in 0 1; do wait "${pids[$rank]}"; echo "$when node $rank: exit $?" | tee -a "$out/runs.txt"; done
  done
  PYTHONPATH="$ROOT/plugins:$ROOT/tools/gpu" "$PY" - "$out" <<'PY' | tee -a "$out/summary.txt"
import json, os, sys
from bench_summary import nccl_tests_rows
from module_utils.fabric import collective_bench as cb
from module_utils.report import throughput
out = sys.argv[1]
sweep = {}
for mode in ("sweep", "pairwise"):
    result = json.loads(open("%s/bench-%s-node0.json" % (out, mode)).read().strip().splitlines()[-1])
    document = result.get("document") or {}
    print("bench %s: exit %s, error %s" % (mode, result.get("exit_code"), result.get("error")))
    for op, block in (document.get("ops") or {}).items():
        print("  %s at 8 GiB: busbw %s GB/s" % (op, block["rows"][-1]["busbw_gbps"]))
        if mode == "sweep":
            sweep = dict((row["size"], row["busbw_gbps"]) for row in block["rows"])
    if document.get("pairwise"):
        print("  pairwise: %s; pairs %s" % (json.dumps(document["pairwise"]), json.dumps(document.get("pairs"))[:400]))
reference = {}
for when in ("before", "after"):
    path = "%s/nccltests-%s.txt" % (out, when)
    if os.path.exists(path):
        for size, value in nccl_tests_rows(path).items():
            reference.setdefault(size, []).append(value)
if reference:
    print("%8s %14s %10s %8s" % ("size", "nccl-tests", "bench", "ratio"))
    for size in sorted(set(reference) & set(sweep)):
        ref = throughput.median(reference[size])
        print("%8s %14.2f %10.2f %8.4f" % (cb.format_size(size), ref, sweep[size], sweep[size] / ref))
runs = {}
for kind, name in (("launcher", "train-node0.out"), ("torchrun", "torchrun-node0.out")):
    path = os.path.join(out, name)
    run = throughput.summarize_run(path, throughput.parse_log(path, "torchtitan"), warmup_steps=10)
    runs[kind] = run
    print("%s: tokens/s per GPU %.0f, MFU %.2f%%, steps %s-%s" % (
        kind, run["throughput"] or 0, 100 * (run["mfu"] or 0), run["first_step"], run["last_step"]))
if runs["launcher"]["throughput"] and runs["torchrun"]["throughput"]:
    print("launcher / torchrun tokens/s: %.4f" % (runs["launcher"]["throughput"] / runs["torchrun"]["throughput"]))
PY
}

# The shipped files alone, as the pods' volumes lay them out
# (pod_runtime.volume_items), then the three measurements through them.
program() {
  local shipped="$out/shipped" part
  "$PY" - "$ROOT" "$shipped" <<'PY' || return 1
import os, sys
root, shipped = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "plugins"))
from module_utils.pod_runtime import RUNTIME, lay_out
files = lay_out(root, shipped)
print("shipped %d module_utils files" % len(files[RUNTIME]))
PY
  : > "$out/summary.txt"
  for part in node-report pod-bench train-launcher; do
    local started=$SECONDS rc runs=()
    [[ $part == train-launcher ]] && runs=(1)
    MEASURE_ROOT="$shipped" MLINFRA_PLUGINS_DIR="$shipped/plugins" bash "$ROOT/tools/gpu/measure.sh" "$part" "$out/$part" \
      "${runs[@]}" > "$out/$part.log" 2>&1
    rc=$?
    # The part's own lines on how each program ended (a part goes on
    # after a program fails, so its exit status alone does not say).
    { echo "$part: exit $rc in $((SECONDS - started)) s"
      grep -E "exit status|^exit_code|^transport|^launcher run|^torchrun run|tokens/s" "$out/$part.log" | sed 's/^/  /'
    } | tee -a "$out/summary.txt"
  done
}

case "$what" in
  program) program ;;
  node-report) node_report ;;
  record-node) record_node ;;
  pod-bench) pod_bench ;;
  train-launcher) train_launcher "$@" ;;
  bench-compare) bench_compare "$@" ;;
  torchtitan) torchtitan_runs "$@" ;;
  torch-loop) torch_loop "$@" ;;
  two-nodes) two_nodes "$@" ;;
  launch-compare) launch_compare "$@" ;;
  *) echo "unknown measurement: $what" >&2; exit 2 ;;
esac
