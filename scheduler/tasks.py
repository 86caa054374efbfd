"""Celery tasks of the scheduler: the periodic refresh of node pools from every cluster's Nodes."""

from __future__ import annotations

import logging

from celery import shared_task

from clusters.kube.client import GatewayError
from clusters.models import Cluster
from scheduler.refresh import refresh_node_pools

logger = logging.getLogger(__name__)


def refresh_all_node_pools() -> dict[str, str]:
    """Refresh every cluster that has an API server; one cluster failing does not stop the others.

    Snapshot clusters (demo data) have no Nodes to read; their pools are kept as loaded.
    """
    results: dict[str, str] = {}
    for cluster in Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT):
        try:
            results[cluster.name] = str(refresh_node_pools(cluster))
        except GatewayError as error:
            logger.warning("node pools of %s not refreshed: %s", cluster.name, error)
            results[cluster.name] = f"error: {error}"
    return results


@shared_task(acks_late=True)
def refresh_node_pools_task() -> dict[str, str]:
    """Periodic (beat): node pools of every cluster from its Nodes. Idempotent: reads, then overwrites."""
    return refresh_all_node_pools()
