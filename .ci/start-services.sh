#!/usr/bin/env bash
# Starts PostgreSQL and Redis on loopback when they are not running (no systemd here), and gives
# the `postgres` role the password the tests' DATABASE_URL uses (Debian asks for one over TCP).
# Idempotent.
set -euo pipefail

if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  version="$(ls /usr/lib/postgresql | sort -V | tail -n1)"
  if ! pg_lsclusters -h | awk '{print $1, $2}' | grep -qx "$version main"; then
    pg_createcluster "$version" main >/dev/null
  fi
  # Room for the suite's live servers, workers and watchers beside whatever else holds connections
  # on the machine (other clones' suites, a developer's portal): 100 runs out.
  pg_conftool "$version" main set max_connections 300
  # A server for tests, whose databases each run throws away (as Redis below keeps no file): no
  # flush to disk at each commit. A test's TRUNCATE of every table fell from 0.18 to 0.06 s (and
  # ~640 tests end with one). A test that needs a commit on disk asks for it
  # (tests/support/database.py, commits_on_disk).
  pg_conftool "$version" main set fsync off
  pg_conftool "$version" main set synchronous_commit off
  pg_conftool "$version" main set full_page_writes off
  echo "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
(cd / && su postgres -c "psql -q -c \"ALTER ROLE postgres PASSWORD 'postgres'\"") >/dev/null

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
