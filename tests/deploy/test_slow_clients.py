"""Slow-header clients cannot starve the portal: with more slowloris connections held open than the
web process has workers, /healthz (the kubelet's liveness probe) still answers, under the deploy's
own server command (bench/http_server.py reads it from platform/deploy/web.yaml)."""

from __future__ import annotations

from bench.http_server import ALTERNATIVES, production_server
from bench.slow_clients import healthz_answers_under_slow_clients

SQLITE = {"DATABASE_URL": "sqlite:///:memory:"}  # /healthz reads no database; keep the test's own DB untouched


def test_healthz_answers_while_slow_header_connections_are_held() -> None:
    with production_server(SQLITE) as server:
        assert healthz_answers_under_slow_clients(server.url, connections=40)


def test_the_same_probe_starves_a_sync_worker_server() -> None:
    """The probe can fail: the same slow clients against gunicorn's sync workers stop /healthz."""
    with production_server(SQLITE, ALTERNATIVES["gunicorn_sync"]) as server:
        assert not healthz_answers_under_slow_clients(server.url, connections=12)
