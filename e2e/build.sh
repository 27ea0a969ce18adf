#!/usr/bin/env bash
# Builds the pinned control-plane binaries for the e2e test and benchmark into e2e/.bin/:
#   etcd                      go.etcd.io/etcd/server/v3 (e2e/bin/etcd/go.mod)
#   kube-apiserver            k8s.io/kubernetes v1.37.2 (e2e/bin/k8s/go.mod)
#   kube-scheduler            the in-tree scheduler v1.37.2, the baseline
#   kube-controller-manager   for the resource-claim controller
# Idempotent: go's build cache makes a rerun take seconds. Prints the time of each build.
# Usage: e2e/build.sh [etcd|kube-apiserver|kube-scheduler|kube-controller-manager ...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/.bin"
mkdir -p "$out"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kube-apiserver kube-scheduler kube-controller-manager)
for t in "${targets[@]}"; do
  case "$t" in
    etcd) dir="$here/bin/etcd"; pkg=. ;;
    kube-apiserver|kube-scheduler|kube-controller-manager) dir="$here/bin/k8s"; pkg="./cmd/$t" ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
  echo "== building $t"
  ( cd "$dir" && time go build -ldflags=-s -o "$out/$t" "$pkg" )
  ls -l "$out/$t"
done
