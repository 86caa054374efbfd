"""Prometheus gauges of mirrored objects per kind and sync state, read from the database at scrape time.

A custom collector (rather than gauges updated on save) stays correct across processes: the web
server, workers and watcher all write rows, and only the database knows the totals.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from clusters.kinds import all_models


def _family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "inference_portal_mirrored_objects",
        "Mirrored objects per kind, cluster and sync state.",
        labels=["kind", "cluster", "sync_state"],
    )


class MirroredObjectsCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Without ``describe`` the registry would call ``collect`` (a query) at registration."""
        yield _family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = _family()
        try:
            for model in all_models():
                rows = model.objects.values("cluster__name", "sync_state").annotate(count=Count("id"))
                for row in rows:
                    family.add_metric([model.kube.kind, row["cluster__name"], row["sync_state"]], row["count"])
        except DatabaseError:
            return  # before migrations (or with the database down) export nothing rather than fail the scrape
        yield family


_collector = MirroredObjectsCollector()


def register_collector() -> None:
    """Register once per process (``ready()`` can run twice under the autoreloader or in tests)."""
    if _collector not in REGISTRY._collector_to_names:
        REGISTRY.register(_collector)
