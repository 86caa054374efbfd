#!/usr/bin/env bash
# Builds Helm from the pinned Go module beside this script (helm.sh/helm/v3, see go.mod), once:
# the binary goes to $HELM_CACHE/<hash of go.sum>/helm (default ~/.cache/inference-portal/helm,
# outside the clone, so every clone on the machine shares it) and is reused until go.sum changes
# (tools/cached-go-build.sh; the first build takes a few minutes on 2 cores).
# Prints the binary's path. Exit status 2: no Go toolchain. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../cached-go-build.sh"
build() { (cd "$here" && go build -ldflags="-s -w" -o "$1/helm" helm.sh/helm/v3/cmd/helm); }
out="$(cached_go_build helm HELM_CACHE "$here/go.sum" helm build)"  # an assignment keeps its exit status
echo "$out/helm"
