"""Full resync of one kind in one cluster: paged list, upsert what changed, tombstone what is gone.

It repairs anything a watch missed and gives the watch its starting resourceVersion. Unchanged
objects (same uid and resourceVersion) cost one dictionary lookup; new and changed ones whose
rows are not ahead of the cluster are written in bulk (``INSERT ... ON CONFLICT DO UPDATE``),
and the rest go through :func:`clusters.inbound.upsert_from_cluster` one by one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from clusters import bulk, sync_stats
from clusters.audit import Actor, json_diff
from clusters.gateway import ClusterGateway, GatewayError, GoneError, ListPage, NotFoundError
from clusters.inbound import PORTAL_AHEAD, mark_deleted_in_cluster, take_cluster_bookkeeping, upsert_from_cluster
from clusters.kinds import all_models
from clusters.models import AuditEntry, Cluster, KubeObject, SyncState, cluster_document

PAGE_SIZE = 500
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
    gateway: ClusterGateway, model: type[KubeObject], namespace: str | None, page_size: int = PAGE_SIZE
) -> Iterator[tuple[datetime, ListPage]]:
    """The pages of one list of a kind, as ``(began, page)``: ``began`` is when this list was asked
    for (before its first page), the snapshot's time. An expired continue token (410) restarts the
    list; a new ``began`` tells the consumer to start over."""
    for _ in range(MAX_LIST_RESTARTS):
        token: str | None = None
        began = timezone.now()
        try:
            while True:
                page = gateway.list_page(model.kube, namespace, page_size, token)
                yield began, page
                if not page.continue_token:
                    return
                token = page.continue_token
        except GoneError:
            continue
    raise GoneError(f"list of {model.kube.plural} kept expiring; gave up after {MAX_LIST_RESTARTS} restarts", 410)


def resync_kind(gateway: ClusterGateway, model: type[KubeObject], page_size: int = PAGE_SIZE) -> ResyncReport:
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
    page_size: int = PAGE_SIZE,
) -> str:
    """Resync one namespace (None: all); returns the list's resourceVersion, where a watch starts.

    Each page is stored as it arrives, so a relist of 100,000 objects holds one page in memory,
    not the whole list; only the listed keys are kept, for the tombstones once the list is whole.
    A restarted list starts over (the pages already stored were true when listed)."""
    started, listed, written = None, set(), 0
    for began, page in list_pages(gateway, model, namespace, page_size):
        if began != started:  # the first page, or a restarted list
            started, listed = began, set()
        listed.update(_key(item) for item in page.items)
        written += ingest_items(model, gateway.cluster, page.items, started)
    report.listed += len(listed)
    report.written += written
    report.deleted += _tombstone_missing(model, gateway.cluster, namespace, listed, started)
    return page.resource_version


def _key(item: dict[str, Any]) -> tuple[str, str]:
    return item["metadata"].get("namespace") or "default", item["metadata"]["name"]


def ingest_items(model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]], listed_at: datetime) -> int:
    """Upsert listed objects that are new or changed; returns how many rows were written.

    A list is a snapshot taken when it began (``listed_at``): rows written after that (by the
    watcher, an apply, a portal edit or delete) already hold something newer than the snapshot,
    or an intent it knows nothing of, so they are left alone, and an object the watcher saw
    deleted meanwhile is not brought back. ResourceVersions cannot be compared to tell which is
    newer; what happened after the list began can. The rows' states are read under row locks in
    the same transaction as the writes, so a portal edit saved meanwhile waits and is never
    overwritten by the cluster's older spec.
    """
    with transaction.atomic():
        return _ingest_locked(model, cluster, items, listed_at)


def _ingest_locked(model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]], listed_at: datetime) -> int:
    # Lock the rows of these objects only (not every row of the kind): edits of others go on.
    keys = {_key(item) for item in items}
    known = {
        (namespace, name): (uid, resource_version, state, updated_at)
        for namespace, name, uid, resource_version, state, updated_at in model.objects.select_for_update()
        .filter(cluster=cluster, name__in={name for _, name in keys})
        .values_list("namespace", "name", "uid", "resource_version", "sync_state", "updated_at")
        if (namespace, name) in keys
    }
    bulk: list[dict[str, Any]] = []
    written = 0
    for item in items:
        metadata = item["metadata"]
        key = (metadata.get("namespace") or "default", metadata["name"])
        seen = known.get(key)
        if seen and seen[3] >= listed_at:
            continue  # changed after the list began: newer than this snapshot
        if (
            seen
            and seen[0] == metadata.get("uid")
            and seen[1] == metadata.get("resourceVersion")
            and seen[2] != SyncState.DELETED_IN_CLUSTER
        ):
            continue
        if seen and seen[2] in PORTAL_AHEAD:
            written += upsert_from_cluster(model, cluster, item) is not None
        else:
            bulk.append(item)
    return written + _bulk_upsert(model, cluster, bulk)


_SYNCED_FIELDS = [
    "uid",
    "resource_version",
    "generation",
    "observed_generation",
    "labels",
    "annotations",
    "spec",
    "status",
    "last_synced_spec",
    "last_synced_metadata",
    "sync_state",
    "last_error",
    "conflict",
    "cluster_created_at",
    "updated_at",
]


def _bulk_upsert(model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]]) -> int:
    """Upsert rows the cluster owns in bulk, plus one audit entry each (what changed, by whom)."""
    if not items:
        return 0
    keys = [_key(item) for item in items]
    before = {
        (ns, name): {"spec": spec, "labels": labels, "annotations": annotations}
        for ns, name, spec, labels, annotations in model.objects.filter(
            cluster=cluster, name__in={name for _, name in keys}
        ).values_list("namespace", "name", "spec", "labels", "annotations")
    }
    now = timezone.now()
    scratch = model(cluster=cluster, updated_at=now, created_at=now)

    def rows():
        for item, (namespace, name) in zip(items, keys, strict=True):
            scratch.namespace, scratch.name = namespace, name
            take_cluster_bookkeeping(scratch, item)
            document = cluster_document(item)
            scratch.set_desired(document)
            scratch.set_base(document)
            scratch.status = item.get("status") or {}
            scratch.observed_generation = scratch.status.get("observedGeneration")
            scratch.sync_state = SyncState.DELETING if item["metadata"].get("deletionTimestamp") else SyncState.SYNCED
            scratch.last_error, scratch.conflict = "", None
            scratch.project()
            yield scratch

    try:
        with transaction.atomic():
            pks = bulk.upsert(
                model,
                rows(),
                unique=["cluster", "namespace", "name"],
                update=[*_SYNCED_FIELDS, *model.projected_fields()],
                all_new=not before,
            )
            bulk.insert(AuditEntry, _audit_entries(model, cluster, items, keys, pks, before))
    except DatabaseError:
        # One object the database cannot hold fails the whole batch: store them one by one, so that
        # one becomes an Error row naming the reason and every other object still gets through.
        for item in items:
            upsert_from_cluster(model, cluster, item)
    return len(items)


def _audit_entries(model, cluster, items, keys, pks, before):
    """One entry per written object; yields one reused instance (bulk.insert reads it at once)."""
    entry = AuditEntry(kind=model.kube.kind, cluster=cluster, source=AuditEntry.Source.CLUSTER)
    for item, key in zip(items, keys, strict=True):
        previous = before.get(key)
        entry.object_id = pks[(cluster.pk, *key)]
        entry.namespace, entry.name = key
        entry.action = AuditEntry.Action.UPDATED if previous else AuditEntry.Action.CREATED
        entry.actor_label = Actor.cluster(item).label
        entry.changes = json_diff(previous or {}, cluster_document(item))
        entry.at = None
        yield entry


def _tombstone_missing(
    model: type[KubeObject], cluster: Cluster, namespace: str | None, listed: set[tuple[str, str]], started: datetime
) -> int:
    """A relist never reports deletions: rows the cluster had but no longer lists are tombstoned."""
    # Rows written after the list began (by the watcher) may hold objects the list could not see yet.
    rows = (
        model.objects.filter(cluster=cluster, updated_at__lt=started)
        .exclude(uid="")
        .exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
    )
    if namespace:
        rows = rows.filter(namespace=namespace)
    gone = [
        (ns, name, uid) for ns, name, uid in rows.values_list("namespace", "name", "uid") if (ns, name) not in listed
    ]
    return sum(
        mark_deleted_in_cluster(model, cluster, ns, name, uid, Actor.cluster()) is not None for ns, name, uid in gone
    )


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
    Cluster.objects.filter(pk=cluster.pk).update(
        healthy=not errors,
        last_error="; ".join(errors)[:2000],
        missing_kinds=missing,
        **({"last_full_resync_at": timezone.now()} if not errors else {}),
    )
    return reports
