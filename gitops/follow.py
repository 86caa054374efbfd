"""Following the pull requests the portal opened (Celery, every ``GITOPS_FOLLOW_SECONDS``).

An open pull request that merged becomes ``merged``; one closed without merging drops its change
(the row takes the cluster's object again, or goes if the cluster never had it). A merged change
is ``applied`` once the cluster holds exactly what it wrote (the GitOps engine applied it): the
row then takes the cluster's object, as the watcher does for a direct apply, and its history
names the pull request and the merge commit. The GitOps engine stamps its own labels on what it
applies (``gitops.manifests.ENGINE_METADATA_PREFIXES``), so the cluster's object is compared
cleaned as Git holds it, read from the cluster (a read, never a write).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, GatewayError, NotFoundError
from clusters.models import AuditEntry, KubeObject, SyncState, cluster_document
from clusters.sync.audit import SYNC_ENGINE, json_diff, record
from clusters.sync.inbound import take_cluster_bookkeeping
from clusters.web.services import request_delete
from gitops.forge import Forge, forge_for
from gitops.manifests import blob_sha, cleaned, git_manifest, render
from gitops.models import ChangeMode, GitFile, ProposedChange
from gitops.route import PENDING
from gitops.scopes import mode_for

logger = logging.getLogger(__name__)


# Where a row stands while a change of its is on its way (Error: the forge refused an edit of it).
WAITING = (SyncState.PENDING_APPLY, SyncState.DELETING, SyncState.ERROR)


def follow_pull_requests() -> int:
    """One round over every pending change; returns how many changed state."""
    forges: dict[int, Forge] = {}
    moved = 0
    for change in ProposedChange.objects.filter(state__in=PENDING).select_related("cluster"):
        mode = mode_for(change.cluster_id, change.namespace)
        if mode is None or mode.mode != ChangeMode.Mode.GIT:
            continue  # back to direct mode: the pull request is no longer the portal's business
        try:
            if change.state == ProposedChange.State.OPEN:
                moved += _follow_open(forges.setdefault(mode.pk, forge_for(mode)), change)
            if change.state == ProposedChange.State.MERGED:
                moved += _settle_merged(change)
        except GatewayError as error:  # the forge or the cluster is away: the next round asks again
            logger.warning("following %s: %s", change, error)
    return moved


def _follow_open(forge: Forge, change: ProposedChange) -> int:
    pull = forge.pull_request(change.number)
    if pull.merged:
        change.state = ProposedChange.State.MERGED
        change.merge_commit = pull.merge_commit
        change.merged_at = pull.merged_at or timezone.now()
        change.save()
        return 1
    if pull.state == "closed":
        _drop(change)
        return 1
    return 0


def _model_of(kind: str) -> type[KubeObject]:
    return next(model for model in all_models() if model.kube.kind == kind)


def _cluster_object(row: KubeObject) -> dict[str, Any] | None:
    gateway = ClusterGateway(row.cluster)
    try:
        return gateway.get(row.kube, row.namespace, row.name)
    except NotFoundError:
        return None
    finally:
        gateway.close()


def _settle_merged(change: ProposedChange) -> int:
    """Mark the merged change applied once the cluster holds it."""
    model = _model_of(change.kind)
    row = model.objects.select_related("cluster").filter(pk=change.object_id).first()
    current = _cluster_object(row) if row is not None else None
    if change.manifest is None:
        holds = current is None  # a delete: the engine pruned the object (the watcher records that)
    else:
        holds = current is not None and cleaned(model, current, change.namespace, change.name) == change.manifest
    if not holds:
        return 0
    now = timezone.now()
    with transaction.atomic():
        if row is not None and current is not None:
            locked = model.objects.select_for_update().select_related("cluster").get(pk=row.pk)
            wanted = git_manifest(model, locked.desired_document(), locked.namespace, locked.name)
            if locked.sync_state == SyncState.PENDING_APPLY and wanted == change.manifest:
                _take_cluster(locked, current)
            record(locked, AuditEntry.Action.APPLIED, SYNC_ENGINE, message=_applied_words(change, now))
        change.state = ProposedChange.State.APPLIED
        change.finished_at = now
        change.save()
        GitFile.objects.update_or_create(
            kind=change.kind, object_id=change.object_id,
            defaults={"cluster_id": change.cluster_id, "path": change.path, "drift": [], "checked_at": now,
                      "blob_sha": blob_sha(render(change.manifest)) if change.manifest else ""},
        )  # fmt: skip
    return 1


def _applied_words(change: ProposedChange, now: datetime) -> str:
    after = f"the GitOps engine applied it {(now - change.merged_at).total_seconds():.1f} s after the merge"
    if change.number is None:
        return f"Git already held this change; {after}"
    return f"pull request #{change.number} merged as {change.merge_commit[:12]}; {after}"


def _take_cluster(row: KubeObject, current: dict[str, Any]) -> None:
    """The row becomes the cluster's object, agreed by both sides (as the watcher's ``Synced``)."""
    document = cluster_document(current)
    take_cluster_bookkeeping(row, current)
    row.take_cluster_status(current.get("status"))
    row.set_desired(document)
    row.set_base(document)
    row.sync_state = SyncState.SYNCED
    row.last_error = ""
    row.conflict = None
    row.save()


def _drop(change: ProposedChange) -> None:
    """Closed without merging: the change is dropped, and the row no longer wants it."""
    model = _model_of(change.kind)
    with transaction.atomic():
        change.state = ProposedChange.State.CLOSED
        change.finished_at = timezone.now()
        change.save()
        row = model.objects.select_for_update().select_related("cluster").filter(pk=change.object_id).first()
        others = ProposedChange.objects.filter(
            kind=change.kind, object_id=change.object_id, state=ProposedChange.State.OPEN
        ).exists()
        if row is None or others or row.sync_state not in WAITING:
            return
        current = _cluster_object(row) if row.uid else None
        message = f"pull request #{change.number} closed without merging: its change was dropped"
        if current is None:
            record(row, AuditEntry.Action.UPDATED, SYNC_ENGINE, message=message)
            request_delete(row, SYNC_ENGINE)  # the cluster never had it: it goes from the portal too
            return
        before = row.desired_document()
        _take_cluster(row, current)
        record(row, AuditEntry.Action.UPDATED, SYNC_ENGINE, json_diff(before, row.desired_document()), message=message)
