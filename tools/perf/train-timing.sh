#!/usr/bin/env bash
# Times train.yml's demo run on the local cluster in each start mode of
# MODES (default: all six): exec (launcher exec'd into the running
# StatefulSet pods), job (an indexed Job per run), and pytorchjob, volcano,
# jobset, trainjob through their real operators, which the cluster then runs
# (cluster.sh up --operators ...). The modes take turns, RUNS rounds, on one
# shared-workspace deployment: the exec runs with the StatefulSet at 2
# replicas, the others with it at 0 (scale.yml in between is not timed).
# Prints each run's wall time and the training's own seconds (node 0's
# torchrun, from summary.json), then each mode's mean and its ratio to exec.
#   RUNS=3 [MODES="exec job"] bash tools/perf/train-timing.sh [OUTDIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${1:-$ROOT/.work/perf/train-timing}"
RUNS="${RUNS:-3}"
read -ra modes <<< "${MODES:-exec job pytorchjob volcano jobset trainjob}"
mkdir -p "$OUT"
ns="perf-train-$$"
common=(-i inventories/local -e "cluster_namespace=$ns" -e cluster_storage_mode=shared
        -e '{"cluster_gpu_nodes": ["moc-r4pcc04u09-nairr", "moc-r4pcc04u11-nairr"]}')
play() { .venv/bin/ansible-playbook "playbooks/$1.yml" "${common[@]}" "${@:2}"; }

# The operators the modes asked for need.
declare -A operator_of=([pytorchjob]=training-operator [volcano]=volcano [jobset]=jobset [trainjob]="jobset,trainer")
operators=""
for mode in "${modes[@]}"; do
  [[ -z "${operator_of[$mode]:-}" ]] || operators+="${operators:+,}${operator_of[$mode]}"
done
bash tools/localcluster/cluster.sh up ${operators:+--operators "$operators"} >/dev/null
trap 'play teardown -e purge_workspaces=true >/dev/null 2>&1; bash tools/localcluster/cluster.sh kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1' EXIT
play deploy -e replicas=2 >"$OUT/deploy.log" 2>&1

status=0
declare -A total=()
for mode in "${modes[@]}"; do total[$mode]=0; done
for run in $(seq 1 "$RUNS"); do
  for mode in "${modes[@]}"; do
    replicas=$([[ $mode == exec ]] && echo 2 || echo 0)
    if [[ "$replicas" != "${scaled:-}" ]]; then
      play scale -e "replicas=$replicas" >"$OUT/scale-$mode-$run.log" 2>&1
      scaled="$replicas"
    fi
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
for mode in "${modes[@]}"; do
  ratio='-'
  [[ -z "${total[exec]:-}" ]] || ratio="$(printf '%.2f' "$(echo "${total[$mode]} / ${total[exec]}" | bc -l)")"
  printf 'mean: %-10s %.1f s, %s of exec\n' "$mode" "$(echo "${total[$mode]} / $RUNS" | bc -l)" "$ratio"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
