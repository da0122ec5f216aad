#!/usr/bin/env bash
# Prepares a fresh clone for running playbooks and tests. Idempotent: every step
# keeps a stamp of its inputs and is skipped when they have not changed, so a
# second run takes seconds. Needs PyPI and the Go module proxy from the network.
#
#   .work/uv/                  uv (UV_VERSION in scripts/lib.sh), which installs the environments below,
#                              and the pip that downloads the ansible wheels
#   .venv/                     Python 3.12 + requirements/lock.txt (runtime and test tools), with
#                              scripts/zipimport_cache.py (bytecode for the Ansible modules' zips,
#                              kept in ~/.cache/mlinfra-multinode/zipimport/) and
#                              scripts/module_forkserver.py (the tests' module processes)
#   .work/venv-core-2.20/      Python 3.12 + requirements/lock-core-2.20.txt (oldest declared ansible-core)
#   .work/venv-workload/       Python 3.12 + requirements/lock-workload.txt (torch, as in the training
#                              image; the local cluster's pods run its python3)
#   .work/torchtitan-config/   requirements/torchtitan-config.txt without dependencies: TorchTitan's
#                              config parser for the workload python (tests only)
#   .work/cache/               the pinned `ansible` wheels (requirements/collections.txt, and
#                              requirements/collections-awx.txt for awx.awx)
#   .work/collections/ansible_collections/
#       <ns>/<name>/           dependency collections extracted from that wheel
#       mlinfra/multinode  ->  this repository (symbolic link)
#   ~/.ansible/test/cache/get_pip_*.py
#                              offline pip bootstrap for ansible-test's sanity
#                              environments (scripts/ansible_test_get_pip.py)
#   ~/.ansible/test/venv/      ansible-test's sanity environments, created here
#                              ahead of time (--prime-venvs) so tests need no downloads
#   ~/.cache/mlinfra-multinode/bin/
#                              the local cluster's binaries and the operators it starts on demand
#                              (tools/localcluster/build.sh --operators all, from the
#                              Go module proxy), built beside the steps above: minutes on a cold
#                              Go cache, which would otherwise be waited for by the first
#                              `make cluster-up` or integration test
#
# Environment: MLINFRA_PYTHON=/path/to/python3.12 to choose the interpreter;
# MLINFRA_SKIP_PRIME=1 to leave the sanity environments to the first test run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STAGE_PREFIX=setup
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
cd "$ROOT"

started=$SECONDS
mkdir -p "$WORK/cache"

sha_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# Installs uv into an environment of its own (pip, from the interpreter's
# ensurepip, fetches it once; the environments uv makes have no pip, so this
# pip also downloads the ansible wheels below).
ensure_uv() {
  if [[ -x "$UV" && "$("$UV" --version 2>/dev/null)" == "uv $UV_VERSION "* ]]; then
    return 0
  fi
  log "uv: installing uv $UV_VERSION into $UV_ENV"
  rm -rf "$UV_ENV"
  "$PYTHON" -m venv "$UV_ENV"
  "$UV_ENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
}

# Creates (or refreshes) a virtual environment from a lock file: exactly the
# pinned packages, nothing else (uv pip sync removes what the lock left out).
ensure_venv() {  # <dir> <lock file> <label>
  local dir="$1" lockfile="$2" label="$3" stamp want
  stamp="$dir/.mlinfra-setup-stamp"
  want="python=$PYTHON $("$PYTHON" -c 'import platform; print(platform.python_version())') uv=$UV_VERSION bytecode lock=$(sha_of "$lockfile")"
  if [[ -x "$dir/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "$label: up to date ($dir)"
    return 0
  fi
  if [[ ! -x "$dir/bin/python" ]] || ! "$dir/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
    log "$label: creating virtual environment $dir"
    rm -rf "$dir"
    "$UV" venv --quiet --python "$PYTHON" "$dir"
  fi
  log "$label: installing ${lockfile#"$ROOT"/} ($(grep -c '^[A-Za-z0-9]' "$lockfile") pinned packages; the first run downloads them from PyPI)"
  # --compile-bytecode: uv leaves the .pyc files to the first import, which
  # never writes them under scripts/test.sh (PYTHONDONTWRITEBYTECODE=1):
  # every ansible process and module would compile its imports again.
  "$UV" pip sync --quiet --compile-bytecode --require-hashes --python "$dir/bin/python" "$lockfile"
  "$UV" pip check --quiet --python "$dir/bin/python" >/dev/null || die "$label: uv pip check found broken requirements"
  printf '%s\n' "$want" > "$stamp"
  log "$label: ready"
}

# Installs a start-up helper into an environment's site-packages, with the
# .pth file that imports it when its Python starts (each file says why;
# docs/PERFORMANCE.md what it saved):
#   scripts/zipimport_cache.py    the Ansible modules it runs (zips) compile
#                                 each module_utils once per content, not
#                                 twice per run
#   scripts/module_forkserver.py  the test suite's module processes are
#                                 forked from a server that imported the
#                                 installed packages once
ensure_startup_helper() {  # <dir> <label> <script> <what>
  local dir="$1" label="$2" script="$3" what="$4" site name
  name="mlinfra_$(basename "$script" .py)"
  site="$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  if cmp -s "$ROOT/scripts/$script" "$site/$name.py" \
     && [[ "$(cat "$site/$name.pth" 2>/dev/null)" == "import $name" ]]; then
    return 0
  fi
  cp "$ROOT/scripts/$script" "$site/$name.py"
  printf 'import %s\n' "$name" > "$site/$name.pth"
  log "$label: $what installed"
}

ensure_startup_helpers() {  # <dir> <label>
  ensure_startup_helper "$1" "$2" zipimport_cache.py "bytecode cache for the modules' zips"
  ensure_startup_helper "$1" "$2" module_forkserver.py "module fork server for the tests"
}

# Installs a requirements file without dependencies into a directory that the
# workload python imports from (PYTHONPATH), beside its own packages.
ensure_target() {  # <dir> <requirements file> <label>
  local dir="$1" requirements="$2" label="$3" stamp want
  stamp="$dir/.mlinfra-setup-stamp"
  want="workload=$(cat "$VENV_WORKLOAD/.mlinfra-setup-stamp") requirements=$(sha_of "$requirements")"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "$label: up to date ($dir)"
    return 0
  fi
  rm -rf "$dir"
  log "$label: installing ${requirements#"$ROOT"/} without dependencies"
  "$UV" pip install --quiet --compile-bytecode --python "$VENV_WORKLOAD/bin/python" --no-deps --target "$dir" \
    -r "$requirements"
  printf '%s\n' "$want" > "$stamp"
  log "$label: ready"
}

# Downloads an `ansible` wheel pinned in a requirements file and extracts the
# named collections from it into .work/collections.
extract_collections() {  # <requirements file> <collection...>
  local requirements="$1" spec version wheel stamp want
  shift
  spec="$(grep -E '^ansible==' "$requirements" | head -n1)"
  version="$(sed -E 's/^ansible==([^ ]+).*/\1/' <<<"$spec")"
  wheel="$WORK/cache/ansible-$version-py3-none-any.whl"
  if [[ ! -f "$wheel" ]]; then
    log "collections: downloading the ansible $version wheel (about 50 MB) into .work/cache/"
    "$UV_ENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --require-hashes -r "$requirements" -d "$WORK/cache"
  fi
  stamp="$COLLECTIONS_DIR/.mlinfra-setup-stamp-ansible-$version"
  want="ansible=$version collections=$*"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "collections: up to date ($* from ansible $version)"
    return 0
  fi
  log "collections: extracting $* from ansible $version"
  "$VENV/bin/python" - "$wheel" "$COLLECTIONS_DIR/ansible_collections" "$@" <<'EOF'
import json, os, shutil, sys, tempfile, zipfile

wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as archive:
    members = archive.namelist()
    for name in names:
        namespace, collection = name.split('.')
        prefix = f'ansible_collections/{namespace}/{collection}/'
        wanted = [m for m in members if m.startswith(prefix) and not m.endswith('/')]
        if not wanted:
            sys.exit(f'collection {name} is not in {os.path.basename(wheel)}')
        tmp = tempfile.mkdtemp(prefix=f'.{name}.', dir=dest)
        for member in wanted:
            target = os.path.join(tmp, member[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.open(member) as src, open(target, 'wb') as out:
                shutil.copyfileobj(src, out)
        final = os.path.join(dest, namespace, collection)
        shutil.rmtree(final, ignore_errors=True)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.rename(tmp, final)
        with open(os.path.join(final, 'MANIFEST.json')) as manifest:
            info = json.load(manifest)['collection_info']
        print(f'  {name} {info["version"]} ({len(wanted)} files)', file=sys.stderr)
EOF
  printf '%s\n' "$want" > "$stamp"
}

# The dependency collections, and mlinfra.multinode linked to this clone.
ensure_collections() {
  extract_collections requirements/collections.txt "${DEPENDENCY_COLLECTIONS[@]}"
  extract_collections requirements/collections-awx.txt "${AWX_COLLECTIONS[@]}"
  # mlinfra.multinode resolves to this clone itself.
  local link="$COLLECTIONS_DIR/ansible_collections/mlinfra/multinode"
  mkdir -p "$(dirname "$link")"
  if [[ "$(readlink "$link" 2>/dev/null)" != "../../../.." ]]; then
    rm -rf "$link"
    ln -s ../../../.. "$link"
    log "collections: linked mlinfra.multinode -> $ROOT"
  fi
}

# Installs the offline pip bootstrap for ansible-test into the cache path it
# reads first, once per pip version that an installed ansible-test asks for.
ensure_get_pip_standin() {
  local python version cache
  for python in "$VENV/bin/python" "$VENV_OLDEST/bin/python"; do
    version="$("$python" - <<'EOF'
import re
from pathlib import Path
import ansible_test
source = Path(ansible_test.__file__).parent.joinpath('_internal', 'python_requirements.py').read_text()
print(re.search(r"default_packages = dict\(\s*pip='([^']+)'", source).group(1))
EOF
)"
    cache="$HOME/.ansible/test/cache/get_pip_${version//./_}.py"
    mkdir -p "$(dirname "$cache")"
    if [[ -f "$cache" ]] && ! grep -q 'MLINFRA-MULTINODE GET-PIP STAND-IN' "$cache"; then
      log "ansible-test: keeping the existing pip $version bootstrap script $cache"
    elif ! cmp -s "$ROOT/scripts/ansible_test_get_pip.py" "$cache"; then
      cp "$ROOT/scripts/ansible_test_get_pip.py" "$cache"
      log "ansible-test: installed the offline pip $version bootstrap as $cache"
    fi
  done
}

build_log="$WORK/build.log"
bash "$ROOT/tools/localcluster/build.sh" --operators all >"$build_log" 2>&1 &
build_pid=$!
# A setup that fails stops the build too.
trap 'pkill -P "$build_pid" 2>/dev/null || true; kill "$build_pid" 2>/dev/null || true' EXIT

PYTHON="$(find_python312)"
log "using $PYTHON ($("$PYTHON" -c 'import platform; print(platform.python_version())'))"

ensure_uv
ensure_venv "$VENV" "$ROOT/requirements/lock.txt" ".venv"
ensure_venv "$VENV_OLDEST" "$ROOT/requirements/lock-core-2.20.txt" ".work/venv-core-2.20"
ensure_startup_helpers "$VENV" ".venv"
ensure_startup_helpers "$VENV_OLDEST" ".work/venv-core-2.20"
ensure_venv "$VENV_WORKLOAD" "$ROOT/requirements/lock-workload.txt" ".work/venv-workload"
ensure_target "$WORK/torchtitan-config" "$ROOT/requirements/torchtitan-config.txt" ".work/torchtitan-config"
ensure_collections
ensure_get_pip_standin

if [[ "${MLINFRA_SKIP_PRIME:-0}" != 1 ]]; then
  # Creating the sanity test environments downloads their pinned requirements
  # from PyPI; doing it here keeps scripts/test.sh free of downloads.
  log "ansible-test: preparing the sanity test environments (a few minutes the first time, seconds after)"
  bash "$ROOT/scripts/sanity.sh" --prime-venvs
  bash "$ROOT/scripts/sanity.sh" --oldest --prime-venvs
fi

"$VENV/bin/ansible-galaxy" collection list >/dev/null 2>&1 || die "ansible-galaxy cannot list the collections; see ansible.cfg"
if kill -0 "$build_pid" 2>/dev/null; then
  log "local cluster binaries: waiting for tools/localcluster/build.sh (its progress: $build_log)"
fi
if ! wait "$build_pid"; then
  cat "$build_log" >&2
  die "tools/localcluster/build.sh failed (its output above says why); run bash scripts/setup.sh again once that is fixed"
fi
trap - EXIT
tail -n 1 "$build_log" >&2
log "done in $(( SECONDS - started ))s. Next: bash scripts/test.sh"
