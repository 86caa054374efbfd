#!/usr/bin/env bash
# Builds the tests' OpenID Provider (main.go: zitadel/oidc's example OP with a user directory and
# a groups claim) from the pinned Go modules beside this script, once: the binary goes to
# $OIDC_PROVIDER_CACHE/<hash of go.sum and main.go>/oidc-provider (default ~/.cache/inference-portal/
# oidc-provider, outside the clone) and is reused until either changes. Prints that folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
key="$(cat "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)"
cache="${OIDC_PROVIDER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/oidc-provider}"
out="$cache/$key"
if [[ ! -x "$out/oidc-provider" ]]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
    exit 2
  fi
  mkdir -p "$out.partial"
  start=$(date +%s)
  (cd "$here" && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" go build -ldflags="-s -w" -o "$out.partial/oidc-provider" .)
  rm -rf "$out" && mv "$out.partial" "$out"
  echo "built the OIDC provider in $(( $(date +%s) - start )) s" >&2
fi
echo "$out"
