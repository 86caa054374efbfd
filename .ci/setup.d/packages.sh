#!/usr/bin/env bash
# Installs, from Debian's packages, the real parts the tests start when any is missing:
# PostgreSQL and Redis servers (apt-get install postgresql redis-server), Prometheus (and
# promtool), Chromium, nginx (the web process's front, config/web_server.py), gcc and git (Gitea's
# build and run, tools/gitea). One `apt-get update`
# at most. Idempotent: does nothing when all are there.
set -euo pipefail
missing=()
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
{ command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[[ -x /usr/sbin/nginx ]] || command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
# Gitea (tools/gitea/build.sh): its SQLite driver is built with cgo, and it runs git
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
command -v git >/dev/null 2>&1 || missing+=(git)
if (( ${#missing[@]} )); then
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
