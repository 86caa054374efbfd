"""Cluster -> portal: record what a cluster says an object is (watch events, resync, demo snapshot).

The portal's intent is never overwritten here: rows whose intent is ahead of the cluster
(``PendingApply``, ``Conflict``, ``Error``, ``Deleting``) only take the cluster's status; their
resourceVersion and merge base stay, so the pending apply meets a 409 and merges properly.
Once the cluster's object is exactly the row's intent (typically the watch event of the portal's
own apply), the row takes it whole and is ``Synced``.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, transaction
from django.utils.dateparse import parse_datetime

from clusters.models import AuditEntry, Cluster, KubeObject, SyncState, cluster_document
from clusters.sync.audit import Actor, decided_changes, json_diff, record

PORTAL_AHEAD = (SyncState.PENDING_APPLY, SyncState.CONFLICT, SyncState.ERROR, SyncState.DELETING)
UNSTORABLE = "the cluster's object cannot be stored in the portal: "


def _holds_intent(obj: KubeObject, manifest: dict[str, Any]) -> bool:
    """The cluster's object is exactly what the row wants (e.g. the event of the portal's own apply):
    the row is in sync with it, whatever its state said. Never for a delete in progress."""
    return (
        obj.sync_state != SyncState.DELETING
        and not manifest["metadata"].get("deletionTimestamp")
        and cluster_document(manifest) == obj.desired_document()
    )


def portal_ahead(obj: KubeObject) -> bool:
    """The row holds portal intent the cluster has not taken yet. An Error row that only says the
    cluster's object could not be stored holds none: the cluster's next version repairs it."""
    return obj.sync_state in PORTAL_AHEAD and not obj.last_error.startswith(UNSTORABLE)


def take_cluster_bookkeeping(obj: KubeObject, manifest: dict[str, Any]) -> None:
    metadata = manifest["metadata"]
    obj.uid = metadata.get("uid", "")
    obj.resource_version = metadata.get("resourceVersion", "")
    obj.generation = metadata.get("generation")
    created = metadata.get("creationTimestamp")
    obj.cluster_created_at = parse_datetime(created) if created else None


def upsert_from_cluster(
    model: type[KubeObject], cluster: Cluster, manifest: dict[str, Any], actor: Actor | None = None
) -> KubeObject | None:
    """Make the row reflect the cluster's object; returns the row, or None when nothing changed.

    An object the database cannot hold (PostgreSQL refuses a ``\\u0000`` in JSON text, say, which
    the API server accepts) becomes an Error row naming the reason instead of failing: one such
    object must not stall its kind (a watch replaying the same event forever, a resync failing
    as a whole)."""
    try:
        with transaction.atomic():
            return _upsert(model, cluster, manifest, actor)
    except DatabaseError as error:
        return record_unstorable(model, cluster, manifest, error)


def record_unstorable(
    model: type[KubeObject], cluster: Cluster, manifest: dict[str, Any], error: Exception
) -> KubeObject:
    """The row of an object that cannot be stored: its identity and resourceVersion (so the same
    version is not retried), state Error and the reason; spec and status stay as they were."""
    metadata = manifest["metadata"]
    namespace = metadata.get("namespace") or "default"
    with transaction.atomic():
        rows = model.objects.select_for_update().filter(cluster=cluster, namespace=namespace, name=metadata["name"])
        obj = rows.first() or model(cluster=cluster, namespace=namespace, name=metadata["name"])
        take_cluster_bookkeeping(obj, manifest)
        obj.sync_state = SyncState.ERROR
        obj.last_error = f"{UNSTORABLE}{str(error).strip()}"[:2000]
        obj.save()
    return obj


def _upsert(
    model: type[KubeObject], cluster: Cluster, manifest: dict[str, Any], actor: Actor | None
) -> KubeObject | None:
    metadata = manifest["metadata"]
    namespace = metadata.get("namespace") or "default"
    obj = (
        model.objects.select_for_update()
        .filter(cluster=cluster, namespace=namespace, name=metadata["name"])
        .first()
    )
    if (
        obj is not None
        and obj.resource_version == metadata.get("resourceVersion")
        and obj.uid == metadata.get("uid")
        and obj.sync_state != SyncState.DELETED_IN_CLUSTER
    ):
        return None  # already seen (watch replay after a reconnect, or a resync of an unchanged object)
    created = obj is None
    if created:
        obj = model(cluster=cluster, namespace=namespace, name=metadata["name"])
    obj.take_cluster_status(manifest.get("status"))
    obj.observed_generation = obj.status.get("observedGeneration")
    recreated = not created and obj.uid and obj.uid != metadata.get("uid")
    if not created and portal_ahead(obj) and not recreated and not _holds_intent(obj, manifest):
        obj.save()
        return obj
    if recreated and portal_ahead(obj) and obj.sync_state != SyncState.DELETING:
        # Deleted and created anew in the cluster while edited in the portal: a person decides.
        take_cluster_bookkeeping(obj, manifest)
        obj.sync_state = SyncState.CONFLICT
        obj.conflict = {
            "resourceVersion": metadata.get("resourceVersion", ""),
            "uid": metadata.get("uid", ""),
            "cluster": cluster_document(manifest),
            "fields": [],
            "message": "re-created in the cluster while edited in the portal",
        }
        obj.last_error = obj.conflict["message"]
        obj.save()
        record(obj, AuditEntry.Action.CONFLICT, actor or Actor.cluster(manifest), message=obj.last_error)
        return obj
    before = {} if created else obj.desired_document()
    take_cluster_bookkeeping(obj, manifest)
    document = cluster_document(manifest)
    obj.set_desired(document)
    obj.set_base(document)
    deleting = bool(metadata.get("deletionTimestamp"))
    obj.sync_state = SyncState.DELETING if deleting else SyncState.SYNCED
    obj.last_error = ""
    obj.conflict = None
    obj.save()
    changes = decided_changes(model, json_diff(before, document))
    if created or changes:
        action = AuditEntry.Action.CREATED if created or recreated else AuditEntry.Action.UPDATED
        record(obj, action, actor or Actor.cluster(manifest), changes)
    return obj


def mark_deleted_in_cluster(
    model: type[KubeObject], cluster: Cluster, namespace: str, name: str, uid: str | None, actor: Actor | None = None
) -> KubeObject | None:
    """The cluster no longer has the object: keep the row (history, reports) as ``DeletedInCluster``.

    A row whose uid differs belongs to another object of the same name and is left alone; a row
    the portal created but never applied (no uid) is not the deleted object either.
    """
    with transaction.atomic():
        obj = model.objects.select_for_update().filter(cluster=cluster, namespace=namespace, name=name).first()
        if obj is None or not obj.uid or (uid and obj.uid != uid) or obj.sync_state == SyncState.DELETED_IN_CLUSTER:
            return None
        if portal_ahead(obj) and obj.sync_state != SyncState.DELETING:
            # Edited in the portal while deleted in the cluster: a person decides (re-create or drop).
            obj.sync_state = SyncState.CONFLICT
            obj.conflict = {
                "resourceVersion": "",
                "uid": "",
                "cluster": None,
                "fields": [],
                "message": "deleted in the cluster while edited in the portal",
            }
            obj.uid = obj.resource_version = ""
            obj.save()
            record(obj, AuditEntry.Action.CONFLICT, actor or Actor.cluster(), message=obj.conflict["message"])
            return obj
        obj.sync_state = SyncState.DELETED_IN_CLUSTER
        obj.uid = obj.resource_version = ""
        obj.save()
        record(obj, AuditEntry.Action.DELETED, actor or Actor.cluster())
    return obj
