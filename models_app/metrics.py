"""Per-model gauges of the InferenceModels the portal manages, read from the database at scrape time.

They used to be set by the controller inside Celery workers, which never reached the web process's
``/metrics``; read from the rows, every process answers the same. A model's series go away when
its row starts ``Deleting`` (the reference's finalizer step "clean up metrics") or leaves the
cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from clusters.models import Cluster, SyncState
from models_app.models import InferenceModel

LABELS = ["cluster", "namespace", "name"]
GONE = (SyncState.DELETING, SyncState.DELETED_IN_CLUSTER)


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily("inference_portal_model_replicas", "Running replicas of a managed InferenceModel.",
                          labels=LABELS),
        GaugeMetricFamily("inference_portal_model_memory_bytes", "Declared memory of a managed InferenceModel.",
                          labels=LABELS),
    )  # fmt: skip


class ManagedModelsCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from _families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        replicas, memory = _families()
        try:
            # managed_kinds is a JSON list (no portable "contains" lookup): clusters are few
            managing = [c.pk for c in Cluster.objects.only("managed_kinds") if c.manages(InferenceModel.kube.kind)]
            rows = (
                InferenceModel.objects.filter(cluster_id__in=managing)
                .exclude(sync_state__in=GONE)
                .values_list("cluster__name", "namespace", "name", "status", "memory_bytes")
            )
            for cluster, namespace, name, status, memory_bytes in rows:
                replicas.add_metric([cluster, namespace, name], (status or {}).get("replicas") or 0)
                memory.add_metric([cluster, namespace, name], memory_bytes or 0)
        except DatabaseError:
            return
        yield replicas
        yield memory


_collector = ManagedModelsCollector()


def register_collector() -> None:
    """Register once per process (``ready()`` can run twice under the autoreloader or in tests)."""
    if _collector not in REGISTRY._collector_to_names:
        REGISTRY.register(_collector)
