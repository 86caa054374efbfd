#!/usr/bin/env bash
# KEDA's CustomResourceDefinitions (ScaledObject, ScaledJob, TriggerAuthentication...) from the
# pinned Go module beside this script (github.com/kedacore/keda/v2, see go.mod), taken once from its
# config/crd/bases through the Go module proxy (`go mod download -json` gives the module's folder,
# checked against go.sum) and cached in $KEDA_CACHE (default ~/.cache/inference-portal/keda) by the
# hash of go.sum: the tests install them into the real control plane, so the ScaledObjects the portal
# renders are checked by KEDA's own schema, and nothing is downloaded at run time. One copy at a time
# per cache (tools/build-common.sh). Prints the folder that holds the YAML files. Exit status 2: no
# Go toolchain. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../build-common.sh"
cache="${KEDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/keda}"
out="$cache/$(sha256sum <"$here/go.sum" | cut -c1-16)"
mkdir -p "$cache"
take_build_lock "$cache" "KEDA's CRDs"
if ! compgen -G "$out/*.yaml" >/dev/null; then
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
    exit 2
  fi
  echo "taking KEDA's CRDs into $out" >&2
  module=github.com/kedacore/keda/v2  # its version is go.mod's, its hash go.sum's
  dir="$(cd "$here" && go mod download -json "$module" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  [[ -d "$dir/config/crd/bases" ]] || { echo "no config/crd/bases in $module (folder: '$dir')" >&2; exit 1; }
  rm -rf "$out.partial" && mkdir -p "$out.partial"
  cp "$dir"/config/crd/bases/*.yaml "$out.partial/"
  chmod u+w "$out.partial"/*.yaml  # the module cache's files are read-only
  rm -rf "$out" && mv "$out.partial" "$out"
fi
echo "$out"
