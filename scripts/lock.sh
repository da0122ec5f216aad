#!/usr/bin/env bash
# Regenerates the frozen requirement sets from the human-edited top-level files:
#   requirements/test.in      -> requirements/lock.txt           (.venv)
#   requirements/core-2.20.in -> requirements/lock-core-2.20.txt (.work/venv-core-2.20)
#   requirements/workload.in  -> requirements/lock-workload.txt  (.work/venv-workload)
# uv resolves each set for CPython 3.12 on x86_64 Linux and writes every
# transitive dependency pinned exactly, with the sha256 of each of its files
# (scripts/setup.sh installs with --require-hashes) and, under each, why it is
# there ("# via": the .in file or the packages that need it; the .in files say
# why each top-level package is). Versions already in a lock are kept unless
# its .in file asks for others; --upgrade takes the newest the .in files allow.
# Run it after editing a *.in file, then `bash scripts/setup.sh`; name the .in
# files to regenerate only their locks (default: all).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"

[[ -x "$UV" ]] || die "no uv at $UV: run bash scripts/setup.sh first (it installs uv $UV_VERSION)"

upgrade=()
inputs=()
for argument in "$@"; do
  if [[ "$argument" == --upgrade ]]; then upgrade=(--upgrade); else inputs+=("$argument"); fi
done

lock() {  # <input .in> <output lock>
  local input="$1" output="$2"
  log "resolving requirements/$input"
  (cd "$root" && "$UV" pip compile --quiet --generate-hashes "${upgrade[@]}" \
    --python-version 3.12 --python-platform x86_64-unknown-linux-gnu \
    --custom-compile-command "bash scripts/lock.sh $input" \
    --output-file "requirements/$output" "requirements/$input")
  log "wrote requirements/$output ($(grep -c '^[A-Za-z0-9]' "$root/requirements/$output") packages)"
}

declare -A lock_of=([test.in]=lock.txt [core-2.20.in]=lock-core-2.20.txt [workload.in]=lock-workload.txt)
(( ${#inputs[@]} )) || inputs=(test.in core-2.20.in workload.in)
for input in "${inputs[@]}"; do
  [[ -n "${lock_of[$input]:-}" ]] || die "unknown requirements file: $input (one of ${!lock_of[*]})"
  lock "$input" "${lock_of[$input]}"
done
