#!/usr/bin/env bash
# Builds the local cluster's binaries from the Go module proxy: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl (k8s.io/kubernetes), etcd
# and kwok/kwokctl. Every version is pinned by the go.mod/go.sum files beside
# this script. Built binaries are cached per version under
#   ${MLINFRA_CACHE_DIR:-$HOME/.cache/mlinfra-multinode}/bin/<component>-<version>/
# and a component whose cache is complete is not rebuilt.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${MLINFRA_CACHE_DIR:-$HOME/.cache/mlinfra-multinode}/bin"
jobs="${MLINFRA_BUILD_JOBS:-$(nproc)}"
# The GOFLAGS of the environment may carry -mod=vendor or similar; the pinned
# go.sum files are the source of truth here.
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0

# Reads the version of a required module from one of our go.mod files.
required_version() {  # <go.mod dir> <module path>
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$here/go/$1/go.mod"
}

K8S_VERSION="$(required_version kubernetes k8s.io/kubernetes)"
ETCD_VERSION="$(required_version etcd go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(required_version kwok sigs.k8s.io/kwok)"

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Prints the cache directory of a component; builds it first if needed.
# The build goes to a temporary directory that is renamed into place only when
# every binary exists, so an interrupted build never leaves a half cache.
build_component() {  # <name> <version> <go.mod dir> <ldflags> <out:pkg>...
  local name="$1" version="$2" moddir="$3" ldflags="$4"; shift 4
  local dest="$cache/$name-$version"
  if [[ -f "$dest/.complete" ]]; then
    log "$name $version: cached in $dest"
    return 0
  fi
  local tmp; tmp="$(mktemp -d "$cache/.$name-$version.XXXXXX")"
  local started=$SECONDS spec pkgs=()
  for spec in "$@"; do pkgs+=("${spec#*:}"); done
  log "$name $version: downloading modules"
  (cd "$here/go/$moddir" && go mod download -x 2>&1 | grep -c '^# get' | xargs -I{} printf '[build] %s module requests\n' {} >&2 || true)
  log "$name $version: compiling ${pkgs[*]} with -p $jobs (a cold build takes minutes)"
  for spec in "$@"; do
    local out="${spec%%:*}" pkg="${spec#*:}"
    (cd "$here/go/$moddir" && go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$tmp/$out" "$pkg")
    log "$name $version: built $out ($(( SECONDS - started ))s so far)"
  done
  printf '%s\n' "$(( SECONDS - started ))" > "$tmp/.build-seconds"
  touch "$tmp/.complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  log "$name $version: done in $(( SECONDS - started ))s -> $dest"
}

mkdir -p "$cache"

# /version of the API server reports these, as a release build would.
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
  k8s_ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION")"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build_component etcd "$ETCD_VERSION" etcd "-s -w" \
  etcd:go.etcd.io/etcd/server/v3
build_component kwok "$KWOK_VERSION" kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  kwok:sigs.k8s.io/kwok/cmd/kwok kwokctl:sigs.k8s.io/kwok/cmd/kwokctl
build_component kubernetes "$K8S_VERSION" kubernetes "$k8s_ldflags" \
  kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl:k8s.io/kubernetes/cmd/kubectl

# A stable directory of links, so callers need not know the versions.
mkdir -p "$cache/current"
for f in "$cache/etcd-$ETCD_VERSION/etcd" "$cache/kwok-$KWOK_VERSION"/kwok* "$cache/kubernetes-$K8S_VERSION"/kube*; do
  ln -sfn "$f" "$cache/current/$(basename "$f")"
done
log "binaries ready in $cache/current"
