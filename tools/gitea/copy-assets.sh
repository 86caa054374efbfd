#!/usr/bin/env bash
# Run by tools/go-build.sh (GO_BUILD_FINISH) in this folder with the Gitea build's output folder: Gitea
# built without its `bindata` tag (that needs its frontend build) reads its locales, licences,
# .gitignore templates and page templates from <STATIC_ROOT_PATH>/options and /templates at run time,
# so they are copied from the pinned module beside the binary; devstack/gitea.py points
# STATIC_ROOT_PATH there. Copied, not linked into the module cache, so `go clean -modcache` cannot
# break a cached build.
set -euo pipefail
module="$(go list -m -f '{{.Dir}}' code.gitea.io/gitea)"
cp -R "$module/options" "$module/templates" "$1/"
chmod -R u+w "$1/options" "$1/templates"
