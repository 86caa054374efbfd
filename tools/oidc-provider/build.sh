#!/usr/bin/env bash
# Builds the tests' OpenID Provider (main.go: zitadel/oidc's example OP with a user directory and
# a groups claim) from the pinned Go modules beside this script, once, by tools/go-build.sh: cached
# in $OIDC_PROVIDER_CACHE (default ~/.cache/inference-portal/oidc-provider) by the hash of go.sum and
# main.go. Prints the folder that holds the binary (oidc-provider). Exit status 2: no Go toolchain.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GO_TOOL_CACHE="${OIDC_PROVIDER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/oidc-provider}"
binary="$("$here/../go-build.sh" "$here")"
dirname "$binary"
