#!/usr/bin/env bash
# deploy.yml on the local cluster with the test suite's module fork server
# (scripts/module_forkserver.py) off and on, in alternating pairs, each run
# into a namespace of its own (deleted afterwards); prints each run's wall
# time and the CPU time of the whole machine during it (/proc/stat: the
# modules' copies are the server's children, not ansible-playbook's, so the
# machine's figure is the one that compares). Run it on an idle machine.
#   bash tools/perf/forkserver-ab.sh [PAIRS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PAIRS="${1:-3}"
KUBECTL=(bash tools/localcluster/cluster.sh kubectl)
bash tools/localcluster/cluster.sh up >/dev/null
sockets="$(mktemp -d)"
.venv/bin/python -m mlinfra_module_forkserver "$sockets" </dev/null >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$sockets"' EXIT
busy_seconds() {  # CPU seconds the machine has spent busy since boot
  awk '/^cpu /{print ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat
}
for pair in $(seq "$PAIRS"); do
  for mode in off on; do
    ns="mfs-$pair-$mode-$$"
    log="$(mktemp)"
    sockets_for_run=0
    [[ "$mode" == on ]] && sockets_for_run="$sockets"
    before="$(busy_seconds)"
    start="$(date +%s.%N)"
    MLINFRA_MODULE_FORKSERVER="$sockets_for_run" .venv/bin/ansible-playbook playbooks/deploy.yml \
      -i inventories/local -e "cluster_namespace=$ns" -e replicas=2 >"$log" 2>&1 \
      || { echo "deploy failed, see $log"; exit 1; }
    printf 'pair %s fork server %-3s: %6.1f s wall, %6.1f s machine CPU, %s\n' "$pair" "$mode" \
      "$(echo "$(date +%s.%N) - $start" | bc)" "$(echo "$(busy_seconds) - $before" | bc)" \
      "$(grep -o 'changed=[0-9]*' "$log" | tail -1)"
    rm -f "$log"
    "${KUBECTL[@]}" delete namespace "$ns" --wait=true >/dev/null
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
