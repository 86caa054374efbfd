#!/usr/bin/env bash
# Builds kube-bench (kubernetes/cmd/kube-bench: drives and times the real API server through client-go for
# the sync benchmark) from the control plane's pinned Go module, once: the binary goes
# to $KUBE_BENCH_CACHE/<hash of go.sum and main.go>/kube-bench (default
# ~/.cache/inference-portal/kube-bench; tools/cached-go-build.sh) and is reused until either
# changes. Needs only modules the control plane's build already fetched. Prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../cached-go-build.sh"
build() { (cd "$here/kubernetes" && go build -ldflags="-s -w" -o "$1/kube-bench" ./cmd/kube-bench); }
out="$(cached_go_build kube-bench KUBE_BENCH_CACHE \
  "$here/kubernetes/go.sum $here/kubernetes/cmd/kube-bench/main.go" kube-bench build)"  # keeps its exit status
echo "$out/kube-bench"
