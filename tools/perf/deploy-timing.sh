#!/usr/bin/env bash
# Times deploy.yml on the local cluster from no namespace to Ready pods, and
# its second (no-change) run, for 2 and 6 replicas, and prints where the time
# went (the slowest tasks of each run, from the profile_tasks callback).
#   bash tools/perf/deploy-timing.sh [OUTDIR]
# Six pods need all six GPU nodes: the cordoned one (a port down) is
# uncordoned for the run and cordoned again afterwards, and the 6-replica
# runs use tcp mode, where that port does not matter. Each run's namespace is
# deleted afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${1:-$ROOT/.work/perf/deploy-timing}"
mkdir -p "$OUT"
KUBECTL=(bash tools/localcluster/cluster.sh kubectl)
CORDONED=moc-r4pcc04u36-nairr

bash tools/localcluster/cluster.sh up >/dev/null
"${KUBECTL[@]}" uncordon "$CORDONED" >/dev/null
trap '"${KUBECTL[@]}" cordon "$CORDONED" >/dev/null' EXIT

for replicas in 2 6; do
  ns="perf-$replicas-$$"
  mode=rdma; [[ $replicas -gt 5 ]] && mode=tcp
  for run in first second; do
    log="$OUT/replicas-$replicas-$run.log"
    start=$(date +%s.%N)
    .venv/bin/ansible-playbook playbooks/deploy.yml -i inventories/local \
      -e "cluster_namespace=$ns" -e "replicas=$replicas" -e "cluster_network_mode=$mode" >"$log" 2>&1
    end=$(date +%s.%N)
    printf 'replicas=%s mode=%s %s run: %.1f s, %s\n' "$replicas" "$mode" "$run" "$(echo "$end - $start" | bc)" \
      "$(grep -o 'changed=[0-9]*' "$log" | tail -1)"
  done
  echo "  slowest tasks of the first run:"
  sed -n '/^TASKS RECAP/,$p' "$OUT/replicas-$replicas-first.log" | grep -- '---' | head -8 | sed 's/^/    /'
  .venv/bin/ansible-playbook playbooks/teardown.yml -i inventories/local -e "cluster_namespace=$ns" \
    -e purge_workspaces=true >/dev/null 2>&1
  "${KUBECTL[@]}" delete namespace "$ns" --wait=true >/dev/null
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
