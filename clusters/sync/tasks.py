"""Celery tasks of the sync: apply one object, resync a cluster, and the periodic sweep.

Every task is keyed by the object (or cluster) it works on and reads the current state itself,
so running one twice, late, or after a crashed worker converges to the same result. Only
transient failures (429, 5xx, timeouts, connection errors) are retried, with backoff.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.apps import apps
from django.utils import timezone

from clusters.kinds import all_models
from clusters.kube.client import TransientError
from clusters.models import Cluster, KubeObject, SyncState
from clusters.sync.controllers import reconcile_cluster, reconcile_row
from clusters.sync.handover import release_finalizers
from clusters.sync.outbound import apply_object
from clusters.sync.resync import resync_cluster

logger = logging.getLogger(__name__)

RETRY_BACKOFF_MAX = 300
# Longer than the longest retry countdown: a row whose retry chain is alive is touched (updated_at)
# at every retry, so the sweep only re-queues rows whose chain died (worker killed, message lost).
STALE_AFTER = timedelta(seconds=2 * RETRY_BACKOFF_MAX)


def enqueue_apply(obj: KubeObject) -> None:
    """Queue the apply of one row (called on transaction commit)."""
    apply_object_task.delay(obj._meta.label, obj.pk)


@shared_task(bind=True, acks_late=True, max_retries=None)
def apply_object_task(self, model_label: str, pk: int) -> str:
    model = apps.get_model(model_label)
    try:
        return str(apply_object(model, pk))
    except TransientError as error:
        model.objects.filter(pk=pk).update(last_error=f"will retry: {error}", updated_at=timezone.now())
        return _retry_later(self, error)


@shared_task(bind=True, acks_late=True, max_retries=None)
def reconcile_object_task(self, model_label: str, pk: int) -> str:
    """Run the portal's controller for one object of a managed kind (watch events queue this)."""
    model = apps.get_model(model_label)
    obj = model.objects.select_related("cluster").filter(pk=pk).first()
    if obj is None:
        return "gone"
    try:
        return reconcile_row(obj)
    except TransientError as error:
        return _retry_later(self, error)


def _retry_later(task, error: TransientError) -> str:
    """Retry with exponential backoff (capped) on a worker; in eager mode leave it to the periodic
    pass, since an eager retry would run again at once, in the caller's request."""
    if task.request.is_eager:
        return f"transient error; the periodic pass retries: {error}"
    backoff = min(RETRY_BACKOFF_MAX, 2 ** min(task.request.retries, 9))
    countdown = min(RETRY_BACKOFF_MAX, max(backoff, error.retry_after or 0))  # honour the server's Retry-After
    raise task.retry(exc=error, countdown=countdown) from None


@shared_task
def reconcile_managed_clusters() -> int:
    """Periodic (every POLLING_INTERVAL): one reconcile pass per cluster that lets the portal manage a kind."""
    clusters = [
        cluster for cluster in Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT) if cluster.managed_kinds
    ]
    return sum(len(reconcile_cluster(cluster)) for cluster in clusters)


def enqueue_reconcile(obj: KubeObject) -> None:
    reconcile_object_task.delay(obj._meta.label, obj.pk)


@shared_task(acks_late=True)
def resync_cluster_task(cluster_id: int) -> dict[str, int]:
    cluster = Cluster.objects.get(pk=cluster_id)
    reports = resync_cluster(cluster)
    return {report.kind: report.written for report in reports}


@shared_task
def resync_all_clusters() -> int:
    """Periodic: resync every cluster with an API server, and re-queue applies left waiting.

    The sweep is what makes a lost message (worker killed, broker restarted, eager mode with no
    worker) harmless: any row still ``PendingApply`` or ``Deleting`` after STALE_AFTER is queued again.
    """
    clusters = Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT)
    for cluster in clusters:
        resync_cluster_task.delay(cluster.pk)
    stale_before = timezone.now() - STALE_AFTER
    for model in all_models():
        for pk in model.objects.filter(
            sync_state__in=[SyncState.PENDING_APPLY, SyncState.DELETING], updated_at__lt=stale_before
        ).values_list("pk", flat=True):
            apply_object_task.delay(model._meta.label, pk)
    return clusters.count()


@shared_task(acks_late=True, autoretry_for=(TransientError,), retry_backoff=True, retry_backoff_max=RETRY_BACKOFF_MAX,
             max_retries=10)
def release_finalizers_task(cluster_id: int, kinds: list[str]) -> int:
    """The portal stopped managing ``kinds`` in the cluster: take its finalizer off their objects."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    return release_finalizers(cluster, kinds) if cluster is not None else 0
