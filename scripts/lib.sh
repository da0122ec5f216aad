# Shared settings and helpers of scripts/setup.sh, scripts/test.sh and
# scripts/lock.sh. Source it; it does nothing on its own.
# shellcheck shell=bash
# The settings below are used by the scripts that source this file:
# shellcheck disable=SC2034

ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
VENV="$ROOT/.venv"
WORK="$ROOT/.work"
# Second, smaller environment with the oldest ansible-core that
# meta/runtime.yml declares (see requirements/core-2.20.in).
VENV_OLDEST="$WORK/venv-core-2.20"
# torch for the in-pod tools, as the training image has it
# (requirements/workload.in); the local cluster's pods run its python3.
VENV_WORKLOAD="$WORK/venv-workload"
COLLECTIONS_DIR="$WORK/collections"
# ansible-test must run from .../ansible_collections/<namespace>/<name>, and it
# resolves the working directory through symbolic links, so sanity runs on a
# copy of the tree (tracked and untracked-but-not-ignored files), one per run
# under here (scripts/sanity.sh).
SANITY_ROOT="$WORK/sanity"
SANITY_COLLECTION="$SANITY_ROOT/ansible_collections/mlinfra/multinode"

# pip version of the environments that scripts/lock.sh resolves in, and of
# ansible-test's sanity environments.
PIP_VERSION="26.3"
# uv, from PyPI, installs the lock files into the environments setup.sh
# creates: from its cache (~/.cache/uv) in seconds where pip took minutes.
UV_VERSION="0.13.9"
UV_ENV="$WORK/uv"
UV="$UV_ENV/bin/uv"

# Collections extracted from the `ansible` wheel pinned in
# requirements/collections.txt. community.library_inventory_filtering_v1 is a
# declared dependency of community.general.
DEPENDENCY_COLLECTIONS=(
  kubernetes.core
  community.okd
  ansible.posix
  community.general
  community.library_inventory_filtering_v1
)
# Collections extracted from the older `ansible` wheel pinned in
# requirements/collections-awx.txt: the current package no longer carries
# awx.awx (the AWX configuration playbook's modules), and Ansible Galaxy is
# not reachable.
AWX_COLLECTIONS=(
  awx.awx
)

# Target Python versions other than the controller's 3.12 on which
# ansible-test's compile and import sanity tests run the modules. Keep in step
# with modules.python_requires in tests/config.yml.
TARGET_PYTHON_VERSIONS=(3.9 3.10 3.11 3.13)
# Directory of python3.X links to those interpreters, put on PATH for ansible-test.
TARGET_PYTHON_DIR="$WORK/pythons"

STAGE_PREFIX="${STAGE_PREFIX:-mlinfra}"

log() { printf '[%s %s] %s\n' "$STAGE_PREFIX" "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$STAGE_PREFIX" "$*" >&2; exit 1; }

pinned_pip_version() { printf '%s\n' "$PIP_VERSION"; }

# Prints the path of a Python 3.12 interpreter, or fails naming the fix.
# Order: $MLINFRA_PYTHON, python3.12 on PATH, pyenv's 3.12.x versions.
find_python312() {
  local candidate version
  local -a candidates=()
  [[ -n "${MLINFRA_PYTHON:-}" ]] && candidates+=("$MLINFRA_PYTHON")
  if command -v python3.12 >/dev/null 2>&1; then candidates+=("$(command -v python3.12)"); fi
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  # pyenv's 3.12.x, newest first.
  while IFS= read -r version; do
    candidates+=("$pyenv_root/versions/$version/bin/python3")
  done < <(for candidate in "$pyenv_root"/versions/3.12.*; do
             version="${candidate##*/}"
             [[ "$version" =~ ^3\.12\.[0-9]+$ ]] && printf '%s\n' "$version"
           done | sort -t. -k3,3nr)
  for candidate in "${candidates[@]}"; do
    if [[ -x "$candidate" ]] && "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  die "no Python 3.12 found (tried: ${candidates[*]:-nothing}). ansible-core 2.20 and later need Python 3.12 on the controller.
Fix: install it, e.g. 'pyenv install 3.12' or 'apt-get install python3.12 python3.12-venv',
or point MLINFRA_PYTHON at a python3.12 binary, then re-run: bash scripts/setup.sh"
}

# Links python3.X for every TARGET_PYTHON_VERSIONS entry into
# TARGET_PYTHON_DIR, from pyenv's versions or from PATH; fails naming the
# missing ones.
ensure_target_pythons() {
  local version candidate found missing=()
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  mkdir -p "$TARGET_PYTHON_DIR"
  for version in "${TARGET_PYTHON_VERSIONS[@]}"; do
    found=""
    for candidate in "$pyenv_root"/versions/"$version".*/bin/python"$version" "$(command -v "python$version" || true)"; do
      if [[ -x "$candidate" ]] && "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
        found="$candidate"
        break
      fi
    done
    if [[ -z "$found" ]]; then
      missing+=("$version")
    else
      ln -sfn "$found" "$TARGET_PYTHON_DIR/python$version"
    fi
  done
  if (( ${#missing[@]} )); then
    die "no interpreter for target Python ${missing[*]}, which tests/config.yml declares for the modules.
Fix: install it (e.g. 'pyenv install ${missing[0]}'), or narrow modules.python_requires in
tests/config.yml together with TARGET_PYTHON_VERSIONS in scripts/lib.sh."
  fi
}

# Prints a stage banner and remembers when the stage started.
stage_begin() {  # <name>
  STAGE_NAME="$1"
  STAGE_STARTED=$SECONDS
  printf '\n==================== %s ====================\n' "$1" >&2
}

# Prints the stage's elapsed time and records it for the summary.
STAGE_SUMMARY=()
stage_end() {  # [status]
  local status="${1:-ok}" elapsed=$(( SECONDS - STAGE_STARTED ))
  STAGE_SUMMARY+=("$(printf '%-34s %-6s %4ds' "$STAGE_NAME" "$status" "$elapsed")")
  printf -- '-------------------- %s: %s in %ss --------------------\n' "$STAGE_NAME" "$status" "$elapsed" >&2
}

print_summary() {
  local line
  printf '\n==================== summary ====================\n' >&2
  for line in "${STAGE_SUMMARY[@]}"; do printf '%s\n' "$line" >&2; done
}
