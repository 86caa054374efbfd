"""Liveness (``/healthz``) and readiness (``/readyz``) probes for Kubernetes and compose healthchecks.

Behind the deploy's web server (config/web_server.py) neither waits in the pages' queue: nginx
answers ``/healthz`` itself, and ``/readyz`` goes to a gunicorn worker that serves probes only
(docs/deploy.md "Probes"). Here, in the workers, they are answered by a middleware placed first,
before anything else runs. The kubelet calls the pod's IP, which is not in ``ALLOWED_HOSTS``, over
plain http, which production settings redirect to https; and a probe every few seconds needs no
session, login, lockout check or request metrics. Every other request goes on unchanged.

- ``/healthz``: the process serves requests (nginx's own answer says the same of the web server).
  Nothing else is checked, so a database outage makes pods unready instead of restarting all of
  them.
- ``/readyz``: the database answers a query, its migrations are all applied, the shared cache
  (Redis, when ``CACHE_URL`` or a Redis broker is set) answers a ping and the Celery broker accepts a
  connection (when one is configured; without it tasks run in-process). 503 otherwise, with
  ``missing`` listing what is not there. The reply names each dependency and, for a failure, only
  the exception's type: messages can carry host names or credentials.

Both are anonymous and cheap: one ``SELECT 1``, one ping and one broker connection; the migration
check reads the migration graph until it first finds everything applied (a running release's code
never gains a migration, so that answer is kept for the process's life).
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.broker import BROKER_TIMEOUT_SECONDS, broker_connection


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return f"unreachable ({type(error).__name__})"
    return "ok"


_migrated = False  # once every migration is applied, it stays so for this code (module docstring)


def _migrations() -> str:
    """Whether this code's migrations are all applied: "ok", "N pending" (the schema is older than
    this code: the release's migrate job has not run yet) or "unknown (...)" when the database
    cannot be read."""
    global _migrated
    if _migrated:
        return "ok"
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as error:
        return f"unknown ({type(error).__name__})"
    if pending:
        return f"{len(pending)} pending"
    _migrated = True
    return "ok"


def _cache() -> str:
    """The shared cache: reconcile locks and request throttles hold across processes only through it."""
    if not settings.CACHE_URL:
        return "not configured (per-process memory)"
    client = redis.Redis.from_url(
        settings.CACHE_URL, socket_connect_timeout=BROKER_TIMEOUT_SECONDS, socket_timeout=BROKER_TIMEOUT_SECONDS
    )
    try:
        client.ping()
    except redis.RedisError as error:
        return f"unreachable ({type(error).__name__})"
    finally:
        client.close()
    return "ok"


def _broker() -> str:
    if not settings.CELERY_BROKER_URL:
        return "not configured (tasks run in-process)"
    try:
        with broker_connection():
            pass
    except Exception as error:  # any transport's connection error; only its type is shown
        return f"unreachable ({type(error).__name__})"
    return "ok"


def _ready(state: str) -> bool:
    return state == "ok" or state.startswith("not configured")


def healthz(request: HttpRequest) -> HttpResponse:
    """The same answer nginx gives for ``/healthz`` (config/nginx.conf.in), for clients that reach a
    worker directly (the test client, bench/http_server.py's ALTERNATIVES)."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    database = _database()
    checks = {
        "database": database,
        "migrations": _migrations() if database == "ok" else "unknown (no database)",
        "cache": _cache(),
        "broker": _broker(),
    }
    missing = [name for name, state in checks.items() if not _ready(state)]
    body = {"status": "unavailable" if missing else "ok", **checks}
    if missing:
        body["missing"] = missing
    return JsonResponse(body, status=503 if missing else 200)


PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz}


class ProbeMiddleware:
    """First in ``MIDDLEWARE``: answers GET/HEAD of the probe paths, passes everything else on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is not None and request.method in ("GET", "HEAD"):
            return probe(request)
        return self.get_response(request)
