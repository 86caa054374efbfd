#!/usr/bin/env bash
# Builds Helm from the pinned Go module beside this script (helm.sh/helm/v3, see go.mod), once, by
# tools/go-build.sh: cached in $HELM_CACHE (default ~/.cache/inference-portal/helm) by the hash of
# go.sum; the first build takes a few minutes on 2 cores. Prints the binary's path. Exit status 2:
# no Go toolchain. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GO_TOOL_CACHE="${HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/helm}"
exec "$here/../go-build.sh" "$here" helm.sh/helm/v3/cmd/helm
