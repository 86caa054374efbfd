#!/usr/bin/env bash
# Run by tools/go-build.sh (GO_BUILD_FINISH) in a controller's folder with its build's output folder:
# copies the controller's CRDs (config/crd/bases of the pinned module) beside the binary, so
# devstack/flux.py installs the CRDs of exactly the built version without the module cache.
set -euo pipefail
module="$(go list -m -f '{{.Dir}}' "github.com/fluxcd/$(basename "$(pwd)")")"
mkdir -p "$1/crds"
cp "$module"/config/crd/bases/*.yaml "$1/crds/"
chmod u+w "$1"/crds/*.yaml
