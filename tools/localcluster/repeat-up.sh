#!/usr/bin/env bash
# Starts and deletes a local cluster N times (default 50) in a state
# directory of its own, and counts the starts that failed: evidence that a
# start-up race (such as a CRD read before its status is filled in) is gone.
#   bash tools/localcluster/repeat-up.sh 50
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
count=${1:-50}
export MLINFRA_LOCALCLUSTER_DIR=.work/localcluster-repeat
failed=0
bash tools/localcluster/cluster.sh down >/dev/null 2>&1
for i in $(seq 1 "$count"); do
  started=$(date +%s%N)
  if bash tools/localcluster/cluster.sh up > "$MLINFRA_LOCALCLUSTER_DIR.up.log" 2>&1; then
    result=ok
  else
    result=FAILED
    failed=$((failed + 1))
    mkdir -p .work && cp "$MLINFRA_LOCALCLUSTER_DIR.up.log" ".work/localcluster-repeat-failure-$i.log"
  fi
  elapsed=$(( ($(date +%s%N) - started) / 100000000 ))
  printf 'start %d/%d: %s in %d.%d s\n' "$i" "$count" "$result" $((elapsed / 10)) $((elapsed % 10))
  bash tools/localcluster/cluster.sh down >/dev/null 2>&1
done
echo "$failed of $count starts failed"
[ "$failed" -eq 0 ]
