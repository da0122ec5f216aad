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
# Results go to OUTDIR (created). NVLink SHARP / multicast stays off in every
# run: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1.
set -uo pipefail

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
what="${1:?usage: measure.sh node-report|pod-bench OUTDIR}"
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

case "$what" in
  node-report) node_report ;;
  pod-bench) pod_bench ;;
  *) echo "unknown measurement: $what" >&2; exit 2 ;;
esac
