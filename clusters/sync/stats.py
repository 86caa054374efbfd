"""Recording the sync's health (``SyncStat`` rows) from whichever process sees it happen.

Every call is one UPDATE (an INSERT the first time) and never raises: metrics must not stop a
watch, an apply or a reconcile, so a database error is logged and the figure skipped.
"""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.expressions import Combinable

from clusters.models import Cluster, SyncStat

logger = logging.getLogger(__name__)
Counter = SyncStat.Counter


def _record(cluster: Cluster, kind: str, counter: str, update: Combinable, initial: float, label: str = "") -> None:
    key = {"cluster_id": cluster.pk, "kind": kind, "counter": counter, "label": label}
    try:
        with transaction.atomic():
            if SyncStat.objects.filter(**key).update(value=update):
                return
            try:
                with transaction.atomic():
                    SyncStat.objects.create(**key, value=initial)
            except IntegrityError:  # another process created the row meanwhile: add to it
                SyncStat.objects.filter(**key).update(value=update)
    except DatabaseError as error:
        logger.warning("sync stats: %s %s %s not recorded: %s", cluster.name, kind, counter, error)


def _add(cluster: Cluster, kind: str, counter: str, amount: float = 1, label: str = "") -> None:
    _record(cluster, kind, counter, F("value") + amount, amount, label)


def listed(cluster: Cluster, kind: str) -> None:
    """A full list of the kind succeeded (a watcher's relist or the periodic resync)."""
    now = time.time()
    _record(cluster, kind, Counter.LAST_LIST, Value(now), now)


def watch_reconnected(cluster: Cluster, kind: str) -> None:
    _add(cluster, kind, Counter.WATCH_RECONNECTS)


def relisted_after_gone(cluster: Cluster, kind: str) -> None:
    _add(cluster, kind, Counter.RELISTS_AFTER_GONE)


def apply_failed(cluster: Cluster, kind: str, status: int) -> None:
    """An apply ended in an error; ``status`` 0 (no HTTP answer) is recorded as ``connection``."""
    _add(cluster, kind, Counter.APPLY_ERRORS, label=str(status) if status else "connection")


def lease_waiting(cluster: Cluster, waiting: bool) -> None:
    """The watcher of this installation waits for the cluster's Lease (another replica holds it), or not."""
    _record(cluster, "", Counter.LEASE_WAITING, Value(float(waiting)), float(waiting))


def lease_refused(cluster: Cluster, refused: bool) -> None:
    """The cluster refuses the watcher's Lease (403: RBAC; 404: no such namespace...), or no longer does."""
    _record(cluster, "", Counter.LEASE_REFUSED, Value(float(refused)), float(refused))


def lease_is_refused(cluster: Cluster) -> bool:
    """What :func:`lease_refused` last said for the cluster (the resync's health keeps it)."""
    return SyncStat.objects.filter(cluster=cluster, counter=Counter.LEASE_REFUSED, value__gt=0).exists()


def reconciled(cluster: Cluster, kind: str, seconds: float) -> None:
    _add(cluster, kind, Counter.RECONCILES)
    _add(cluster, kind, Counter.RECONCILE_SECONDS, seconds)
