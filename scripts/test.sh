#!/usr/bin/env bash
# The collection's whole test suite. Run `bash scripts/setup.sh` first (it
# installs everything this needs; this script downloads nothing).
#
#   bash scripts/test.sh [stage...]
#
# Stages, in order (default: all):
#   pytest        pytest over tests/ (unit tests, and integration tests marked
#                 `integration` that use local Kubernetes clusters of their own),
#                 ansible-core 2.21, MLINFRA_TEST_WORKERS (2) pytest-xdist workers
#   lint          ansible-lint, production profile, offline, whole repository;
#                 antsibull-changelog lint of changelogs/
#   sanity        ansible-test sanity, ansible-core 2.21 (controller Python 3.12;
#                 modules also compiled and imported on Python 3.9-3.13)
#   molecule      molecule scenarios extensions/molecule/default (this machine)
#                 and deploy (the local cluster)
#   oldest-core   ansible-core 2.20 (oldest in meta/runtime.yml): pytest (the
#                 unit tests that use ansible-core) and the molecule converge
#                 playbook run directly with ansible-playbook
#   oldest-sanity ansible-test sanity with ansible-core 2.20, but pylint
# Every stage runs even when an earlier one failed; the script exits non-zero
# if any failed, after a summary with each stage's time. sanity,
# oldest-sanity, lint, oldest-core and molecule start beside pytest, in turn,
# at a low CPU priority; after pytest what they have not started runs in
# MLINFRA_TEST_LANES (2) lanes at once; the outputs are printed whole, stage
# by stage, when all are done.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STAGE_PREFIX="test"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
cd "$ROOT" || exit 1

ALL_STAGES=(pytest lint sanity molecule oldest-core oldest-sanity)
stages=("$@")
(( ${#stages[@]} )) || stages=("${ALL_STAGES[@]}")

for dir in "$VENV" "$VENV_OLDEST" "$COLLECTIONS_DIR/ansible_collections/mlinfra/multinode"; do
  [[ -e "$dir" ]] || die "$dir is missing; run: bash scripts/setup.sh"
done

export PATH="$VENV/bin:$PATH"
# Tools must not stop to ask, nor colour the CI log.
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1
export PYTHONDONTWRITEBYTECODE=1

# Local clusters of the suite's own, beside any the user has running
# (.work/localcluster, README's first command): pytest's integration tests
# make one per worker (.work/localcluster-test-gwN, tests/integration/conftest.py),
# the molecule stage this one. Each is deleted when its stage ends.
MOLECULE_CLUSTER_DIR="$WORK/localcluster-molecule"

# pytest-xdist workers. Run one at a time, the integration tests kept about
# one of the two cores busy (docs/PERFORMANCE.md); two workers keep both
# busy. A test file stays on one worker (--dist loadfile), with the
# deployment or build context its tests share.
PYTEST_WORKERS="${MLINFRA_TEST_WORKERS:-2}"

stage_pytest() {
  # --no-loadscope-reorder: the files in the order tests/suite_order.py
  # gives them, longest first (pytest-xdist would start with the files of
  # the most tests).
  "$VENV/bin/python" -m pytest -n "$PYTEST_WORKERS" --dist loadfile --no-loadscope-reorder --durations=25 tests
}

stage_lint() {
  local status=0
  # Its syntax check runs each playbook without an inventory, where
  # ansible.cfg's host_pattern_mismatch=error (a misspelt -i fails) would
  # stop it at the first play's hosts.
  ANSIBLE_HOST_PATTERN_MISMATCH=warning "$VENV/bin/ansible-lint" --nocolor --offline || status=1
  # The changelog fragments (changelogs/fragments/) and the released versions
  # (changelogs/changelog.yaml) that `antsibull-changelog release` turns into
  # CHANGELOG.md: a malformed one would only show at release time.
  "$VENV/bin/antsibull-changelog" lint || status=1
  "$VENV/bin/antsibull-changelog" lint-changelog-yaml changelogs/changelog.yaml || status=1
  return "$status"
}

stage_sanity() {
  bash "$ROOT/scripts/sanity.sh"
}

stage_molecule() {
  # molecule runs from the collection root; it finds the scenarios under
  # extensions/molecule/ because galaxy.yml is there. default: a node module
  # on this machine; deploy: the autodetect and statefulset roles on the
  # local cluster.
  local status=0 scenario
  export MLINFRA_LOCALCLUSTER_DIR="$MOLECULE_CLUSTER_DIR"
  # One that an interrupted run left behind would be taken as the user's
  # and kept; start from none.
  bash "$ROOT/tools/localcluster/cluster.sh" down >/dev/null 2>&1 || true
  for scenario in default deploy; do
    # The scenarios have no create/destroy, so molecule's state file (under
    # ~/.ansible/tmp) would still say "prepared" after an earlier run that
    # failed, and prepare (which starts the local cluster) would be skipped.
    "$VENV/bin/molecule" reset --scenario-name "$scenario" || status=1
    "$VENV/bin/molecule" test --scenario-name "$scenario" || status=1
  done
  bash "$ROOT/tools/localcluster/cluster.sh" down >/dev/null 2>&1 || true
  unset MLINFRA_LOCALCLUSTER_DIR
  return "$status"
}
oldest_core_version() {
  "$VENV_OLDEST/bin/python" -c 'import ansible.release; print(ansible.release.__version__)'
}

stage_oldest_core() {
  local status=0 version
  version="$(oldest_core_version)"
  # Tests of the collection's own Python only (marked core_independent by
  # tests/unit/conftest.py) ran in the pytest stage and would run the same
  # here; the ones that use ansible-core run again under this version.
  log "ansible-core $version: pytest (not integration, not core_independent)"
  "$VENV_OLDEST/bin/python" -m pytest -n "$PYTEST_WORKERS" --dist loadfile tests -m 'not integration and not core_independent' || status=1
  log "ansible-core $version: smoke playbook extensions/molecule/default/converge.yml on localhost"
  ANSIBLE_COLLECTIONS_PATH="$COLLECTIONS_DIR" \
    "$VENV_OLDEST/bin/ansible-playbook" -i localhost, -c local \
    -e ansible_python_interpreter="$VENV_OLDEST/bin/python" \
    extensions/molecule/default/converge.yml || status=1
  return "$status"
}

stage_oldest_sanity() {
  log "ansible-core $(oldest_core_version): ansible-test sanity (pylint left to the sanity stage)"
  # pylint judges the code, not what this ansible-core accepts of it (the
  # documentation, metadata, imports and compilation on each Python); it
  # runs once, in the sanity stage. Here it took 56 of 143 s.
  bash "$ROOT/scripts/sanity.sh" --oldest --skip-test pylint
}

for stage in "${stages[@]}"; do
  case "$stage" in
    pytest|lint|sanity|molecule|oldest-core|oldest-sanity) ;;
    *) die "unknown stage '$stage' (stages: ${ALL_STAGES[*]})" ;;
  esac
done

run_stage() {  # <stage>: runs it with its banner and time; counts it
  stage_begin "$1"
  if "stage_${1//-/_}"; then
    stage_end ok
    passed=$(( passed + 1 ))
  else
    stage_end FAILED
    failed=$(( failed + 1 ))
  fi
}

# pytest keeps both cores busy with its two workers; each of the other
# stages is mostly one process, so one after another they left a core idle
# for most of six minutes. After pytest they run in MLINFRA_TEST_LANES (2)
# lanes at once, each lane taking the next stage no lane has taken, in the
# order of LONGEST_FIRST (their seconds in a run in turn, then in lanes,
# where molecule slows most; docs/PERFORMANCE.md).
# The stages that keep no tight time (BESIDE_PYTEST) start in one more lane
# with pytest, each at a low CPU priority (BESIDE_NICE): they take the CPU
# pytest's workers leave idle and give way to them otherwise. (At the normal
# priority beside pytest they slowed the integration tests into their
# timeouts.) sanity, oldest-sanity, lint and oldest-core, which need no
# cluster, run at nice 19 and were done about ten minutes into pytest, which
# left that lane idle for the rest; molecule, which runs a local cluster of
# its own, follows them at nice 10, not 19: its control plane's leader
# elections renew every few seconds and must not wait on a busy machine.
# Run after pytest, molecule took its 80 s after the suite's longest stage.
# When pytest ends, that lane goes on with its stage while the others take
# the rest.
# Each stage's output goes to .work/test-logs/<stage>.log, a line says when
# it ended, and the outputs are printed whole, in the order the stages were
# asked for, when all are done. MLINFRA_TEST_LANES=1 runs them in turn.
LANES="${MLINFRA_TEST_LANES:-2}"
[[ "$LANES" =~ ^[1-9][0-9]*$ ]] || die "MLINFRA_TEST_LANES must be a whole number of 1 or more, not '$LANES'"
LONGEST_FIRST=(oldest-core molecule sanity oldest-sanity lint)  # 121, 141, 83, 81, 46 s in lanes (bd5fe81)
BESIDE_PYTEST=(sanity oldest-sanity lint oldest-core molecule)
declare -A BESIDE_NICE=([sanity]=19 [oldest-sanity]=19 [lint]=19 [oldest-core]=19 [molecule]=10)
LANE_LOGS="$WORK/test-logs"

run_lane() {  # <beside pytest: 1 or 0> <stage...>: runs, in turn, each one that no other lane took
  local beside="$1" stage started status niceness
  shift
  for stage in "$@"; do
    mkdir "$LANE_LOGS/$stage.taken" 2>/dev/null || continue
    started=$SECONDS
    niceness=0
    (( beside )) && niceness="${BESIDE_NICE[$stage]}"
    if ( (( niceness == 0 )) || renice -n "$niceness" -p "$BASHPID" >/dev/null
         "stage_${stage//-/_}" ) > "$LANE_LOGS/$stage.log" 2>&1; then status=ok; else status=FAILED; fi
    printf '%s %d\n' "$status" "$(( SECONDS - started ))" > "$LANE_LOGS/$stage.status"
    log "$stage: $status in $(( SECONDS - started ))s (its output follows when every stage is done)"
  done
}

in_lanes=()
in_turn=()
for stage in "${stages[@]}"; do
  if [[ "$stage" == pytest ]]; then in_turn+=("$stage"); else in_lanes+=("$stage"); fi
done
if (( LANES < 2 || ${#in_lanes[@]} < 2 )); then
  in_turn=("${stages[@]}")
  in_lanes=()
fi

failed=0
passed=0
lane_pids=()
if (( ${#in_lanes[@]} )); then
  rm -rf "$LANE_LOGS"
  mkdir -p "$LANE_LOGS"
  beside=()
  for stage in "${BESIDE_PYTEST[@]}"; do
    [[ " ${in_lanes[*]} " == *" $stage "* && " ${in_turn[*]} " == *" pytest "* ]] && beside+=("$stage")
  done
  if (( ${#beside[@]} )); then
    log "beside pytest, in turn: $(for stage in "${beside[@]}"; do printf '%s (nice %s) ' "$stage" "${BESIDE_NICE[$stage]}"; done)"
    run_lane 1 "${beside[@]}" &
    lane_pids+=("$!")
  fi
fi
for stage in "${in_turn[@]}"; do
  run_stage "$stage"
done

if (( ${#in_lanes[@]} )); then
  lane_order=()
  for stage in "${LONGEST_FIRST[@]}"; do
    [[ " ${in_lanes[*]} " == *" $stage "* && ! -e "$LANE_LOGS/$stage.taken" ]] && lane_order+=("$stage")
  done
  log "in $LANES lanes, longest first: ${lane_order[*]}"
  for _ in $(seq "$LANES"); do
    run_lane 0 "${lane_order[@]}" &
    lane_pids+=("$!")
  done
  wait "${lane_pids[@]}"
  for stage in "${in_lanes[@]}"; do
    stage_begin "$stage"
    cat "$LANE_LOGS/$stage.log" >&2
    status=FAILED elapsed=0
    [[ -f "$LANE_LOGS/$stage.status" ]] && read -r status elapsed < "$LANE_LOGS/$stage.status"
    STAGE_STARTED=$(( SECONDS - elapsed ))
    stage_end "$status"
    if [[ "$status" == ok ]]; then passed=$(( passed + 1 )); else failed=$(( failed + 1 )); fi
  done
fi

print_summary
printf 'stages: %d passed, %d failed\n' "$passed" "$failed"
(( failed == 0 ))
