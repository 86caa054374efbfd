#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through Playwright (never `playwright install`): install
# the Debian package when the binary is missing. Idempotent; never fails when already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "installing Chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium
