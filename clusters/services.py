"""What happens when a person or a script changes a mirrored object in the portal.

Every write path (API, ``/api/apply/``, admin, forms) calls these functions, so marking rows
for apply and deleting follow one rule.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from clusters.models import Cluster, KubeObject, SyncState
from clusters.validation import FieldError, ManifestInvalid


def resolve_cluster(name: str | None) -> Cluster:
    """The named cluster, or the only one when no name is given; otherwise a clear error."""
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


def save_portal_edit(obj: KubeObject) -> KubeObject:
    """Save a portal-side change and mark it for apply to the cluster.

    Snapshot clusters (demo data) have no API server, so their rows are the truth and stay
    ``Synced``.
    """
    if obj.cluster.auth_method == Cluster.AuthMethod.SNAPSHOT:
        obj.sync_state = SyncState.SYNCED
        obj.last_synced_spec = obj.spec
    else:
        obj.sync_state = SyncState.PENDING_APPLY
    obj.last_error = ""
    with transaction.atomic():
        obj.save()
    return obj


def request_delete(obj: KubeObject) -> bool:
    """Delete a row the cluster never had (or a snapshot row) now; otherwise mark it ``Deleting``.

    Returns True when the row is gone.
    """
    if obj.cluster.auth_method == Cluster.AuthMethod.SNAPSHOT or not obj.uid:
        obj.delete()
        return True
    obj.sync_state = SyncState.DELETING
    obj.save(update_fields=["sync_state"])
    return False
