"""``/metrics`` for Prometheus, only with the bearer token ``METRICS_TOKEN``.

The metrics name every model with its namespace and memory, so they are no more public than the
catalog: Prometheus sends ``Authorization: Bearer <METRICS_TOKEN>`` (its scrape config's
``authorization``). With no token configured the endpoint answers no one.

Besides django-prometheus and the apps' collectors (registered in their ``ready()``), the web
process exports the depth of the Celery task queues, read from the broker at scrape time.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django_prometheus.exports import ExportToDjangoView
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from config.broker import broker_connection, queue_depths


def _queue_family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "inference_portal_task_queue_depth", "Celery tasks waiting in each queue of the broker.", labels=["queue"]
    )


class QueueDepthCollector(Collector):
    """Nothing without a broker (tasks run in-process) or when it cannot be reached (``/readyz`` says so)."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield _queue_family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if not settings.CELERY_BROKER_URL:
            return
        family = _queue_family()
        try:
            with broker_connection() as connection:
                depths = queue_depths(connection)
        except Exception:  # any transport's connection error: export nothing rather than fail the scrape
            return
        for queue, depth in depths.items():
            family.add_metric([queue], depth)
        yield family


_queue_collector = QueueDepthCollector()
if _queue_collector not in REGISTRY._collector_to_names:  # this module is imported once per process
    REGISTRY.register(_queue_collector)


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
