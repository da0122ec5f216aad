#!/usr/bin/env bash
# GPU-host measurements of the collection, each done whole in one call:
#
#   tools/gpu/measure.sh node-report OUTDIR
#       rdma_node_check (as the in-pod command mlinfra-node-check) in rdma and
#       tcp mode, and mlinfra-autodetect, on this host; raw nvidia-smi and
#       sysfs listings beside them for comparison.
#
#   tools/gpu/measure.sh pod-bench OUTDIR
#       mlinfra-pod-bench as verify-rdma runs it in a pod, as the only node of
#       the job with one process per GPU of this host (NCCL, NCCL_DEBUG=INFO):
#       its JSON result, the NCCL log it recorded, and mlinfra-nccl-log's
#       verdicts on that log in rdma and tcp mode.
#
#   tools/gpu/measure.sh train-launcher OUTDIR [RUNS]
#       the train role's launcher (mlinfra-train start --wait, as a Job's pod
#       runs it) against a hand-typed torchrun of the same job, alternating
#       RUNS times (default 3): the collection's tiny model on every GPU of
#       this host as one node over NCCL, 300 steps; each run's log, the
#       tokens/s its metrics lines give (throughput.py) and its wall time.
#
# Results go to OUTDIR (created). NVLink SHARP / multicast stays off in every
# run: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1.
set -uo pipefail

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
what="${1:?usage: measure.sh node-report|pod-bench|train-launcher OUTDIR}"
out="${2:?usage: measure.sh $what OUTDIR}"
mkdir -p "$out"
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
    "$PY" "$ROOT/files/bin/mlinfra-node-check" --mode "$mode" --expect-gpus "$(nvidia-smi -L | grep -c '^GPU')" \
      > "$out/node-check-$mode.txt" 2>&1
    echo "exit status: $?" >> "$out/node-check-$mode.txt"
    "$PY" "$ROOT/files/bin/mlinfra-node-check" --mode "$mode" --fail-on never --format json \
      > "$out/node-check-$mode.json" 2>>"$out/errors.txt"
  done
  "$PY" "$ROOT/files/bin/mlinfra-autodetect" --output "$out/autodetect.env" --json "$out/autodetect.json"
  echo "autodetect exit status: $?"
  cat "$out"/node-check-rdma.txt "$out"/node-check-tcp.txt "$out/autodetect.env"
}

pod_bench() {
  local gpus
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  POD_NAME=bench-0 MASTER_ADDR=127.0.0.1 "$PY" "$ROOT/files/bin/mlinfra-pod-bench" --nnodes 1 \
    --nproc-per-node "$gpus" --mode rdma --timeout 400 --workdir "$out/pod-bench" \
    -- --ops all_reduce,all_gather -b 1M -e 1G > "$out/pod-bench.json" 2> "$out/pod-bench.stderr"
  echo "pod-bench exit status: $?"
  for mode in rdma tcp; do
    "$PY" "$ROOT/files/bin/mlinfra-nccl-log" --mode "$mode" "$out/pod-bench/bench-node0.log" > "$out/nccl-log-$mode.txt" 2>&1
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
  local runs="${3:-3}" gpus steps=300 port=29620 run started
  gpus="$(nvidia-smi -L | grep -c '^GPU')"
  local job=(--steps "$steps" --log-freq 50 --batch-size 32 --seq-len 256 --dim 256 --layers 4 --heads 8)
  for run in $(seq 1 "$runs"); do
    started=$(date +%s.%N)
    MLINFRA_PLUGINS_DIR="$ROOT/plugins" POD_NAME="gpu-0" "$PY" "$ROOT/files/bin/mlinfra-train" start --wait \
      --run-dir "$out/launcher-$run" --run-id "launcher-$run" --nnodes 1 --nproc-per-node "$gpus" \
      --rdzv-host 127.0.0.1 --rdzv-port "$port" --workload demo --nccl-env '' -- "${job[@]}" \
      > "$out/launcher-$run.out" 2>&1
    echo "launcher run $run: exit $?, $(python3 -c "import sys,time; print(round(time.time() - float(sys.argv[1]), 1))" "$started") s" | tee -a "$out/summary.txt"
    started=$(date +%s.%N)
    "$PY" -m torch.distributed.run --nnodes 1 --nproc-per-node "$gpus" --rdzv-backend c10d \
      --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "torchrun-$run" "$ROOT/files/train/tiny_lm.py" "${job[@]}" \
      > "$out/torchrun-$run.out" 2>&1
    echo "torchrun run $run: exit $?, $(python3 -c "import sys,time; print(round(time.time() - float(sys.argv[1]), 1))" "$started") s" | tee -a "$out/summary.txt"
  done
  PYTHONPATH="$ROOT/plugins" "$PY" - "$out" "$runs" <<'PY' | tee -a "$out/summary.txt"
import sys
from module_utils import throughput
out, runs = sys.argv[1], int(sys.argv[2])
means = {}
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
PY
}

case "$what" in
  node-report) node_report ;;
  pod-bench) pod_bench ;;
  train-launcher) train_launcher "$@" ;;
  *) echo "unknown measurement: $what" >&2; exit 2 ;;
esac
