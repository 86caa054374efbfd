#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from the pinned Go modules in the folders
# beside this script (one go.mod each: each controller keeps the dependency versions of its own
# release), once, by tools/go-build.sh: cached in $FLUX_CACHE (default
# ~/.cache/inference-portal/flux)/<controller>/ by the hash of its go.sum and copy-crds.sh, which
# puts the controller's CRDs in a crds/ folder beside its binary. The first build takes
# about 10 minutes per controller on 2 busy cores. Prints the two binaries' paths, source-controller
# first, one a line. Exit status 2: no Go toolchain. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${FLUX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/flux}"
for controller in source-controller kustomize-controller; do
  GO_TOOL_CACHE="$cache/$controller" GO_BUILD_FINISH="$here/copy-crds.sh" "$here/../go-build.sh" "$here/$controller" "github.com/fluxcd/$controller"
done
