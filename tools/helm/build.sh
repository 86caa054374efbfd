#!/usr/bin/env bash
# Builds Helm from the pinned Go module beside this script (helm.sh/helm/v3, see go.mod), once:
# the binary goes to $HELM_CACHE/<hash of go.sum>/helm (default ~/.cache/inference-portal/helm,
# outside the clone, so every clone on the machine shares it) and is reused until go.sum changes.
# Prints the binary's path. Exit status 2: no Go toolchain. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
key="$(sha256sum < "$here/go.sum" | cut -c1-16)"
cache="${HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/helm}"
out="$cache/$key"
# One build at a time on the machine: a second clone waits for the first instead of compiling beside it.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [[ ! -x "$out/helm" ]]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
    exit 2
  fi
  mkdir -p "$out.partial"
  start=$(date +%s)
  echo "building helm into $out (first build: a few minutes on 2 cores)" >&2
  export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath"
  (cd "$here" && go build -ldflags="-s -w" -o "$out.partial/helm" helm.sh/helm/v3/cmd/helm)
  rm -rf "$out" && mv "$out.partial" "$out"
  echo "built in $(( $(date +%s) - start )) s" >&2
fi
echo "$out/helm"
