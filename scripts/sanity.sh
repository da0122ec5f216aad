#!/usr/bin/env bash
# Runs `ansible-test sanity` on the collection.
#
#   bash scripts/sanity.sh [--oldest] [ansible-test sanity options...]
#
# ansible-test must run from a directory named .../ansible_collections/<ns>/<name>
# and resolves its working directory through symbolic links, so the link under
# .work/collections/ does not do. The git-tracked files plus untracked files
# that git does not ignore are copied afresh (to an empty git repository) to
# .work/sanity/run.XXXXXX/ansible_collections/mlinfra/multinode, removed
# afterwards; the dependency collections are linked beside it so imports of
# kubernetes.core & co resolve.
#
# --oldest runs the ansible-test of the oldest declared ansible-core
# (.work/venv-core-2.20) instead of the one in .venv.
# Everything else is passed to `ansible-test sanity`, e.g. --test pylint,
# --prime-venvs (create the per-test environments without testing; used by
# scripts/setup.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STAGE_PREFIX=sanity
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

venv="$VENV"
if [[ "${1:-}" == "--oldest" ]]; then
  venv="$VENV_OLDEST"
  shift
fi
[[ -x "$venv/bin/ansible-test" ]] || die "$venv has no ansible-test; run: bash scripts/setup.sh"
[[ -d "$COLLECTIONS_DIR/ansible_collections" ]] || die "no dependency collections; run: bash scripts/setup.sh"

# Fresh copy of the collection.
# A copy of its own per run, so that runs at the same time (two ansible-core
# versions, two people on one checkout) never delete each other's tree.
mkdir -p "$SANITY_ROOT"
SANITY_ROOT="$(mktemp -d "$SANITY_ROOT/run.XXXXXX")"
SANITY_COLLECTION="$SANITY_ROOT/ansible_collections/mlinfra/multinode"
trap 'rm -rf "$SANITY_ROOT"' EXIT
mkdir -p "$SANITY_COLLECTION"
git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
  | "$venv/bin/python" -c '
import os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
count = 0
# Local state never belongs to the collection, whatever .gitignore says.
skip = (".venv/", ".work/", "tests/output/", ".cache/")
# Recorded /sys and /proc trees of GPU nodes (tests/fixtures/nodes/<node>/),
# read by the unit tests. They copy a real node byte for byte: PCI addresses
# with ":" in directory names, symbolic links to directories, fake
# executables such as usr/bin/ofed_info. The sanity tests that look at every
# file (no-illegal-filenames, symlinks, shebang, line-endings, ...) do not
# apply to such data, and ansible-test cannot even parse the report of the
# first two for names containing ":", so an ignore file cannot help either.
# The scripts beside them (tests/fixtures/nodes/*.py) stay in.
def is_snapshot(rel):
    parts = rel.split("/")
    return len(parts) > 4 and parts[:3] == ["tests", "fixtures", "nodes"]
excluded = 0
for rel in sorted(set(sys.stdin.buffer.read().decode().split("\0"))):
    path = os.path.join(src, rel)
    if rel and is_snapshot(rel):
        excluded += 1
        continue
    if not rel or rel.startswith(skip) or not os.path.lexists(path) or os.path.isdir(path) and not os.path.islink(path):
        continue  # deleted from the work tree, or a submodule
    target = os.path.join(dst, rel)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.islink(path):
        os.symlink(os.readlink(path), target)
    else:
        shutil.copy2(path, target)
    count += 1
print(f"[sanity] copied {count} files to {dst} (left out {excluded} files of node snapshots)", file=sys.stderr)
' "$ROOT" "$SANITY_COLLECTION"

# ansible-test lists the collection's files with git when it finds a .git
# directory above the collection, which here would be this repository's, where
# .work/ is ignored. An empty repository in the copy makes it list the copy.
git -C "$SANITY_COLLECTION" init --quiet

# Dependency collections beside it (every namespace but ours).
for ns_dir in "$COLLECTIONS_DIR"/ansible_collections/*/; do
  ns="$(basename "$ns_dir")"
  [[ "$ns" == mlinfra ]] && continue
  ln -sfn "$COLLECTIONS_DIR/ansible_collections/$ns" "$SANITY_ROOT/ansible_collections/$ns"
done

ensure_target_pythons
cd "$SANITY_COLLECTION"
# ansible-test looks up python3.X and shellcheck on PATH: the controller's
# python3.12 from the virtual environment, the target versions of
# tests/config.yml from .work/pythons, shellcheck from .venv.
export PATH="$venv/bin:$TARGET_PYTHON_DIR:$VENV/bin:$PATH"
log "$("$venv/bin/ansible-test" --version) in $SANITY_COLLECTION"
"$venv/bin/ansible-test" sanity "$@"
