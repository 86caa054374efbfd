#!/usr/bin/env bash
# Builds kube-bench (kubernetes/cmd/kube-bench: drives and times the real API server through client-go
# for the sync benchmark) from the control plane's pinned Go module, once, by tools/go-build.sh:
# cached in $KUBE_BENCH_CACHE (default ~/.cache/inference-portal/kube-bench) by the hash of go.sum
# and main.go. Needs only modules the control plane's build already fetched. Prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GO_TOOL_CACHE="${KUBE_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/kube-bench}"
exec "$here/../go-build.sh" "$here/kubernetes" ./cmd/kube-bench
