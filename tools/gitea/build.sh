#!/usr/bin/env bash
# Builds Gitea from the pinned Go module beside this script (code.gitea.io/gitea v1.26.0, see go.mod;
# v1.27 declares its module path as gitea.dev, which the module proxy does not serve), once, by
# tools/go-build.sh: cached in $GITEA_CACHE (default ~/.cache/inference-portal/gitea) by the hash of
# go.sum, the build tags and copy-assets.sh. Its database is SQLite, in the run's own folder, so a
# test needs no database server: Gitea v1.26's SQLite driver is mattn/go-sqlite3, hence cgo (gcc)
# and the tags `sqlite sqlite_unlock_notify`. Its templates and locales go beside the binary
# (copy-assets.sh). The first build takes about 15 minutes on 2 busy cores. Prints the binary's path.
# Exit status 2: no Go toolchain. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GO_TOOL_CACHE="${GITEA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/gitea}"
export GO_BUILD_TAGS="sqlite sqlite_unlock_notify" GO_BUILD_CGO=1 GO_BUILD_FINISH="$here/copy-assets.sh"
exec "$here/../go-build.sh" "$here" code.gitea.io/gitea
