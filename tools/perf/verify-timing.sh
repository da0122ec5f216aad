#!/usr/bin/env bash
# Times verify-rdma.yml's node checks (-e verify_pod_checks=false) on the
# local cluster for 2, 32 and 256 GPU nodes (SIZES="2 6 32" for others), each RUNS times (default 2, the
# node counts taking turns so that a change of load hits them alike), and
# prints the wall times, the cost per node, and where the time went (the
# slowest tasks of each node count's first run, from the profile_tasks
# callback).
#   bash tools/perf/verify-timing.sh [OUTDIR]        (RUNS=3 bash ... for more runs)
# 2 nodes: the first two of the inventory's cluster_gpu_nodes; 6: all of them
# (three are deliberately unhealthy; -e verify_fail_on=never lets the play
# pass anyway); more: those six and extra fake nodes moc-perf-001.. of
# tools/perf/fleet_nodes.py (the inventory's h100-sriov profile, one in 16 on
# a faulty snapshot; kwok plays every node), created here and deleted at the
# end, also when a run fails or the script is interrupted. Each run writes its reports under OUTDIR; the namespace is
# deleted at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${1:-$ROOT/.work/perf/verify-timing}"
RUNS="${RUNS:-2}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"  # the playbook would take a relative path as relative to playbooks/
KUBECTL=(bash tools/localcluster/cluster.sh kubectl)
FLEET=(.venv/bin/python tools/perf/fleet_nodes.py)
read -ra SIZES <<<"${SIZES:-2 32 256}"
LARGEST=$(printf '%s\n' "${SIZES[@]}" | sort -n | tail -1)
SMALLEST=$(printf '%s\n' "${SIZES[@]}" | sort -n | head -1)
INVENTORY_COUNT=6
EXTRA=$(( LARGEST > INVENTORY_COUNT ? LARGEST - INVENTORY_COUNT : 0 ))
PERF_LABEL=mlinfra.io/perf-node=fleet
NS="perf-verify-$$"

remove_extra_nodes() {
  "${FLEET[@]}" remove >/dev/null
}
# shellcheck disable=SC2329  # run by the EXIT trap
cleanup() {
  "${KUBECTL[@]}" delete namespace "$NS" --ignore-not-found --wait=true --timeout=60s >/dev/null || true
  remove_extra_nodes || echo "could not delete the extra nodes: ${KUBECTL[*]} delete node -l $PERF_LABEL" >&2
}

bash tools/localcluster/cluster.sh up >/dev/null
trap cleanup EXIT
# Interrupted (kill, Ctrl-C): bash runs these once the playbook of the moment
# has ended, so that it does not re-create the namespace after the cleanup.
trap 'exit 130' INT
trap 'exit 143' TERM
remove_extra_nodes  # left by an interrupted run

(( EXTRA )) && "${FLEET[@]}" add "$EXTRA"

mapfile -t INVENTORY_NODES < <(.venv/bin/python -c '
import yaml
print("\n".join(yaml.safe_load(open("inventories/local/group_vars/all/cluster.yml"))["cluster_gpu_nodes"]))')
mapfile -t EXTRA_NODES < <("${KUBECTL[@]}" get node -l "$PERF_LABEL" -o name | sed 's|^node/||' | sort)
ALL_NODES=("${INVENTORY_NODES[@]}" "${EXTRA_NODES[@]}")
if (( ${#ALL_NODES[@]} < LARGEST )); then
  echo "expected $LARGEST GPU nodes, have ${#ALL_NODES[@]}: ${ALL_NODES[*]}" >&2
  exit 1
fi

# Runs a command and writes "user system peak-KiB" of it and the processes
# it waited for to the file given first (getrusage of the children).
RUSAGE=(.venv/bin/python -c '
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    out.write("%.2f %.2f %d\n" % (used.ru_utime, used.ru_stime, used.ru_maxrss))
sys.exit(code)')

# One task's time from a run's TASKS RECAP (0 when it did not run).
task_seconds() {
  sed -n '/^TASKS RECAP/,$p' "$1" | grep -F -- "$2" | grep -o '[0-9.]*s$' | tr -d s | head -1 | grep . || echo 0
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
status=0
declare -A TIMES CHECKS CPUS PEAKS
for run in $(seq 1 "$RUNS"); do
  for n in "${SIZES[@]}"; do
    nodes_json=$(printf '"%s",' "${ALL_NODES[@]:0:$n}")
    log="$OUT/nodes-$n-run-$run.log"
    result=ok
    start=$(date +%s.%N)
    # The controller's own CPU (ansible-playbook and the modules it waits
    # for) and its largest process's peak memory: what grows on a real
    # cluster, where the pods' work is on the nodes, not on this machine.
    ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks "${RUSAGE[@]}" "$log.time" \
      .venv/bin/ansible-playbook playbooks/verify-rdma.yml \
      -i inventories/local -e "cluster_namespace=$NS" -e verify_pod_checks=false -e verify_fail_on=never \
      -e "verify_report_dir=$OUT/reports-$n" -e "{\"cluster_gpu_nodes\": [${nodes_json%,}]}" >"$log" 2>&1 \
      || { result="FAILED, see $log"; status=1; }
    end=$(date +%s.%N)
    seconds=$(echo "$end - $start" | bc)
    checks=$(task_seconds "$log" "Run the node checks in every probe")
    read -r user_s sys_s peak_kb < <(tail -1 "$log.time")
    cpu=$(echo "$user_s + $sys_s" | bc)
    # A node that was not checked would make the time meaningless: every
    # node of the run's report has a verdict.
    checked=$(.venv/bin/python -c 'import json, sys
report = json.load(open(sys.argv[1]))
print(sum(1 for node in report["nodes"] if node["status"] in ("pass", "warn", "fail")))' \
      "$OUT/reports-$n/latest.json" 2>/dev/null || echo 0)
    if (( checked != n )); then
      result="only $checked of $n nodes checked, see $log"
      status=1
    fi
    TIMES[$n]+="$seconds "
    CHECKS[$n]+="$checks "
    CPUS[$n]+="$cpu "
    PEAKS[$n]+="$(( peak_kb / 1024 )) "
    printf 'nodes=%-3s run %s: %5.1f s (node checks task %s s; controller CPU %s s, peak %s MiB; load %s), %s\n' \
      "$n" "$run" "$seconds" "$checks" "$cpu" "$(( peak_kb / 1024 ))" "$(cut -d' ' -f1 /proc/loadavg)" "$result"
  done
done

mean() { tr ' ' '\n' | grep . | awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
echo
echo "| nodes | runs (s) | mean (s) | mean / node (s) | node checks task, mean (s) | controller CPU, mean (s) | controller peak (MiB) |"
echo "|---|---|---|---|---|---|---|"
declare -A MEAN CMEAN UMEAN
for n in "${SIZES[@]}"; do
  read -ra times <<<"${TIMES[$n]}"
  read -ra checks <<<"${CHECKS[$n]}"
  read -ra peaks <<<"${PEAKS[$n]}"
  MEAN[$n]=$(mean <<<"${TIMES[$n]}")
  CMEAN[$n]=$(mean <<<"${CHECKS[$n]}")
  UMEAN[$n]=$(mean <<<"${CPUS[$n]}")
  printf '| %s | %s | %s | %.2f | %s (%s) | %s | %s |\n' "$n" "$(printf '%.1f, ' "${times[@]}" | sed 's/, $//')" \
    "${MEAN[$n]}" "$(echo "${MEAN[$n]} / $n" | bc -l)" "${CMEAN[$n]}" "$(printf '%s, ' "${checks[@]}" | sed 's/, $//')" \
    "${UMEAN[$n]}" "$(printf '%s\n' "${peaks[@]}" | sort -n | tail -1)"
done
printf '%s nodes / %s nodes: %.2fx the wall time (%sx would be one node after the other); each node beyond %s adds %.3f s\n' \
  "$LARGEST" "$SMALLEST" "$(echo "${MEAN[$LARGEST]} / ${MEAN[$SMALLEST]}" | bc -l)" "$(( LARGEST / SMALLEST ))" "$SMALLEST" \
  "$(echo "(${MEAN[$LARGEST]} - ${MEAN[$SMALLEST]}) / ($LARGEST - $SMALLEST)" | bc -l)"
printf 'node checks task alone: %s nodes / %s nodes %.2fx\n' "$LARGEST" "$SMALLEST" \
  "$(echo "${CMEAN[$LARGEST]} / ${CMEAN[$SMALLEST]}" | bc -l)"
printf "controller CPU: %s nodes / %s nodes %.2fx\n" "$LARGEST" "$SMALLEST" \
  "$(echo "${UMEAN[$LARGEST]} / ${UMEAN[$SMALLEST]}" | bc -l)"
for n in "${SIZES[@]}"; do
  echo "slowest tasks, nodes=$n, run 1:"
  sed -n '/^TASKS RECAP/,$p' "$OUT/nodes-$n-run-1.log" | grep -- '---' | head -8 | sed 's/^/    /'
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
