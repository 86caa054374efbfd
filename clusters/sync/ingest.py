"""Store many of a cluster's objects at once: a page of a resync's list, or a batch of watch events.

What each object needs is decided from one unlocked query over all of them (:func:`_stored`),
which reads per row its state, whether it was written after the list began, and, only for
objects whose uid or resourceVersion moved, the previous spec, labels and annotations (for the
audit's diff). Unchanged objects then cost nothing more and write nothing (an unchanged relist
writes no WAL). New and changed rows the cluster owns are written in bulk (clusters/sync/bulk.py: new
ones by COPY, changed ones by COPY into staging and one UPDATE); rows whose portal intent is ahead of
the cluster go through :func:`clusters.sync.inbound.upsert_from_cluster` one by one, and so does a
batch the database refused (an object it cannot hold, or a row inserted meanwhile). On databases other
than PostgreSQL (SQLite, the embedded single-user default) every object goes one by one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from clusters.models import AuditEntry, Cluster, KubeObject, SyncState, cluster_document
from clusters.sync import bulk
from clusters.sync.audit import Actor, decided_changes, json_diff
from clusters.sync.inbound import PORTAL_AHEAD, take_cluster_bookkeeping, upsert_from_cluster
from common.gc_tuning import collector_paused

Key = tuple[str, str]  # (namespace, name)


def object_key(item: dict[str, Any]) -> Key:
    return item["metadata"].get("namespace") or "default", item["metadata"]["name"]


def ingest_items(
    model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]], listed_at: datetime | None
) -> int:
    """Store listed objects that are new or changed; returns how many rows were written."""
    return len(ingest(model, cluster, items, listed_at))


def ingest(
    model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]], listed_at: datetime | None
) -> dict[Key, int]:
    """Store the cluster's versions of these objects; returns {(namespace, name): pk} of the rows written.

    ``listed_at`` is when the list these items come from began (None for watch events, which are
    always the newest word). A list is a snapshot: rows written after it began (by the watcher, an
    apply, a portal edit or delete) already hold something newer than the snapshot, or an intent
    it knows nothing of, so they are left alone, and an object the watcher saw deleted meanwhile
    is not brought back. ResourceVersions cannot be compared to tell which is newer; what
    happened after the list began can. Of several versions of one object (a batch of watch
    events) the last counts. The bulk write checks both again under each row's lock (in its
    WHERE, which PostgreSQL re-evaluates on the newest version of a row it waited for), so a
    portal edit saved meanwhile is never overwritten by the cluster's older spec.
    """
    latest = {object_key(item): item for item in items}
    if not latest:
        return {}
    if connection.vendor != "postgresql":
        return _one_by_one(model, cluster, latest, listed_at)
    stored = _stored(model, cluster, latest, listed_at)
    owned, one_by_one = [], []
    for key, item in latest.items():
        row = stored.get(key)
        if row is None:
            owned.append(item)
        elif row.newer or (row.unchanged and row.state != SyncState.DELETED_IN_CLUSTER):
            continue  # newer than this snapshot, or already seen (a watch replay, an unchanged object)
        else:
            (one_by_one if row.state in PORTAL_AHEAD else owned).append(item)
    written: dict[Key, int] = {}
    for item in one_by_one:
        if (obj := upsert_from_cluster(model, cluster, item)) is not None:
            written[object_key(item)] = obj.pk
    if owned:
        written |= _bulk_upsert(model, cluster, owned, stored, listed_at)
    return written


@dataclass(frozen=True)
class _Stored:
    state: str
    newer: bool  # written after the list began
    unchanged: bool  # same uid and resourceVersion as the cluster's object
    before: dict[str, Any] | None  # desired_document of a changed row, else None


def _stored(
    model: type[KubeObject], cluster: Cluster, latest: dict[Key, dict[str, Any]], listed_at: datetime | None
) -> dict[Key, _Stored]:
    """The stored rows of these objects, in one query binding one array per column (a 10,000-element
    ``IN`` list cost more to build than to run). JSON is read, as text, only for changed objects."""
    columns = list(zip(*((*key, item["metadata"].get("uid", ""), item["metadata"].get("resourceVersion", ""))
                         for key, item in latest.items()), strict=True))
    changed = "(t.uid, t.resource_version) IS DISTINCT FROM (k.uid, k.rv)"
    sql = (
        f"SELECT k.ns, k.name, t.sync_state, COALESCE(t.updated_at >= %s, false), NOT {changed}, "
        f"CASE WHEN {changed} THEN t.spec::text END, CASE WHEN {changed} THEN t.labels::text END, "
        f"CASE WHEN {changed} THEN t.annotations::text END "
        f"FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS k(ns, name, uid, rv) "
        # one lookup in the unique index per object (LIMIT 1 keeps the planner from joining instead:
        # it hashed every row of the cluster for each page, a relist quadratic in the objects)
        f"CROSS JOIN LATERAL (SELECT * FROM {connection.ops.quote_name(model._meta.db_table)} t "
        f"WHERE t.cluster_id = %s AND t.namespace = k.ns AND t.name = k.name LIMIT 1) t"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [listed_at, *map(list, columns), cluster.pk])
        with collector_paused():
            return {
                (ns, name): _Stored(
                    state, newer, unchanged,
                    None if spec is None else {
                        "spec": orjson.loads(spec), "labels": orjson.loads(labels),
                        "annotations": orjson.loads(annotations),
                    },
                )
                for ns, name, state, newer, unchanged, spec, labels, annotations in cursor.fetchall()
            }


def _one_by_one(
    model: type[KubeObject], cluster: Cluster, latest: dict[Key, dict[str, Any]], listed_at: datetime | None
) -> dict[Key, int]:
    """Row by row, each under its lock: elsewhere than on PostgreSQL, and for a batch that failed."""
    newer = set()
    if listed_at is not None:
        rows = model.objects.filter(cluster=cluster, name__in={name for _, name in latest}, updated_at__gte=listed_at)
        newer = set(rows.values_list("namespace", "name"))
    written = {}
    for key, item in latest.items():
        if key not in newer and (obj := upsert_from_cluster(model, cluster, item)) is not None:
            written[key] = obj.pk
    return written


_UNIQUE = ["cluster", "namespace", "name"]
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


def _bulk_upsert(
    model: type[KubeObject],
    cluster: Cluster,
    items: list[dict[str, Any]],
    stored: dict[Key, _Stored],
    listed_at: datetime | None,
) -> dict[Key, int]:
    """Write rows the cluster owns in bulk, plus an audit entry for each created row and each row
    whose spec, labels or annotations changed (a status-only change is not audited, as in
    :func:`upsert_from_cluster`)."""
    try:
        with transaction.atomic():
            pks = _write_rows(model, cluster, items, stored, listed_at)
            bulk.insert(AuditEntry, _audit_entries(model, cluster, items, pks, stored))
    except DatabaseError:
        # One object the database cannot hold fails the whole batch: store them one by one, so that
        # one becomes an Error row naming the reason and every other object still gets through.
        return _one_by_one(model, cluster, {object_key(item): item for item in items}, listed_at)
    if listed_at is None:
        # Watch events are the newest word: a row that turned portal-ahead since it was read takes
        # the event as such a row does (its status), one by one.
        for item in items:
            key = object_key(item)
            if key not in pks and (obj := upsert_from_cluster(model, cluster, item)) is not None:
                pks[key] = obj.pk
    return pks


# A synced row's merge base is what it mirrors (_rows: set_base of the same document as set_desired,
# in KubeObject.set_base's shape): set from the staged spec, labels and annotations, not sent twice.
_BASE_FROM_DESIRED = {
    "last_synced_spec": "s.spec",
    "last_synced_metadata": "jsonb_build_object('labels', s.labels, 'annotations', s.annotations)",
}


def _kept_status(model: type[KubeObject]) -> dict[str, str]:
    """The bulk update's SQL for :meth:`KubeObject.take_cluster_status`: the stored row's values of
    the kind's ``portal_status_keys`` stay where the cluster's status has no such key, and so do
    the columns projected from them."""
    keys = model.portal_status_keys
    if not keys:
        return {}
    names = ", ".join("'" + key.replace("'", "''") + "'" for key in keys)
    stored = "CASE jsonb_typeof(t.status) WHEN 'object' THEN t.status ELSE '{}'::jsonb END"
    sql = {"status": f"COALESCE((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each({stored}) e "
                     f"WHERE e.key IN ({names})), '{{}}'::jsonb) || s.status"}  # fmt: skip
    for key, name in keys.items():
        if name:
            column = model._meta.get_field(name).column
            sql[name] = f"CASE WHEN s.status ? '{key}' THEN s.{column} ELSE t.{column} END"
    return sql


def _write_rows(model, cluster, items, stored, listed_at: datetime | None) -> dict[Key, int]:
    """COPY the new rows, update the existing ones from a staging table (clusters/sync/bulk.py)."""
    new = [item for item in items if object_key(item) not in stored]
    written: dict[Key, int] = {}
    if new:
        with transaction.atomic():  # IntegrityError when one was inserted meanwhile: all one by one
            pks = bulk.copy_new(model, _rows(model, cluster, new), len(new))
        written = dict(zip(map(object_key, new), pks, strict=True))
    if len(new) == len(items):
        return written
    only_if = f"t.sync_state NOT IN ({', '.join(['%s'] * len(PORTAL_AHEAD))})"
    params: list[Any] = list(PORTAL_AHEAD)
    if listed_at is not None:
        only_if += " AND t.updated_at < %s"
        params.append(listed_at)
    updated = bulk.staged_update(
        model,
        _rows(model, cluster, [item for item in items if object_key(item) in stored]),
        unique=_UNIQUE,
        update=[*_SYNCED_FIELDS, *model.projected_fields()],
        only_if=only_if,
        only_if_params=params,
        derived={**_BASE_FROM_DESIRED, **_kept_status(model)},
    )
    return written | {key[1:]: pk for key, pk in updated.items()}


def _rows(model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]]) -> Iterator[KubeObject]:
    """The rows of synced objects; yields one reused instance (the bulk writers read it at once)."""
    now = timezone.now()
    scratch = model(cluster=cluster, updated_at=now, created_at=now)
    for item in items:
        scratch.namespace, scratch.name = object_key(item)
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


def _audit_entries(
    model: type[KubeObject], cluster: Cluster, items: list[dict[str, Any]], pks: dict[Key, int],
    stored: dict[Key, _Stored],
) -> Iterator[AuditEntry]:
    """A created row gets one entry naming who created it (the object itself is in the row; a full
    diff from nothing would double what is written); a changed one gets its field diff. Yields
    one reused instance (bulk.insert reads it at once)."""
    entry = AuditEntry(kind=model.kube.kind, cluster=cluster, source=AuditEntry.Source.CLUSTER)
    for item in items:
        key = object_key(item)
        if key not in pks:
            continue
        row = stored.get(key)
        changes = decided_changes(model, json_diff(row.before or {}, cluster_document(item))) if row else []
        if row and not changes:
            continue
        entry.object_id = pks[key]
        entry.namespace, entry.name = key
        entry.action = AuditEntry.Action.UPDATED if row else AuditEntry.Action.CREATED
        entry.actor_label = Actor.cluster(item).label
        entry.changes = changes
        entry.at = None
        yield entry
