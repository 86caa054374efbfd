"""Portal -> cluster: apply one row's desired state with optimistic concurrency; delete with preconditions.

Creates answer 201. Updates are JSON merge patches from the merge base to the portal's intent,
carrying the stored ``metadata.resourceVersion``, so a stale write is refused (409) and nothing
the portal does not mirror (finalizers, owner references) is touched. On 409 the row is merged
three ways with the cluster's object (``clusters.sync.merge``): disjoint changes are kept and retried;
the same field changed differently becomes ``Conflict`` for a person to resolve.

Every write path ends here, so this is where a row run from Git leaves the way to the cluster: the
change route (``clusters.change_routes``, gitops' pull requests) takes it instead (docs/gitops.md).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from clusters.change_routes import ChangeRoute, change_route
from clusters.kube.client import ClusterGateway, ConflictError, NotFoundError, PermanentError, TransientError
from clusters.kube.impersonation import acting_for
from clusters.models import AuditEntry, Cluster, KubeObject, SyncState, cluster_document
from clusters.sync import stats as sync_stats
from clusters.sync.audit import SYNC_ENGINE, decided_changes, json_diff, record
from clusters.sync.inbound import take_cluster_bookkeeping
from clusters.sync.merge import merge_patch_between, three_way_merge
from clusters.validation.manifests import validate_manifest
from clusters.validation.schemas import ManifestInvalid

MAX_MERGE_ROUNDS = 5


class Outcome(enum.StrEnum):
    APPLIED = "applied"
    CONFLICT = "conflict"
    ERROR = "error"
    DELETING = "deleting"
    DELETED = "deleted"
    NOTHING_TO_DO = "nothing to do"
    PROPOSED = "proposed"


class StillConflicting(TransientError):
    """Merged and retried MAX_MERGE_ROUNDS times and still stale: the cluster is busy; retry later."""


def _body_for_create(obj: KubeObject) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": obj.name, "namespace": obj.namespace}
    if obj.labels:
        metadata["labels"] = obj.labels
    if obj.annotations:
        metadata["annotations"] = obj.annotations
    return {"apiVersion": obj.kube.api_version, "kind": obj.kube.kind, "metadata": metadata, "spec": obj.spec}


def _patch_for_update(obj: KubeObject) -> dict[str, Any]:
    base = obj.base_document() or {"spec": {}, "labels": {}, "annotations": {}}
    desired = obj.desired_document()
    metadata: dict[str, Any] = {"resourceVersion": obj.resource_version}
    for key in ("labels", "annotations"):
        change = merge_patch_between(base[key], desired[key])
        if change:
            metadata[key] = change
    return {"metadata": metadata, "spec": merge_patch_between(base["spec"], desired["spec"])}


def apply_object(model: type[KubeObject], pk: int, gateway: ClusterGateway | None = None) -> Outcome:
    """Bring the cluster to the row's intent (or delete). Idempotent: safe to run again at any time.

    Raises the gateway's TransientError for the caller (the Celery task) to retry with backoff.
    """
    obj = model.objects.select_related("cluster").filter(pk=pk).first()
    if obj is None or obj.cluster.auth_method == Cluster.AuthMethod.SNAPSHOT:
        return Outcome.NOTHING_TO_DO
    if obj.sync_state not in (SyncState.PENDING_APPLY, SyncState.DELETING):
        return Outcome.NOTHING_TO_DO
    route = change_route()
    if route is not None and route.diverts(obj):
        return _propose(route, obj)
    own_gateway = gateway is None
    if own_gateway:
        try:
            person = acting_for(obj)
        except PermissionDenied as refused:  # a person Kubernetes reserves the name of: never sent as them
            return _fail(obj, str(refused))
        gateway = ClusterGateway(obj.cluster, acting_for=person)
    try:
        if obj.sync_state == SyncState.DELETING:
            return _delete(gateway, obj)
        return _apply(gateway, obj)
    except PermanentError as error:
        sync_stats.apply_failed(obj.cluster, model.kube.kind, error.status)
        return _fail(obj, str(error))
    except TransientError as error:  # retried by the task; counted here, where the code is known
        sync_stats.apply_failed(obj.cluster, model.kube.kind, error.status)
        raise
    finally:
        if own_gateway:
            gateway.close()


def _propose(route: ChangeRoute, obj: KubeObject) -> Outcome:
    """The object's changes go through Git (``clusters.change_routes``): nothing is written to the
    cluster; the route proposes the intent (a pull request) and the GitOps engine applies it."""
    try:
        route.propose(obj)
    except PermanentError as error:
        return _fail(obj, str(error))
    return Outcome.PROPOSED


def _apply(gateway: ClusterGateway, obj: KubeObject) -> Outcome:
    kind = obj.kube
    for _ in range(MAX_MERGE_ROUNDS):
        sent = obj.desired_document()
        sent_at = timezone.now()
        try:
            if obj.uid:
                result = gateway.patch(kind, obj.namespace, obj.name, _patch_for_update(obj))
            else:
                result = gateway.create(kind, obj.namespace, _body_for_create(obj))
        except (ConflictError, NotFoundError) as error:
            if isinstance(error, NotFoundError) and not obj.uid:
                # 404 on create: the namespace does not exist; retrying will not help.
                raise PermanentError(str(error), error.status, error.body) from None
            current = _read(gateway, obj)
            if current is None:
                return _conflict(obj, None, [], "deleted in the cluster while edited in the portal")
            merged = _merge(obj, current)
            if merged is None:
                return Outcome.NOTHING_TO_DO  # the row left PendingApply meanwhile (e.g. a delete was asked)
            if not merged:
                return Outcome.CONFLICT
            obj = merged
            continue
        outcome = _record_applied(obj, result, sent, sent_at)
        if outcome is not None:
            return outcome
        obj = type(obj).objects.select_related("cluster").get(pk=obj.pk)
    raise StillConflicting(f"still stale after {MAX_MERGE_ROUNDS} merges", 409)


def _read(gateway: ClusterGateway, obj: KubeObject) -> dict[str, Any] | None:
    """The cluster's object, or None when it is gone. A GET never legitimately conflicts; if a
    proxy says so anyway, it is treated as transient and the whole apply is retried."""
    try:
        return gateway.get(obj.kube, obj.namespace, obj.name)
    except NotFoundError:
        return None
    except ConflictError as error:
        raise TransientError(str(error), error.status, error.body) from None


def _merge(obj: KubeObject, current: dict[str, Any]) -> KubeObject | bool | None:
    """Three-way merge with the cluster's object.

    Returns the merged row (saved, still PendingApply) to retry with, False when the row is now in
    Conflict, or None when the row is no longer PendingApply (another intent, such as a delete,
    took over and its own task handles it).
    """
    theirs = cluster_document(current)
    portal = obj.desired_document()
    result = three_way_merge(obj.base_document(), portal, theirs)
    if result.conflicts:
        _conflict(
            obj,
            current,
            [conflict.as_dict() for conflict in result.conflicts],
            f"{len(result.conflicts)} field(s) changed differently in the portal and the cluster",
            merged=(portal, result.merged),
        )
        return False
    merged_manifest = {
        **_body_for_create(obj),
        "spec": result.merged["spec"],
        "metadata": {
            "name": obj.name,
            "namespace": obj.namespace,
            "labels": result.merged["labels"],
            "annotations": result.merged["annotations"],
        },
    }
    try:
        validate_manifest(type(obj), merged_manifest)
    except ManifestInvalid as invalid:
        _conflict(obj, current, [], f"both sides' changes together are invalid: {invalid}")
        return False
    with transaction.atomic():
        locked = type(obj).objects.select_for_update().select_related("cluster").get(pk=obj.pk)
        if locked.sync_state != SyncState.PENDING_APPLY:
            return None
        if locked.desired_document() != portal:
            return locked  # edited again meanwhile: merge that edit next round
        locked.set_desired(result.merged)
        locked.set_base(theirs)
        take_cluster_bookkeeping(locked, current)
        locked.take_cluster_status(current.get("status"))
        locked.save()
        record(
            locked,
            AuditEntry.Action.MERGED,
            SYNC_ENGINE,
            decided_changes(type(locked), json_diff(portal, result.merged)),
            message=f"merged with the cluster's resourceVersion {locked.resource_version}",
        )
    return locked


def _conflict(
    obj: KubeObject,
    current: dict[str, Any] | None,
    fields: list[dict[str, Any]],
    message: str,
    merged: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> Outcome:
    """Hold the row in Conflict. With ``merged`` = (portal document merged from, merge result), the
    row takes the result: the cluster's disjoint changes, the portal's values where they conflict,
    so resolving by keeping the portal or by editing never undoes a cluster change nobody disputed."""
    with transaction.atomic():
        locked = type(obj).objects.select_for_update().get(pk=obj.pk)
        if locked.sync_state == SyncState.DELETING:
            return Outcome.NOTHING_TO_DO  # a delete was asked meanwhile: it wins over the edit
        if merged and locked.desired_document() == merged[0]:
            locked.set_desired(merged[1])
        locked.sync_state = SyncState.CONFLICT
        locked.conflict = {
            "resourceVersion": (current or {}).get("metadata", {}).get("resourceVersion", ""),
            "uid": (current or {}).get("metadata", {}).get("uid", ""),
            "cluster": cluster_document(current) if current else None,
            "fields": fields,
            "message": message,
        }
        locked.last_error = message
        locked.save()
        record(locked, AuditEntry.Action.CONFLICT, SYNC_ENGINE, message=message)
    return Outcome.CONFLICT


def _record_applied(obj: KubeObject, result: dict[str, Any], sent: dict[str, Any], sent_at: datetime) -> Outcome | None:
    """Store the cluster's answer to a write sent at ``sent_at``, unless the row changed meanwhile.

    A row written while the write was in flight (a watch event, a resync, an edit, a delete) may
    already hold something newer than this answer, and resourceVersions cannot be ordered: the
    answer is then not stored. If the row still waits for exactly this intent, None asks for
    another round, whose conditional write meets the newest object (409) and merges with it;
    otherwise whoever changed the row carries on (the watcher recorded the cluster's object, or
    the newer intent has its own task).
    """
    with transaction.atomic():
        locked = type(obj).objects.select_for_update().get(pk=obj.pk)
        changes = decided_changes(type(locked), json_diff(locked.base_document() or {}, sent))
        if locked.updated_at >= sent_at:
            if locked.sync_state == SyncState.PENDING_APPLY and locked.desired_document() == sent:
                return None
            if (
                locked.sync_state == SyncState.PENDING_APPLY
                and (locked.uid, locked.resource_version) == (obj.uid, obj.resource_version)
            ):
                # Only a newer portal edit came meanwhile; no newer cluster state was recorded, so this
                # answer is the newest the portal knows of the cluster: it becomes the base the newer
                # edit merges from (else that edit would meet its own earlier apply as a "conflict").
                take_cluster_bookkeeping(locked, result)
                locked.set_base(cluster_document(result))
                locked.take_cluster_status(result.get("status") or locked.status)
                locked.save()
                record(locked, AuditEntry.Action.APPLIED, SYNC_ENGINE, changes,
                       message=f"resourceVersion {locked.resource_version} (a newer edit follows)")
                return Outcome.APPLIED
            message = f"resourceVersion {result['metadata'].get('resourceVersion', '')} (the row changed meanwhile)"
            record(locked, AuditEntry.Action.APPLIED, SYNC_ENGINE, changes, message=message)
            return Outcome.APPLIED
        applied = cluster_document(result)
        take_cluster_bookkeeping(locked, result)
        locked.take_cluster_status(result.get("status") or locked.status)
        locked.set_base(applied)
        if locked.desired_document() == sent and locked.sync_state == SyncState.PENDING_APPLY:
            locked.set_desired(applied)  # takes the server's defaults, if any
            locked.sync_state = SyncState.SYNCED
            locked.last_error = ""
            locked.conflict = None
        locked.save()
        record(
            locked,
            AuditEntry.Action.APPLIED,
            SYNC_ENGINE,
            changes,
            message=f"resourceVersion {locked.resource_version}",
        )
    return Outcome.APPLIED


def _delete(gateway: ClusterGateway, obj: KubeObject) -> Outcome:
    try:
        gateway.delete(obj.kube, obj.namespace, obj.name, obj.uid or None)
        # 200 (gone) and 202 (finalizers pending) look alike through the client (it maps no 202):
        # read back to know.
        remaining = _read(gateway, obj)
    except NotFoundError:
        remaining = None
    except ConflictError:
        remaining = None  # the uid precondition failed: our object is gone, another one took the name
    if remaining is not None and (not obj.uid or remaining["metadata"].get("uid") == obj.uid):
        return Outcome.DELETING  # the watcher sees the finalizers go and the final DELETED event
    with transaction.atomic():
        locked = type(obj).objects.select_for_update().get(pk=obj.pk)
        locked.sync_state = SyncState.DELETED_IN_CLUSTER
        locked.uid = locked.resource_version = ""
        locked.save()
        record(locked, AuditEntry.Action.DELETED, SYNC_ENGINE)
    return Outcome.DELETED


def _fail(obj: KubeObject, message: str) -> Outcome:
    """Permanent failure: keep the user's spec, show the API server's own message."""
    with transaction.atomic():
        locked = type(obj).objects.select_for_update().get(pk=obj.pk)
        locked.sync_state = SyncState.ERROR
        locked.last_error = message
        locked.save()
        record(locked, AuditEntry.Action.ERROR, SYNC_ENGINE, message=message)
    return Outcome.ERROR
