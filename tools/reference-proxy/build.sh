#!/usr/bin/env bash
# Builds the gateway benchmark's reference proxy (main.go, fasthttp pinned in go.mod) once, cached by
# the hash of go.sum and main.go (tools/go-build.sh). Prints the binary's path.
exec "$(dirname "$0")/../go-build.sh" "$(dirname "$0")"
