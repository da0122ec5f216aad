#!/usr/bin/env bash
# Downloads the wheels of tools/gpu/host-wheels.txt (TorchTitan and what the
# GPU host's image lacks for it) for CPython 3.12 on x86-64 Linux into
# DIR (default .whl/, which .gitignore keeps out of the repository):
#
#   bash tools/gpu/wheels.sh [DIR]
#
# On the GPU host, before `tools/gpu/measure.sh torchtitan|two-nodes`:
#
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site DIR/*.whl
#   export PYTHONPATH=/tmp/site
#   python3 -c 'import torchtitan.train'     # everything it imports is there
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${1:-$ROOT/.whl}"
# The project's virtual environment may be made without pip: take the
# first Python that has it.
py=
for candidate in "$ROOT/.venv/bin/python" python3 python; do
  if "$candidate" -m pip --version > /dev/null 2>&1; then py="$candidate"; break; fi
done
[[ -n "$py" ]] || { echo "wheels.sh: no Python with pip here: install pip (python3 -m ensurepip)" >&2; exit 1; }
mkdir -p "$dir"
mapfile -t wheels < <(grep -v -e '^#' -e '^$' "$ROOT/tools/gpu/host-wheels.txt")
"$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dir" "${wheels[@]}"
ls -1 "$dir"
