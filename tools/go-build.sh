#!/usr/bin/env bash
# Builds one Go command from the pinned modules of a folder under tools/ (its own go.mod/go.sum), once:
# the binary goes to <cache>/<hash of go.sum and the built package's *.go files>/<binary> and is reused until
# either changes. <cache> is $GO_TOOL_CACHE when the caller sets it, else $GO_TOOLS_CACHE/<folder name>
# (default ~/.cache/inference-portal/go-tools/<folder name>): outside the clone, so every clone on the
# machine shares it. One build at a time per tool: a second clone (or test process) waits for the
# first instead of compiling beside it. The modules come from the module proxy at build time, never
# at run time. GO_BUILD_CACHED_ONLY=1: exit status 3 instead of building a binary not built yet
# (make run starts the OpenID provider only when built). Prints the binary's path; says on stderr what it does (its progress every 30 s, whose
# build it waits for: tools/build-common.sh). Exit status 2: no Go toolchain.
# A tool that needs more than a static pure-Go binary says so in the environment, and that is part of
# the hash: GO_BUILD_TAGS (build tags), GO_BUILD_CGO=1 (cgo on, e.g. Gitea's SQLite driver), and
# GO_BUILD_FINISH (a command run with the output folder before it is published, to put files the
# binary reads beside it: Gitea's templates and locales).
# Usage: tools/go-build.sh <folder> [<package to build, default the folder's main package>]
set -euo pipefail
here="$(cd "$1" && pwd)"
source "$(dirname "$0")/build-common.sh"
package="${2:-.}"
name="$(basename "$here")"
binary="$(basename "$package")"
[[ "$package" == "." ]] && binary="$name"
build_env="${GO_BUILD_TAGS:-}${GO_BUILD_CGO:+ cgo}${GO_BUILD_FINISH:+ $(cat "$GO_BUILD_FINISH")}"
# (a package named by module path, not a folder here, has no *.go files of the clone's: find says nothing)
key="$( (cat "$here/go.sum" $(find "$here/$package" -maxdepth 1 -name '*.go' 2>/dev/null | sort)
         [[ -z "$build_env" ]] || echo "$build_env") | sha256sum | cut -c1-16)"
cache="${GO_TOOL_CACHE:-${GO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/go-tools}/$name}"
out="$cache/$key"
mkdir -p "$cache"
take_build_lock "$cache" "$binary"
if [[ ! -x "$out/$binary" ]]; then
  [[ -n "${GO_BUILD_CACHED_ONLY:-}" ]] && exit 3
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
    exit 2
  fi
  mkdir -p "$out.partial"
  echo "building $binary into $out" >&2
  (export CGO_ENABLED="${GO_BUILD_CGO:-0}" GOFLAGS="-buildvcs=false -trimpath"
   go_build "$binary" "$here" -tags="${GO_BUILD_TAGS:-}" -ldflags="-s -w" -o "$out.partial/$binary" "$package")
  [[ -z "${GO_BUILD_FINISH:-}" ]] || (cd "$here" && bash "$GO_BUILD_FINISH" "$out.partial")
  rm -rf "$out" && mv "$out.partial" "$out"
fi
echo "$out/$binary"
