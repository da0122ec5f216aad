#!/usr/bin/env bash
# Makes the build context of the execution environment (execution-environment.yml)
# offline: the tarballs of the collection and of the dependency collections it
# names, then `ansible-builder create`. Nothing is fetched from Ansible Galaxy:
# the collection is built from this clone, the dependency collections are
# packed from .work/collections (what scripts/setup.sh extracted, at the
# versions the tests run with), and a version that differs from the one the
# definition names is an error.
#   bash scripts/ee.sh [CONTEXT_DIR]      (default .work/ee/context)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STAGE_PREFIX=ee
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
cd "$ROOT"

context="${1:-$WORK/ee/context}"
tarballs="$WORK/ee/collections"
[[ -x "$VENV/bin/ansible-builder" ]] || die "no $VENV/bin/ansible-builder: run bash scripts/setup.sh"
rm -rf "$tarballs"
mkdir -p "$tarballs"

"$VENV/bin/python" - "$ROOT/execution-environment.yml" "$COLLECTIONS_DIR/ansible_collections" "$tarballs" <<'PY'
import hashlib, io, json, os, re, sys, tarfile
import yaml

definition, installed, out = sys.argv[1:]
with open(definition) as handle:
    entries = yaml.safe_load(handle)["dependencies"]["galaxy"]["collections"]
for entry in entries:
    found = re.match(r"^collections/([a-z0-9_]+)-([a-z0-9_]+)-([0-9][^/]*)\.tar\.gz$", entry["name"])
    if entry.get("type") != "file" or not found:
        sys.exit("execution-environment.yml: %r is not collections/<namespace>-<name>-<version>.tar.gz of type file"
                 % entry["name"])
    namespace, name, version = found.groups()
    if (namespace, name) == ("mlinfra", "multinode"):
        continue  # built by ansible-galaxy below
    source = os.path.join(installed, namespace, name)
    try:
        with open(os.path.join(source, "MANIFEST.json")) as handle:
            have = json.load(handle)["collection_info"]["version"]
    except OSError:
        sys.exit("%s.%s is not in %s: run bash scripts/setup.sh" % (namespace, name, installed))
    if have != version:
        sys.exit("execution-environment.yml names %s.%s %s, but the tests run with %s: update its entry"
                 % (namespace, name, version, have))
    # The artifact of what .work/collections holds: the `ansible` package
    # ships each collection without some files of its own artifact
    # (.github/, ...), so FILES.json is written anew for the files there are,
    # and MANIFEST.json's checksum of it with it (ansible-galaxy checks both
    # when it installs the tarball).
    files = [{"name": ".", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1}]
    for root, dirs, names in os.walk(source):
        dirs.sort()
        relative = os.path.relpath(root, source)
        for directory in dirs:
            files.append({"name": os.path.normpath(os.path.join(relative, directory)), "ftype": "dir",
                          "chksum_type": None, "chksum_sha256": None, "format": 1})
        for filename in sorted(names):
            path = os.path.normpath(os.path.join(relative, filename))
            if path in ("MANIFEST.json", "FILES.json"):
                continue
            with open(os.path.join(root, filename), "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            files.append({"name": path, "ftype": "file", "chksum_type": "sha256", "chksum_sha256": digest,
                          "format": 1})
    files_json = json.dumps({"files": files, "format": 1}, indent=4).encode()
    with open(os.path.join(source, "MANIFEST.json")) as handle:
        manifest = json.load(handle)
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_json).hexdigest()
    manifest_json = json.dumps(manifest, indent=4).encode()
    with tarfile.open(os.path.join(out, os.path.basename(entry["name"])), "w:gz") as archive:
        for arcname, data in (("MANIFEST.json", manifest_json), ("FILES.json", files_json)):
            info = tarfile.TarInfo(arcname)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
        for item in files[1:]:
            archive.add(os.path.join(source, item["name"]), arcname=item["name"], recursive=False)
    print("  %s.%s %s" % (namespace, name, version), file=sys.stderr)
PY

version="$(sed -nE 's/^version: *"?([^"]+)"?$/\1/p' galaxy.yml)"
"$VENV/bin/ansible-galaxy" collection build "$ROOT" --output-path "$tarballs" --force >/dev/null
[[ -f "$tarballs/mlinfra-multinode-$version.tar.gz" ]] || die "ansible-galaxy built no mlinfra-multinode-$version.tar.gz"
grep -q "collections/mlinfra-multinode-$version.tar.gz" execution-environment.yml \
  || die "execution-environment.yml does not name mlinfra-multinode-$version.tar.gz (galaxy.yml's version)"
log "collections: $(cd "$tarballs" && echo *.tar.gz)"

rm -rf "$context"
"$VENV/bin/ansible-builder" create --file "$ROOT/execution-environment.yml" --context "$context" \
  --output-filename Containerfile >/dev/null
log "build context: $context (podman build -f $context/Containerfile $context)"
