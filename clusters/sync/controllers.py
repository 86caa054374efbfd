"""The portal as controller: the passes that run the registered reconcilers (clusters.controller_registry).

``clusters/`` knows no concrete kind: the apps register a reconcile function per kind they can
control (``models_app`` for InferenceModel, ``runs_app`` for InferenceRun). A cluster opts in per
kind (``Cluster.managed_kinds``, the `manage` mode); everywhere else the portal only mirrors.
Reconcilers read the live object from the cluster, so a stale row never drives a decision, and
are idempotent: the watcher's events, the periodic pass and ``manage.py sync --once`` may all call
them at any time.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusters.controller_registry import controller_children, controller_reads, reconciler_for, sweeps
from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, ConflictError, GatewayError, PassSnapshot, PermanentError
from clusters.kube.failures import HeldRefusal, refusal, report_refusal
from clusters.kube.informers import cached_items
from clusters.kube.owned import NotOwnedError
from clusters.models import Cluster, KubeObject, SyncState
from clusters.sync import stats as sync_stats
from clusters.sync.inbound import upsert_from_cluster
from clusters.sync.work_queue import BUSY, object_key, pass_key, run_exclusively, run_when_free

logger = logging.getLogger(__name__)
# A reconcile whose write is refused as stale (409, a resourceVersion precondition) reads the object again
# and redoes, as client-go's RetryOnConflict: without a shared lease (the live demo's processes each keep
# their own cache) a wake and the watcher's reconcile of a new model raced, and the wake answered 409.
CONFLICT_ATTEMPTS = 3

@dataclass
class ReconcileResult:
    kind: str
    namespace: str
    name: str
    outcome: str


def reconcile_row(obj: KubeObject, now: datetime | None = None, gateway: ClusterGateway | None = None,
                  wait_seconds: float = 0.0) -> str:
    """Reconcile one mirrored object of a managed kind; returns what was done (for logs and tests).

    Where another reconcile of the object holds its lease, this one is handed to the holder (which
    runs once more) and :data:`BUSY` returned at once; with ``wait_seconds`` it waits up to that
    long for the holder to end and then runs itself, so a caller that must answer from this
    reconcile's own outcome (a wake) never reads the status of the holder's earlier run. BUSY then
    only when the holder ran longer than that."""
    reconcile = reconciler_for(obj.kube.kind)
    if reconcile is None or not obj.cluster.manages(obj.kube.kind):
        return "not managed"

    def work() -> str:
        own = gateway is None
        client = gateway or ClusterGateway(obj.cluster)
        started = time.monotonic()
        try:
            for _ in range(CONFLICT_ATTEMPTS - 1):
                try:
                    return reconcile(client, obj, now or timezone.now())
                except ConflictError:  # another writer changed it since the reconcile read it: read again
                    continue
            return reconcile(client, obj, now or timezone.now())
        except (PermanentError, NotOwnedError) as error:
            return _refused(client, obj, error, now or timezone.now())
        finally:
            sync_stats.reconciled(obj.cluster, obj.kube.kind, time.monotonic() - started)
            if own:
                client.close()

    key = object_key(obj._meta.label, obj.pk)
    if wait_seconds:
        outcome = run_when_free(key, work, wait_seconds, then=work)
        return BUSY if outcome is None else outcome
    return run_exclusively(key, work, BUSY)


def _refused(gateway: ClusterGateway, obj: KubeObject, error: PermanentError | NotOwnedError, now: datetime) -> str:
    """A write of this reconcile was refused (422 invalid, 403 admission or RBAC, a child of that name
    the portal does not control): the reason and message go on the object (condition, Warning
    Event) and the row, not only in a log."""
    logger.warning("reconcile %s %s/%s refused: %s", obj.kube.kind, obj.namespace, obj.name, error)
    try:
        cr = gateway.get(obj.kube, obj.namespace, obj.name)
    except GatewayError:
        raise error from None
    reason, message = refusal(error)
    reported = report_refusal(gateway, obj.kube, cr, reason, message, now, held=isinstance(error, HeldRefusal))
    upsert_from_cluster(type(obj), obj.cluster, reported)
    return f"refused: {reason}: {message}"


def reconcile_cluster(cluster: Cluster, now: datetime | None = None) -> list[ReconcileResult]:
    """One pass over every object of the kinds this cluster lets the portal manage.

    Runs ``MAX_RECONCILE_RATE`` reconciles at a time (the reference controller's setting): the
    objects are shared out among that many workers, each with one gateway and one database
    connection for all of its objects. Results come back in the objects' order. A pass asked for
    while one runs (it outlasted the polling interval) does not run alongside it: the running pass
    goes once more instead (clusters/sync/work_queue.py), and so does each object's reconcile.
    """
    return run_exclusively(pass_key(cluster.pk), lambda: _reconcile_pass(cluster, now or timezone.now()), [])


def _reconcile_pass(cluster: Cluster, now: datetime) -> list[ReconcileResult]:
    _sweep(cluster)
    rows = [
        row
        for model in all_models()
        if cluster.manages(model.kube.kind)
        for row in model.objects.filter(cluster=cluster)
        .exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
        .select_related("cluster")
    ]

    read = {kind for row in rows for kind in controller_reads(row.kube.kind)}
    listed = {type(row) for row in rows} | {model for model in all_models() if model.kube.kind in read}
    snapshot = _snapshot(cluster, listed) if rows else None
    # SQLite serializes writers anyway (and tests on it stay in one connection): no threads there.
    workers = 1 if connection.vendor == "sqlite" else max(1, min(settings.MAX_RECONCILE_RATE, len(rows)))
    if workers == 1:
        return _reconcile_share(cluster, rows, now, snapshot)
    shares = [rows[start::workers] for start in range(workers)]

    def in_thread(share: list[KubeObject]) -> list[ReconcileResult]:
        try:
            return _reconcile_share(cluster, share, now, snapshot)
        finally:
            connection.close()  # each pool thread opened its own

    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = list(pool.map(in_thread, shares))
    return [done[index % workers][index // workers] for index in range(len(rows))]


def _sweep(cluster: Cluster) -> None:
    for kind, sweep in sweeps():
        if cluster.manages(kind):
            sweep(cluster)


def _snapshot(cluster: Cluster, models: set[type[KubeObject]]) -> PassSnapshot | None:
    """The managed kinds' objects and those their controllers read by name (``controller_reads``),
    one list per kind and namespace (the cluster's namespaces, else cluster-wide), and the children
    their controllers own (by label) as the process's informers hold them
    (``clusters.kube.informers``: one watch per child kind and namespace, no request per pass), for
    the pass's reads (:class:`PassSnapshot`). None when a read fails: the pass then reads each
    object live."""
    snapshot = PassSnapshot()
    gateway = ClusterGateway(cluster)
    try:
        for namespace in cluster.namespaces or [None]:
            for model in sorted(models, key=lambda m: m.kube.kind):
                kind, items, token = model.kube, [], None
                while True:
                    page = gateway.list_page(kind, namespace, settings.SYNC_LIST_PAGE_SIZE, token)
                    items += page.items
                    if not (token := page.continue_token):
                        break
                snapshot.add(PassSnapshot.type_key(kind.api_version, kind.kind), namespace, items)
                for child in controller_children(kind.kind):  # from the process's informer: no request
                    children = cached_items(cluster, child.api_version, child.kind, namespace, child.selector)
                    snapshot.add(PassSnapshot.type_key(child.api_version, child.kind), namespace, children)
    except GatewayError as error:
        logger.warning("%s: listing for the reconcile pass failed (%s); reading each object live", cluster, error)
        return None
    finally:
        gateway.close()
    return snapshot


def _reconcile_share(
    cluster: Cluster, rows: list[KubeObject], now: datetime, snapshot: PassSnapshot | None = None
) -> list[ReconcileResult]:
    """Reconcile rows in turn over one gateway (one API client per worker, not per object), reading
    what the pass listed from ``snapshot``."""
    if not rows:
        return []
    gateway = ClusterGateway(cluster)
    gateway.snapshot = snapshot
    try:
        return [_reconcile_safely(row, now, gateway) for row in rows]
    finally:
        gateway.close()


def _reconcile_safely(row: KubeObject, now: datetime, gateway: ClusterGateway) -> ReconcileResult:
    """One reconcile whose cluster errors are logged and reported, so one object never stops a pass."""
    try:
        outcome = reconcile_row(row, now, gateway)
    except Exception as error:
        logger.warning(
            "reconcile %s %s/%s: %s",
            row.kube.kind,
            row.namespace,
            row.name,
            error,
            exc_info=not isinstance(error, GatewayError),
        )
        outcome = f"error: {error}"
    return ReconcileResult(row.kube.kind, row.namespace, row.name, outcome)
