#!/usr/bin/env bash
# Right-sizing tests start a real Prometheus (and promtool to backfill it): install the Debian
# package when either binary is missing. Idempotent; never fails when already installed.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  exit 0
fi
echo "installing Prometheus (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends prometheus
