#!/usr/bin/env bash
# Times train.yml's demo run on the local cluster in the exec start mode
# (launcher exec'd into the running StatefulSet pods) and in the job start
# mode (an indexed Job per run, its pods' launcher run by the local
# cluster), alternating RUNS times each, on one shared-workspace deployment:
# the exec runs with the StatefulSet at 2 replicas, the job runs with it at 0
# (scale.yml in between is not timed). Prints each run's wall time and the
# training's own seconds (node 0's torchrun, from summary.json), then means.
#   RUNS=3 bash tools/perf/train-timing.sh [OUTDIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${1:-$ROOT/.work/perf/train-timing}"
RUNS="${RUNS:-3}"
mkdir -p "$OUT"
ns="perf-train-$$"
common=(-i inventories/local -e "cluster_namespace=$ns" -e cluster_storage_mode=shared
        -e '{"cluster_gpu_nodes": ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]}')
play() { .venv/bin/ansible-playbook "playbooks/$1.yml" "${common[@]}" "${@:2}"; }

bash tools/localcluster/cluster.sh up >/dev/null
trap 'play teardown -e purge_workspaces=true >/dev/null 2>&1; bash tools/localcluster/cluster.sh kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1' EXIT
play deploy -e replicas=2 >"$OUT/deploy.log" 2>&1

status=0
declare -A total=([exec]=0 [job]=0)
for run in $(seq 1 "$RUNS"); do
  for mode in exec job; do
    replicas=$([[ $mode == exec ]] && echo 2 || echo 0)
    play scale -e "replicas=$replicas" >"$OUT/scale-$mode-$run.log" 2>&1
    id="perf-$mode-$run-$$"
    log="$OUT/$mode-$run.log"
    start=$(date +%s.%N)
    result=ok
    play train -e replicas=2 -e "train_start_mode=$mode" -e "train_run_id=$id" -e "train_logs_dir=$OUT/runs" \
      >"$log" 2>&1 || { result="FAILED, see $log"; status=1; }
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    total[$mode]=$(echo "${total[$mode]} + $seconds" | bc)
    trained=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['status'][0].get('seconds'))" \
      "$OUT/runs/$id/summary.json" 2>/dev/null || echo '-')
    printf '%-4s run %s: %.1f s (node 0 torchrun %s s), %s\n' "$mode" "$run" "$seconds" "$trained" "$result"
  done
done
printf 'mean: exec %.1f s, job %.1f s, job/exec %.2f\n' "$(echo "${total[exec]} / $RUNS" | bc -l)" \
  "$(echo "${total[job]} / $RUNS" | bc -l)" "$(echo "${total[job]} / ${total[exec]}" | bc -l)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
