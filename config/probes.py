"""Liveness (``/healthz``) and readiness (``/readyz``) probes for Kubernetes and compose healthchecks.

They are answered by a middleware placed first, before anything else runs. The kubelet calls the
pod's IP, which is not in ``ALLOWED_HOSTS``, over plain http, which production settings redirect to
https; and a probe every few seconds needs no session, login, lockout check or request metrics.
Every other request goes on unchanged.

- ``/healthz``: the process serves requests. Nothing else is checked, so a database outage makes
  pods unready instead of restarting all of them.
- ``/readyz``: the database answers a query and the Celery broker accepts a connection (when one is
  configured; without it tasks run in-process). 503 otherwise. The reply names each dependency and,
  for a failure, only the exception's type: messages can carry host names or credentials.

Both are anonymous and cheap: one ``SELECT 1`` and one broker connection.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.broker import broker_connection


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return f"unreachable ({type(error).__name__})"
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


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    checks = {"database": _database(), "broker": _broker()}
    ready = all(not state.startswith("unreachable") for state in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", **checks}, status=200 if ready else 503)


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
