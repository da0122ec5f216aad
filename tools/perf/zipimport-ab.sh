#!/usr/bin/env bash
# deploy.yml on the local cluster with the bytecode cache for the modules'
# zips (scripts/zipimport_cache.py) off and on, in alternating pairs, each
# run into a namespace of its own (deleted afterwards); prints each run's
# wall time and the CPU time of ansible-playbook and everything it started.
#   bash tools/perf/zipimport-ab.sh [PAIRS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PAIRS="${1:-3}"
KUBECTL=(bash tools/localcluster/cluster.sh kubectl)
bash tools/localcluster/cluster.sh up >/dev/null
for pair in $(seq "$PAIRS"); do
  for cache in 0 1; do
    ns="ab-$pair-$cache-$$"
    log="$(mktemp)"
    /usr/bin/time -f "%e %U %S" -o "$log.time" env MLINFRA_ZIPIMPORT_CACHE="$cache" \
      .venv/bin/ansible-playbook playbooks/deploy.yml -i inventories/local -e "cluster_namespace=$ns" \
      -e replicas=2 >"$log" 2>&1 || { echo "deploy failed, see $log"; exit 1; }
    read -r wall user sys < "$log.time"
    printf 'pair %s cache=%s: %6.1f s wall, %6.1f s CPU, %s\n' "$pair" "$cache" "$wall" "$(echo "$user + $sys" | bc)" \
      "$(grep -o 'changed=[0-9]*' "$log" | tail -1)"
    rm -f "$log" "$log.time"
    "${KUBECTL[@]}" delete namespace "$ns" --wait=true >/dev/null
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
