"""``/metrics`` for Prometheus, only with the bearer token ``METRICS_TOKEN``.

The metrics name every model with its namespace and memory, so they are no more public than the
catalog: Prometheus sends ``Authorization: Bearer <METRICS_TOKEN>`` (its scrape config's
``authorization``). With no token configured the endpoint answers no one.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django_prometheus.exports import ExportToDjangoView


@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if not expected or not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
        reason = "a bearer token (METRICS_TOKEN) is required" if expected else "METRICS_TOKEN is not set"
        return HttpResponse(
            f"/metrics: {reason}\n", status=401, content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )  # fmt: skip
    return ExportToDjangoView(request)
