#!/usr/bin/env bash
# Builds the local cluster's binaries from the Go module proxy: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl (k8s.io/kubernetes), etcd,
# kwok/kwokctl and the SR-IOV Network Operator's manager (its network
# controllers turn the local inventory's SriovNetworks into the
# NetworkAttachmentDefinitions the pods attach to). Every version is pinned by the go.mod/go.sum files beside
# this script. Built binaries are cached per version under
#   ${MLINFRA_CACHE_DIR:-$HOME/.cache/mlinfra-multinode}/bin/<component>-<version>/
# and a component whose cache is complete is not rebuilt. bin/current/ holds
# links to the binaries of the pinned versions.
#
# go/<component>/patches/*.patch, where present, are applied to a copy of that
# component's main module (go/<component>/patches/MODULE names it) before the
# build; the cache directory's name then carries a hash of the patches
# (kwok-v0.7.0-p1a2b3c4d), so changing a patch rebuilds.
#
# --operators NAME,... (or all) also builds those operators (operators.py
# starts them on demand), each pinned by go/<name>/go.mod like the rest:
#   jobset             the JobSet controller and its webhooks (sigs.k8s.io/jobset)
#   trainer            Kubeflow Trainer v2's controller manager and webhooks
#                      (github.com/kubeflow/trainer/v2)
#   training-operator  the Kubeflow Training Operator, patched to serve its webhook
#                      on a given address and certificate
#                      (github.com/kubeflow/training-operator)
#   volcano            Volcano's scheduler, controller manager and webhook manager
#                      (volcano.sh/volcano)
#   kueue              Kueue's controller manager and webhooks (sigs.k8s.io/kueue)
#
# Environment: MLINFRA_CACHE_DIR (see above); MLINFRA_BUILD_JOBS (go build -p,
# default: number of CPUs). Go's own GOCACHE/GOMODCACHE are honoured.
set -euo pipefail

KNOWN_OPERATORS=(jobset trainer training-operator volcano kueue)
operators=()
while (( $# )); do
  case "$1" in
    --operators) IFS=, read -ra operators <<< "${2:-}"; shift 2
                 [[ "${operators[*]}" != all ]] || operators=("${KNOWN_OPERATORS[@]}") ;;
    *) printf 'build.sh: unknown argument %s (usage: build.sh [--operators NAME,...|all])\n' "$1" >&2; exit 2 ;;
  esac
done
for operator in "${operators[@]}"; do
  [[ " ${KNOWN_OPERATORS[*]} " == *" $operator "* ]] || {
    printf 'build.sh: no operator %s (it knows: %s)\n' "$operator" "${KNOWN_OPERATORS[*]}" >&2; exit 2; }
done

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
SRIOV_VERSION="$(required_version sriov-network-operator github.com/k8snetworkplumbingwg/sriov-network-operator)"

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# The file name `go build -o <dir>/` gives a main package: the last element of
# its import path that is not a major version suffix (/v3).
default_binary_name() {  # <import path>
  local p="$1" base="${1##*/}"
  if [[ "$base" =~ ^v[0-9]+$ ]]; then p="${p%/*}"; base="${p##*/}"; fi
  printf '%s\n' "$base"
}

# Copies the module named in go/<moddir>/patches/MODULE out of the module
# cache into <dir>/src, applies the patches and writes <dir>/go.mod (+ go.sum):
# the component's go.mod with a replace directive pointing at the copy. Prints
# the -modfile flag to build with.
prepare_patched_module() {  # <moddir> <dir>
  local moddir="$1" dir="$2" module src p
  module="$(tr -d '[:space:]' < "$here/go/$moddir/patches/MODULE")"
  src="$(cd "$here/go/$moddir" && go list -m -f '{{.Dir}}' "$module")"
  [[ -d "$src" ]] || { log "cannot find $module in the module cache"; exit 1; }
  cp -R "$src" "$dir/src"
  chmod -R u+w "$dir/src"
  for p in "$here/go/$moddir"/patches/*.patch; do
    log "applying ${p#"$here"/} to $module"
    (cd "$dir/src" && GIT_CEILING_DIRECTORIES="$dir" git apply -p1 "$p") >&2
  done
  cp "$here/go/$moddir/go.mod" "$dir/go.mod"
  cp "$here/go/$moddir/go.sum" "$dir/go.sum"
  (cd "$here/go/$moddir" && go mod edit -modfile="$dir/go.mod" -replace "$module=$dir/src")
  printf '%s\n' "-modfile=$dir/go.mod"
}

# The suffix a component's cache directory gets for its patches ("" if none).
patch_suffix() {  # <moddir>
  local patches=("$here/go/$1"/patches/*.patch)
  [[ -e "${patches[0]}" ]] || return 0
  printf -- '-p%s\n' "$(cat "$here/go/$1/patches/MODULE" "${patches[@]}" | sha256sum | cut -c1-8)"
}

# Runs one `go build -v -o <dir>/ <pkg>...` and turns go's list of compiled
# packages into a progress line every 100 packages; anything else go prints
# (errors) is passed through.
go_build_all() {  # <moddir> <ldflags> <out dir> <label> <modfile flag or ""> <pkg>...
  local moddir="$1" ldflags="$2" out="$3" label="$4" modflags=(); shift 4
  [[ -z "$1" ]] || modflags=("$1")
  shift
  local total n=0 line started=$SECONDS
  total="$(cd "$here/go/$moddir" && go list "${modflags[@]}" -deps "$@" | wc -l)"
  log "$label: compiling $# commands in one go build (-p $jobs, $total packages in the import graph; a cold build takes minutes)"
  (cd "$here/go/$moddir" && go build "${modflags[@]}" -v -p "$jobs" -trimpath -ldflags "$ldflags" -o "$out/" "$@" 2>&1) |
    while IFS= read -r line; do
      if [[ "$line" =~ ^[A-Za-z0-9._~/-]+$ ]]; then
        n=$(( n + 1 ))
        if (( n % 100 == 0 )); then
          log "$label: compiled $n packages (of at most $total), $(( SECONDS - started ))s"
        fi
      else
        printf '%s\n' "$line" >&2
      fi
    done
  log "$label: compiled and linked in $(( SECONDS - started ))s"
}

# Builds a component into its cache directory unless it is already there.
# The build goes to a temporary directory that is renamed into place only when
# every binary exists, so an interrupted build never leaves a half cache.
build_component() {  # <name> <version> <go.mod dir> <ldflags> <out:pkg>...
  local name="$1" version="$2" moddir="$3" ldflags="$4"; shift 4
  local dest="$cache/$name-$version"
  if [[ -f "$dest/.complete" ]]; then
    log "$name $version: cached in $dest"
    return 0
  fi
  command -v go >/dev/null || { log "building $name needs the Go toolchain (go 1.24 or newer) on PATH"; exit 1; }
  build_tmp="$(mktemp -d "$cache/.$name-$version.XXXXXX")"
  trap 'rm -rf "$build_tmp"' EXIT
  local tmp="$build_tmp"
  local started=$SECONDS spec out pkg default modfile="" pkgs=()
  for spec in "$@"; do pkgs+=("${spec#*:}"); done
  log "$name $version: downloading modules (if not in the module cache yet)"
  (cd "$here/go/$moddir" && go mod download -x 2>&1 | grep -c '^# get' | xargs -I{} printf '[build] %s module requests\n' {} >&2 || true)
  if [[ -f "$here/go/$moddir/patches/MODULE" ]]; then
    mkdir "$tmp/.patched"
    modfile="$(prepare_patched_module "$moddir" "$tmp/.patched")"
  fi
  go_build_all "$moddir" "$ldflags" "$tmp" "$name $version" "$modfile" "${pkgs[@]}"
  rm -rf "$tmp/.patched"
  for spec in "$@"; do
    out="${spec%%:*}" pkg="${spec#*:}"
    default="$(default_binary_name "$pkg")"
    [[ "$default" == "$out" ]] || mv "$tmp/$default" "$tmp/$out"
    [[ -x "$tmp/$out" ]] || { log "$name $version: $out is missing after the build"; exit 1; }
  done
  printf '%s\n' "$(( SECONDS - started ))" > "$tmp/.build-seconds"
  touch "$tmp/.complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  trap - EXIT
  log "$name $version: done in $(( SECONDS - started ))s -> $dest"
}

mkdir -p "$cache"
# One build at a time: two callers at once (pytest workers, a test beside a
# cluster start) wait here instead of building into the same directory.
exec 9>"$cache/.build.lock"
flock 9

# /version of the API server reports these, as a release build would.
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
  k8s_ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION")"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build_component etcd "$ETCD_VERSION" etcd "-s -w" \
  etcd:go.etcd.io/etcd/server/v3
build_component kwok "$KWOK_VERSION$(patch_suffix kwok)" kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  kwok:sigs.k8s.io/kwok/cmd/kwok kwokctl:sigs.k8s.io/kwok/cmd/kwokctl
build_component kubernetes "$K8S_VERSION" kubernetes "$k8s_ldflags" \
  kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl:k8s.io/kubernetes/cmd/kubectl
build_component sriov-network-operator "$SRIOV_VERSION" sriov-network-operator "-s -w" \
  sriov-network-operator:github.com/k8snetworkplumbingwg/sriov-network-operator

# The operators asked for: <name> <binary> <main package>, each pinned by go/<name>/.
build_operator() {  # <name>
  local version
  case "$1" in
    jobset)
      version="$(required_version jobset sigs.k8s.io/jobset)"
      build_component jobset "$version" jobset "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$version" \
        jobset-controller:sigs.k8s.io/jobset
      ln -sfn "$cache/jobset-$version/jobset-controller" "$cache/current/jobset-controller" ;;
    trainer)
      version="$(required_version trainer github.com/kubeflow/trainer/v2)"
      build_component trainer "$version" trainer "-s -w" \
        trainer-controller-manager:github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
      ln -sfn "$cache/trainer-$version/trainer-controller-manager" "$cache/current/trainer-controller-manager" ;;
    training-operator)
      version="$(required_version training-operator github.com/kubeflow/training-operator)$(patch_suffix training-operator)"
      build_component training-operator "$version" training-operator "-s -w" \
        training-operator:github.com/kubeflow/training-operator/cmd/training-operator.v1
      ln -sfn "$cache/training-operator-$version/training-operator" "$cache/current/training-operator" ;;
    volcano)
      version="$(required_version volcano volcano.sh/volcano)"
      build_component volcano "$version" volcano "-s -w -X volcano.sh/volcano/pkg/version.Version=$version" \
        vc-scheduler:volcano.sh/volcano/cmd/scheduler \
        vc-controller-manager:volcano.sh/volcano/cmd/controller-manager \
        vc-webhook-manager:volcano.sh/volcano/cmd/webhook-manager
      for binary in vc-scheduler vc-controller-manager vc-webhook-manager; do
        ln -sfn "$cache/volcano-$version/$binary" "$cache/current/$binary"
      done ;;
    kueue)
      version="$(required_version kueue sigs.k8s.io/kueue)"
      build_component kueue "$version$(patch_suffix kueue)" kueue "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" \
        kueue-controller-manager:sigs.k8s.io/kueue/cmd/kueue
      ln -sfn "$cache/kueue-$version$(patch_suffix kueue)/kueue-controller-manager" \
        "$cache/current/kueue-controller-manager" ;;
    *) log "no operator $1 (build.sh knows: ${KNOWN_OPERATORS[*]})"; exit 2 ;;
  esac
}

# A stable directory of links, so callers need not know the versions.
mkdir -p "$cache/current"
for f in "$cache/etcd-$ETCD_VERSION/etcd" "$cache/kwok-$KWOK_VERSION$(patch_suffix kwok)"/kwok* "$cache/kubernetes-$K8S_VERSION"/kube* \
         "$cache/sriov-network-operator-$SRIOV_VERSION/sriov-network-operator"; do
  ln -sfn "$f" "$cache/current/$(basename "$f")"
done
log "binaries ready in $cache/current"
for operator in "${operators[@]}"; do
  build_operator "$operator"
done
