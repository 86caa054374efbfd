"""What happens when a person or a script changes a mirrored object in the portal.

Every write path (API, ``/api/apply/``, admin, pages) calls these functions, so marking rows for
apply, auditing, queueing the apply on commit, deleting and resolving conflicts follow one rule.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import Signal

from clusters.models import AuditEntry, Cluster, KubeObject, SyncState
from clusters.sync.audit import Actor, json_diff, record
from clusters.validation.schemas import FieldError, ManifestInvalid
from clusters.web.edits import lock_for_edit


def resolve_cluster(name: str | None) -> Cluster:
    """The named cluster, or the only one when no name is given; otherwise a clear error."""
    if name is not None and (not isinstance(name, str) or "\x00" in name):  # PostgreSQL refuses NUL in text
        raise ManifestInvalid([FieldError("cluster", name, "must be a cluster name (a string without NUL characters)")])
    if name:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise ManifestInvalid(
                [FieldError("cluster", name, "is not a registered cluster; known: " + _cluster_names())]
            )
        return cluster
    clusters = list(Cluster.objects.all()[:2])
    if len(clusters) == 1:
        return clusters[0]
    if not clusters:
        raise ManifestInvalid([FieldError("cluster", None, "cannot default: no cluster is registered yet")])
    raise ManifestInvalid(
        [FieldError("cluster", None, "is required when several clusters exist; known: " + _cluster_names())]
    )


def _cluster_names() -> str:
    return ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"


def assign_manifest(obj: KubeObject, manifest: dict[str, Any]) -> None:
    """Copy a validated (defaulted) manifest's editable parts onto a row."""
    metadata = manifest["metadata"]
    obj.name = metadata["name"]
    obj.namespace = metadata.get("namespace") or "default"
    obj.labels = metadata.get("labels") or {}
    obj.annotations = metadata.get("annotations") or {}
    obj.spec = manifest.get("spec") or {}


def _queue_apply(obj: KubeObject) -> None:
    from clusters.sync.tasks import enqueue_apply

    transaction.on_commit(lambda: enqueue_apply(obj))


def save_portal_edit(obj: KubeObject, actor: Actor, *, made_from: str | None) -> KubeObject:
    """Save a portal-side change, audit it, and queue its apply to the cluster on commit.

    ``made_from`` is the :meth:`~clusters.models.KubeObject.edit_version` of the copy the edit was
    made from; an edit of an older copy, or of a row being deleted, raises
    :class:`clusters.web.edits.EditRefused` and saves nothing (see :func:`clusters.web.edits.lock_for_edit`).
    Snapshot clusters (demo data) have no API server: their rows are the truth and stay
    ``Synced``. Editing a row in ``Conflict`` is a resolution by edit: the cluster's side becomes
    the merge base and the edit is applied over it.
    """
    with transaction.atomic():
        stored = lock_for_edit(type(obj), obj.pk, made_from, obj.desired_document())
        before = stored.desired_document() if stored else {}
        if stored:
            _keep_cluster_bookkeeping(obj, stored)
        if stored and stored.sync_state == SyncState.CONFLICT:
            _adopt_cluster_side(obj, stored.conflict)
        snapshot = obj.cluster.auth_method == Cluster.AuthMethod.SNAPSHOT
        obj.sync_state = SyncState.SYNCED if snapshot else SyncState.PENDING_APPLY
        if snapshot:
            obj.set_base(obj.desired_document())
        obj.last_error = ""
        obj.save()
        changes = json_diff(before, obj.desired_document())
        if stored is None or changes:
            record(obj, AuditEntry.Action.UPDATED if stored else AuditEntry.Action.CREATED, actor, changes)
        if not snapshot:
            _queue_apply(obj)
    return obj


# What the sync engine and the cluster own on a row: a portal edit made from a copy loaded
# earlier (a form, an API request) must not write back stale values of these.
CLUSTER_OWNED_FIELDS = (
    "uid",
    "resource_version",
    "generation",
    "observed_generation",
    "status",
    "last_synced_spec",
    "last_synced_metadata",
    "conflict",
    "cluster_created_at",
)


def _keep_cluster_bookkeeping(obj: KubeObject, stored: KubeObject) -> None:
    for field in CLUSTER_OWNED_FIELDS:
        setattr(obj, field, getattr(stored, field))


def _adopt_cluster_side(obj: KubeObject, conflict: dict[str, Any] | None) -> None:
    """Make the cluster's side of a conflict the base, so the next apply overwrites it knowingly."""
    conflict = conflict or {}
    if conflict.get("cluster") is None:  # deleted in the cluster: applying re-creates it
        obj.uid = obj.resource_version = ""
        obj.last_synced_spec = obj.last_synced_metadata = None
    else:
        obj.set_base(conflict["cluster"])
        obj.resource_version = conflict.get("resourceVersion", obj.resource_version)
        obj.uid = conflict.get("uid") or obj.uid
    obj.conflict = None


class Resolution:
    TAKE_PORTAL = "portal"
    TAKE_CLUSTER = "cluster"
    CHOICES = (TAKE_PORTAL, TAKE_CLUSTER)


def resolve_conflict(obj: KubeObject, take: str, actor: Actor) -> KubeObject:
    """Settle a Conflict: keep the portal's values (applied over the cluster's) or take the cluster's."""
    if obj.sync_state != SyncState.CONFLICT:
        raise ManifestInvalid([FieldError("sync_state", obj.sync_state, "is not Conflict: nothing to resolve")])
    if take not in Resolution.CHOICES:
        raise ManifestInvalid([FieldError("take", take, "must be 'portal' or 'cluster'")])
    if take == Resolution.TAKE_PORTAL:
        with transaction.atomic():
            record(obj, AuditEntry.Action.RESOLVED, actor, message="kept the portal's values")
            return save_portal_edit(obj, actor, made_from=obj.edit_version())
    with transaction.atomic():
        lock_for_edit(type(obj), obj.pk, obj.edit_version(), obj.desired_document())
        conflict = obj.conflict or {}
        before = obj.desired_document()
        if conflict.get("cluster") is None:
            obj.sync_state = SyncState.DELETED_IN_CLUSTER
        else:
            obj.set_desired(conflict["cluster"])
            obj.set_base(conflict["cluster"])
            obj.resource_version = conflict.get("resourceVersion", obj.resource_version)
            obj.sync_state = SyncState.SYNCED
        obj.conflict = None
        obj.last_error = ""
        obj.save()
        record(
            obj,
            AuditEntry.Action.RESOLVED,
            actor,
            json_diff(before, obj.desired_document()),
            message="took the cluster's values",
        )
    return obj


object_removed = Signal()
"""Sent (``sender``: the kind's model, ``kind``, ``object_id``) when a row is removed in the portal, so
apps that keep data about objects by kind and id (right-sizing's history) drop it. Sent here rather
than as ``post_delete``: a ``post_delete`` receiver makes Django fetch every row of a cluster being
deleted instead of deleting them in SQL (10x slower and 5x the memory at 100,000 rows); a cluster's
own cascade covers its rows."""


def request_delete(obj: KubeObject, actor: Actor) -> bool:
    """Delete a row the cluster never had (or a snapshot row) now; otherwise mark it ``Deleting``
    and queue the cluster-side delete. Returns True when the row is gone."""
    if obj.cluster.auth_method == Cluster.AuthMethod.SNAPSHOT or not obj.uid:
        with transaction.atomic():
            record(obj, AuditEntry.Action.DELETED, actor, message="removed in the portal (the cluster never had it)")
            object_id = obj.pk
            obj.delete()
            object_removed.send(sender=type(obj), kind=obj.kube.kind, object_id=object_id)
        return True
    with transaction.atomic():
        obj.sync_state = SyncState.DELETING
        obj.save(update_fields=["sync_state"])
        record(obj, AuditEntry.Action.DELETE_REQUESTED, actor)
        _queue_apply(obj)
    return False
