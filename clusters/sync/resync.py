"""Full resync of one kind in one cluster: paged list, upsert what changed, tombstone what is gone.

It repairs anything a watch missed and gives the watch its starting resourceVersion. Each page is
stored as it arrives by :func:`clusters.sync.ingest.ingest_items` (unchanged objects write nothing)
while the next one is fetched (one page in flight: the API server and the database work at once,
and a relist holds two pages in memory); rows the cluster no longer lists are tombstoned in one
UPDATE.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, GatewayError, GoneError, ListPage, NotFoundError
from clusters.models import AuditEntry, Cluster, KubeObject, SyncState
from clusters.sync import stats as sync_stats
from clusters.sync.audit import Actor
from clusters.sync.inbound import mark_deleted_in_cluster
from clusters.sync.ingest import ingest_items, object_key
from clusters.sync.leader import LEASE_REFUSED

MAX_LIST_RESTARTS = 3


@dataclass
class ResyncReport:
    """What one resync of one kind did (also what ``manage.py sync --once`` prints)."""

    kind: str
    listed: int = 0
    written: int = 0
    deleted: int = 0
    error: str = ""


def list_pages(
    gateway: ClusterGateway, model: type[KubeObject], namespace: str | None, page_size: int | None = None
) -> Iterator[tuple[datetime, ListPage]]:
    """The pages of one list of a kind, as ``(began, page)``: ``began`` is when this list was asked
    for (before its first page), the snapshot's time. An expired continue token (410) restarts the
    list; a new ``began`` tells the consumer to start over.

    While the consumer stores page k, page k+1 is already being fetched and decoded in a helper
    thread (the gateway is used by that thread alone meanwhile), and no further: one page in
    flight. ``page_size`` defaults to ``settings.SYNC_LIST_PAGE_SIZE``."""
    page_size = page_size or settings.SYNC_LIST_PAGE_SIZE

    def fetch(token: str | None) -> Future[ListPage]:
        return fetcher.submit(gateway.list_page, model.kube, namespace, page_size, token)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="list prefetch") as fetcher:
        for _ in range(MAX_LIST_RESTARTS):
            began = timezone.now()
            pending: Future[ListPage] | None = fetch(None)
            try:
                while pending is not None:
                    page = pending.result()
                    pending = fetch(page.continue_token) if page.continue_token else None
                    yield began, page
            except GoneError:
                continue
            return
    raise GoneError(f"list of {model.kube.plural} kept expiring; gave up after {MAX_LIST_RESTARTS} restarts", 410)


def resync_kind(gateway: ClusterGateway, model: type[KubeObject], page_size: int | None = None) -> ResyncReport:
    """List the kind in the cluster's namespaces (or all) and bring the rows in line."""
    report = ResyncReport(model.kube.kind)
    for namespace in gateway.cluster.namespaces or [None]:
        resync_namespace(gateway, model, namespace, report, page_size)
    sync_stats.listed(gateway.cluster, model.kube.kind)
    return report


def resync_namespace(
    gateway: ClusterGateway,
    model: type[KubeObject],
    namespace: str | None,
    report: ResyncReport,
    page_size: int | None = None,
) -> str:
    """Resync one namespace (None: all); returns the list's resourceVersion, where a watch starts.

    Each page is stored as it arrives, so a relist of 100,000 objects holds one page in memory,
    not the whole list; only the listed keys are kept, for the tombstones once the list is whole.
    A restarted list starts over (the pages already stored were true when listed)."""
    started, listed, written = None, set(), 0
    # closing: a failed write stops the prefetch at once, before the caller closes the gateway
    with closing(list_pages(gateway, model, namespace, page_size)) as pages:
        for began, page in pages:
            if began != started:  # the first page, or a restarted list
                started, listed = began, set()
            listed.update(object_key(item) for item in page.items)
            written += ingest_items(model, gateway.cluster, page.items, started)
    report.listed += len(listed)
    report.written += written
    report.deleted += _tombstone_missing(model, gateway.cluster, namespace, listed, started)
    return page.resource_version


def _tombstone_missing(
    model: type[KubeObject], cluster: Cluster, namespace: str | None, listed: set[tuple[str, str]], started: datetime
) -> int:
    """A relist never reports deletions: rows the cluster had but no longer lists are tombstoned.

    Rows the cluster owns are marked in one UPDATE (with one audit entry each); rows with portal
    intent go through :func:`mark_deleted_in_cluster`, which may surface a conflict."""
    # Rows written after the list began (by the watcher) may hold objects the list could not see yet.
    rows = (
        model.objects.filter(cluster=cluster, updated_at__lt=started)
        .exclude(uid="")
        .exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
    )
    if namespace:
        rows = rows.filter(namespace=namespace)
    gone = [
        (pk, ns, name, uid, state)
        for pk, ns, name, uid, state in rows.values_list("pk", "namespace", "name", "uid", "sync_state")
        if (ns, name) not in listed
    ]
    intent = [(ns, name, uid) for _, ns, name, uid, state in gone if state in _CONFLICT_ON_DELETE]
    marked = _mark_gone(model, cluster, [pk for pk, *_, state in gone if state not in _CONFLICT_ON_DELETE], started)
    return marked + sum(
        mark_deleted_in_cluster(model, cluster, ns, name, uid, Actor.cluster()) is not None for ns, name, uid in intent
    )


_CONFLICT_ON_DELETE = (SyncState.PENDING_APPLY, SyncState.CONFLICT, SyncState.ERROR)


def _mark_gone(model: type[KubeObject], cluster: Cluster, pks: list[int], started: datetime) -> int:
    """Mark rows deleted in the cluster, unless written since the list began; audit each."""
    if not pks:
        return 0
    with transaction.atomic():
        marked = list(
            model.objects.filter(pk__in=pks, updated_at__lt=started)
            .exclude(sync_state__in=[*_CONFLICT_ON_DELETE, SyncState.DELETED_IN_CLUSTER])
            .select_for_update()
            .values_list("pk", "namespace", "name")
        )
        model.objects.filter(pk__in=[pk for pk, *_ in marked]).update(
            sync_state=SyncState.DELETED_IN_CLUSTER, uid="", resource_version="", updated_at=timezone.now()
        )
        actor = Actor.cluster()
        AuditEntry.objects.bulk_create(
            AuditEntry(kind=model.kube.kind, object_id=pk, cluster=cluster, namespace=ns, name=name,
                       action=AuditEntry.Action.DELETED, source=actor.source, actor_label=actor.label)
            for pk, ns, name in marked
        )
    return len(marked)


def resync_cluster(cluster: Cluster, gateway: ClusterGateway | None = None) -> list[ResyncReport]:
    """Resync every mirrored kind of a cluster, each on its own: most clusters run only some of the
    operator families, so a kind whose CRD is not served (404 on its list) is recorded in
    ``missing_kinds`` and checked again next time, and a kind that fails does not stop the others.
    Health, the error of each failed kind and the time of the full resync are recorded; a report's
    ``error`` says why its kind was not resynced."""
    own_gateway = gateway is None
    gateway = gateway or ClusterGateway(cluster)
    reports, missing, errors = [], [], []
    try:
        for model in all_models():
            try:
                reports.append(resync_kind(gateway, model))
            except NotFoundError:
                missing.append(model.kube.kind)
                reports.append(ResyncReport(model.kube.kind, error=f"{model.kube.crd_name} is not installed"))
            except GatewayError as error:
                errors.append(f"{model.kube.kind}: {error}")
                reports.append(ResyncReport(model.kube.kind, error=str(error)))
    finally:
        if own_gateway:
            gateway.close()
    if sync_stats.lease_is_refused(cluster):  # the watcher's report stands until it takes its Lease
        stored = Cluster.objects.filter(pk=cluster.pk).values_list("last_error", flat=True).first() or ""
        errors.insert(0, stored.split("; ")[0] if stored.startswith(LEASE_REFUSED) else f"{LEASE_REFUSED} refused")
    Cluster.objects.filter(pk=cluster.pk).update(
        healthy=not errors,
        last_error="; ".join(errors)[:2000],
        missing_kinds=missing,
        **({"last_full_resync_at": timezone.now()} if not errors else {}),
    )
    return reports


def record_served(cluster: Cluster, kind: str, served: bool) -> None:
    """A watcher's list found ``kind`` served (or its CRD missing: 404): ``missing_kinds`` follows at
    once, not at the next full resync. One locked read-modify-write, so watchers of several kinds
    never drop each other's findings; ``updated_at`` stays, as the row's settings did not change."""
    with transaction.atomic():
        current = (
            Cluster.objects.select_for_update().filter(pk=cluster.pk).values_list("missing_kinds", flat=True).first()
        )
        if current is None or (kind in current) != served:
            return
        missing = set(current) - {kind} if served else {*current, kind}
        ordered = [model.kube.kind for model in all_models() if model.kube.kind in missing]
        Cluster.objects.filter(pk=cluster.pk).update(missing_kinds=ordered)
