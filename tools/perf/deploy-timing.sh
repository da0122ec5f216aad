#!/usr/bin/env bash
# Times deploy.yml on the local cluster from no namespace to Ready pods, and
# its second (no-change) run, for 2 and 6 replicas, and prints where the time
# went (the slowest tasks of each run, from the profile_tasks callback).
#   bash tools/perf/deploy-timing.sh [OUTDIR]
# Six pods need all six GPU nodes: the cordoned one (a port down) is
# uncordoned for the 6-replica runs only and cordoned again afterwards; they
# use tcp mode, where that port does not matter (in rdma mode a pod there
# rightly fails the autodetect agreement check). Each run's namespace is
# deleted afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${1:-$ROOT/.work/perf/deploy-timing}"
mkdir -p "$OUT"
KUBECTL=(bash tools/localcluster/cluster.sh kubectl)
CORDONED=moc-r4pcc04u36-nairr

bash tools/localcluster/cluster.sh up >/dev/null
trap '"${KUBECTL[@]}" cordon "$CORDONED" >/dev/null' EXIT

status=0
for replicas in 2 6; do
  ns="perf-$replicas-$$"
  mode=rdma
  if (( replicas > 5 )); then
    mode=tcp
    "${KUBECTL[@]}" uncordon "$CORDONED" >/dev/null
  fi
  for run in first second; do
    log="$OUT/replicas-$replicas-$run.log"
    start=$(date +%s.%N)
    result=ok
    .venv/bin/ansible-playbook playbooks/deploy.yml -i inventories/local \
      -e "cluster_namespace=$ns" -e "replicas=$replicas" -e "cluster_network_mode=$mode" >"$log" 2>&1 \
      || { result="FAILED, see $log"; status=1; }
    end=$(date +%s.%N)
    printf 'replicas=%s mode=%s %s run: %.1f s, %s, %s\n' "$replicas" "$mode" "$run" "$(echo "$end - $start" | bc)" \
      "$(grep -o 'changed=[0-9]*' "$log" | tail -1)" "$result"
  done
  echo "  slowest tasks of the first run:"
  sed -n '/^TASKS RECAP/,$p' "$OUT/replicas-$replicas-first.log" | grep -- '---' | head -8 | sed 's/^/    /'
  .venv/bin/ansible-playbook playbooks/teardown.yml -i inventories/local -e "cluster_namespace=$ns" \
    -e purge_workspaces=true >/dev/null 2>&1
  "${KUBECTL[@]}" delete namespace "$ns" --wait=true >/dev/null
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
