#!/usr/bin/env bash
# Builds the tests' control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) from the pinned Go modules beside this script, once: binaries go to
# $KUBE_CONTROL_PLANE_CACHE/<hash of both go.sum files>/ (default ~/.cache/inference-portal/
# kube-control-plane, outside the clone, so every clone on the machine shares them) and are
# reused until a go.sum changes. Prints that folder. Idempotent. Says on stderr what it does: a line
# per step and its progress every 30 s, and whose build it waits for (tools/build-common.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../build-common.sh"
key="$(cat "$here/kubernetes/go.sum" "$here/kwok/go.sum" | sha256sum | cut -c1-16)"
cache="${KUBE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/kube-control-plane}"
out="$cache/$key"
# One build at a time on the machine: a second clone's `make test` waits for the first build
# instead of compiling the same binaries beside it (each build takes both cores for minutes).
mkdir -p "$cache"
take_build_lock "$cache" "the control plane"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
missing=0
for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || missing=1; done
if [[ $missing == 1 ]]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
    exit 2
  fi
  mkdir -p "$out.partial"
  start=$(date +%s)
  echo "building the control plane into $out (first build: about 10 minutes on 2 cores; cached after)" >&2
  export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath"
  echo "step 1 of 3: etcd" >&2
  go_build etcd "$here/kubernetes" -ldflags="-s -w" -o "$out.partial/etcd" go.etcd.io/etcd/server/v3
  echo "step 2 of 3: kube-apiserver, kube-controller-manager, kube-scheduler" >&2
  go_build kubernetes "$here/kubernetes" -ldflags="-s -w" -o "$out.partial/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler
  echo "step 3 of 3: kwok" >&2
  go_build kwok "$here/kwok" -ldflags="-s -w" -o "$out.partial/kwok" sigs.k8s.io/kwok/cmd/kwok
  rm -rf "$out" && mv "$out.partial" "$out"
  echo "built the control plane in $(( $(date +%s) - start )) s" >&2
fi
echo "$out"
