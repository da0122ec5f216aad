#!/usr/bin/env bash
# The local Kubernetes cluster: real kube-apiserver, kube-controller-manager,
# kube-scheduler and etcd on 127.0.0.1, kwok as the kubelet of the fake GPU
# nodes of inventories/local. See localcluster.py for what each command does.
#
#   tools/localcluster/cluster.sh up|down|status|kubeconfig|kubectl ARGS...
#
# Needs Python 3 with PyYAML: the project's .venv when it exists (make setup),
# otherwise a python3 on PATH that has it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for py in "$root/.venv/bin/python" python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import yaml' 2>/dev/null; then
    exec "$py" "$root/tools/localcluster/localcluster.py" "$@"
  fi
done
echo "cluster.sh: needs Python 3 with PyYAML: run 'make setup' (creates .venv) or install python3-yaml" >&2
exit 1
