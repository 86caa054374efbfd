"""Per-model gauges of the models the portal manages, read from the database at scrape time:
InferenceModels' replicas and memory; KubeAI Models' desired replicas
(``inference_portal_model_desired_replicas{cluster,namespace,kind,name}``: what the autoscaler wants
and admission allows, ``status.desiredReplicas``), for KEDA or an HPA to scale on.

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
from models_app.models import InferenceModel, KubeAIModel

LABELS = ["cluster", "namespace", "name"]
DESIRED_LABELS = ["cluster", "namespace", "kind", "name"]
GONE = (SyncState.DELETING, SyncState.DELETED_IN_CLUSTER)


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily("inference_portal_model_replicas", "Running replicas of a managed InferenceModel.",
                          labels=LABELS),
        GaugeMetricFamily("inference_portal_model_memory_bytes", "Declared memory of a managed InferenceModel.",
                          labels=LABELS),
        GaugeMetricFamily("inference_portal_model_desired_replicas",
                          "Replicas a managed KubeAI Model's autoscaler wants and admission allows.",
                          labels=DESIRED_LABELS),
    )  # fmt: skip


class ManagedModelsCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from _families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        replicas, memory, desired = _families()
        try:
            # managed_kinds is a JSON list (no portable "contains" lookup): clusters are few
            clusters = list(Cluster.objects.only("managed_kinds"))
            managing = [c.pk for c in clusters if c.manages(InferenceModel.kube.kind)]
            rows = (
                InferenceModel.objects.filter(cluster_id__in=managing)
                .exclude(sync_state__in=GONE)
                .values_list("cluster__name", "namespace", "name", "status", "memory_bytes")
            )
            for cluster, namespace, name, status, memory_bytes in rows:
                replicas.add_metric([cluster, namespace, name], (status or {}).get("replicas") or 0)
                memory.add_metric([cluster, namespace, name], memory_bytes or 0)
            kind = KubeAIModel.kube.kind
            kubeai = (
                KubeAIModel.objects.filter(cluster_id__in=[c.pk for c in clusters if c.manages(kind)])
                .exclude(sync_state__in=GONE)
                .values_list("cluster__name", "namespace", "name", "status")
            )
            for cluster, namespace, name, status in kubeai:
                desired.add_metric([cluster, namespace, kind, name], (status or {}).get("desiredReplicas") or 0)
        except DatabaseError:
            return
        yield replicas
        yield memory
        yield desired


_collector = ManagedModelsCollector()


def register_collector() -> None:
    """Register once per process (``ready()`` can run twice under the autoreloader or in tests)."""
    if _collector not in REGISTRY._collector_to_names:
        REGISTRY.register(_collector)
