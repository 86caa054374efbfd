"""Celery tasks: the periodic refresh of every cluster, and one cluster on demand."""

from __future__ import annotations

from celery import shared_task

from clusters.models import Cluster
from scheduler.rightsizing.refresh import refresh_cluster


@shared_task(acks_late=True)
def refresh_cluster_rightsizing(cluster_id: int) -> dict[str, object]:
    """Refresh one cluster (the portal's refresh button). Idempotent: a refresh only adds history."""
    refresh = refresh_cluster(Cluster.objects.get(pk=cluster_id))
    return {"cluster": refresh.cluster.name, "ok": refresh.ok, "error": refresh.error, "queries": refresh.queries}


@shared_task
def refresh_all_rightsizing() -> int:
    """Periodic: queue a refresh of every cluster with a Prometheus URL; returns how many."""
    ids = list(Cluster.objects.exclude(prometheus_url="").values_list("pk", flat=True))
    for cluster_id in ids:
        refresh_cluster_rightsizing.delay(cluster_id)
    return len(ids)
