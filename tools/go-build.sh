#!/usr/bin/env bash
# Builds the Go command in the folder given (its own go.mod/go.sum, sources *.go) once, for the
# tools that are only a small main package: the binary goes to $GO_TOOLS_CACHE/<folder name>/<hash of
# go.sum and the *.go files>/<folder name> (default ~/.cache/inference-portal/go-tools, outside the
# clone, so every clone on the machine shares it) and is reused until either changes. The modules
# come from the module proxy at build time, never at run time. Prints the binary's path.
# Exit status 2: no Go toolchain. Usage: tools/go-build.sh tools/fast-backend
set -euo pipefail
here="$(cd "$1" && pwd)"
name="$(basename "$here")"
key="$(cat "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)"
cache="${GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/go-tools}/$name"
out="$cache/$key"
# One build at a time per tool: a second clone (or test process) waits for the first.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [[ ! -x "$out/$name" ]]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
    exit 2
  fi
  mkdir -p "$out.partial"
  start=$(date +%s)
  (cd "$here" && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" go build -ldflags="-s -w" -o "$out.partial/$name" .)
  rm -rf "$out" && mv "$out.partial" "$out"
  echo "built $name in $(( $(date +%s) - start )) s" >&2
fi
echo "$out/$name"
