"""Prometheus metrics of the sync, read from the database at scrape time.

Custom collectors (rather than counters and gauges updated in place) stay correct across
processes: the web server's workers, the Celery workers and the watcher all write rows,
and only the database knows the totals. Each scrape costs a few grouped queries.

- ``inference_portal_mirrored_objects``: rows per kind, cluster and sync state (a ``PendingApply``
  count is the apply backlog per cluster and kind);
- the sync's health per cluster and kind, from ``SyncStat`` rows: the last successful list, watch
  reconnects, relists after 410, apply errors by HTTP code, reconcile count and duration.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count
from prometheus_client.core import (
    REGISTRY,
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from clusters.kinds import all_models
from clusters.models import SyncStat

Counter = SyncStat.Counter
LABELS = ["cluster", "kind"]


def _mirrored_family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "inference_portal_mirrored_objects",
        "Mirrored objects per kind, cluster and sync state.",
        labels=["kind", "cluster", "sync_state"],
    )


class MirroredObjectsCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Without ``describe`` the registry would call ``collect`` (a query) at registration."""
        yield _mirrored_family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = _mirrored_family()
        try:
            for model in all_models():
                rows = model.objects.values("cluster__name", "sync_state").annotate(count=Count("id"))
                for row in rows:
                    family.add_metric([model.kube.kind, row["cluster__name"], row["sync_state"]], row["count"])
        except DatabaseError:
            return  # before migrations (or with the database down) export nothing rather than fail the scrape
        yield family


def _sync_families() -> dict[str, Metric]:
    return {
        Counter.LAST_LIST: GaugeMetricFamily(
            "inference_portal_sync_last_list_timestamp_seconds",
            "When a full list of the kind last succeeded (watcher relist or periodic resync), Unix time.",
            labels=LABELS,
        ),
        Counter.WATCH_RECONNECTS: CounterMetricFamily(
            "inference_portal_watch_reconnects", "Watches re-opened after an error.", labels=LABELS
        ),
        Counter.RELISTS_AFTER_GONE: CounterMetricFamily(
            "inference_portal_watch_relists", "Relists after 410 Gone (resourceVersion too old).", labels=LABELS
        ),
        Counter.APPLY_ERRORS: CounterMetricFamily(
            "inference_portal_apply_errors",
            "Applies from the portal that failed, by HTTP code (connection: no answer).",
            labels=[*LABELS, "code"],
        ),
        Counter.LEASE_WAITING: GaugeMetricFamily(
            "inference_portal_watch_lease_waiting",
            "1 while this installation's watcher waits for the cluster's Lease, held by another replica.",
            labels=["cluster"],
        ),
        Counter.LEASE_REFUSED: GaugeMetricFamily(
            "inference_portal_watch_lease_refused",
            "1 while the cluster refuses this installation's watcher its Lease (RBAC, a missing namespace): "
            "nothing is watched.",
            labels=["cluster"],
        ),
    }


def _reconcile_family() -> SummaryMetricFamily:
    return SummaryMetricFamily(
        "inference_portal_reconcile_duration_seconds", "Time spent in reconciles of managed kinds.", labels=LABELS
    )


class SyncHealthCollector(Collector):
    def describe(self) -> Iterator[Metric]:
        yield from _sync_families().values()
        yield _reconcile_family()

    def collect(self) -> Iterator[Metric]:
        families, reconcile = _sync_families(), _reconcile_family()
        durations: dict[tuple[str, str], dict[str, float]] = {}
        try:
            rows = list(SyncStat.objects.values_list("cluster__name", "kind", "counter", "label", "value"))
        except DatabaseError:
            return
        for cluster, kind, counter, label, value in rows:
            if counter in (Counter.RECONCILES, Counter.RECONCILE_SECONDS):
                durations.setdefault((cluster, kind), {})[counter] = value
            elif counter == Counter.APPLY_ERRORS:
                families[counter].add_metric([cluster, kind, label], value)
            elif counter in (Counter.LEASE_WAITING, Counter.LEASE_REFUSED):
                families[counter].add_metric([cluster], value)
            else:
                families[counter].add_metric([cluster, kind], value)
        for (cluster, kind), figures in durations.items():
            reconcile.add_metric(
                [cluster, kind], figures.get(Counter.RECONCILES, 0), figures.get(Counter.RECONCILE_SECONDS, 0)
            )
        yield from families.values()
        yield reconcile


_collectors = (MirroredObjectsCollector(), SyncHealthCollector())


def register_collectors() -> None:
    """Register once per process (``ready()`` can run twice under the autoreloader or in tests)."""
    for collector in _collectors:
        if collector not in REGISTRY._collector_to_names:
            REGISTRY.register(collector)
