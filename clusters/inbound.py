"""Record what a cluster says an object is: the one inbound write path (demo snapshot, resync, watch)."""

from __future__ import annotations

from typing import Any

from django.utils.dateparse import parse_datetime

from clusters.models import Cluster, KubeObject, SyncState


def upsert_from_cluster(model: type[KubeObject], cluster: Cluster, manifest: dict[str, Any]) -> KubeObject:
    """Make the row equal to the cluster's object; the cluster's spec becomes the merge base.

    Rows with a portal edit still waiting (``PendingApply``) or a ``Conflict`` keep the portal's
    spec: only status, metadata bookkeeping and the base move, so no edit is silently lost.
    """
    metadata = manifest["metadata"]
    obj = model.objects.filter(
        cluster=cluster, namespace=metadata.get("namespace", "default"), name=metadata["name"]
    ).first() or model(cluster=cluster)
    keeps_portal_spec = obj.pk is not None and obj.sync_state in (SyncState.PENDING_APPLY, SyncState.CONFLICT)
    obj.namespace = metadata.get("namespace", "default")
    obj.name = metadata["name"]
    obj.uid = metadata.get("uid", "")
    obj.resource_version = metadata.get("resourceVersion", "")
    obj.generation = metadata.get("generation")
    obj.status = manifest.get("status") or {}
    obj.observed_generation = obj.status.get("observedGeneration")
    created = metadata.get("creationTimestamp")
    obj.cluster_created_at = parse_datetime(created) if created else None
    obj.last_synced_spec = manifest.get("spec") or {}
    if not keeps_portal_spec:
        obj.labels = metadata.get("labels") or {}
        obj.annotations = metadata.get("annotations") or {}
        obj.spec = manifest.get("spec") or {}
        obj.sync_state = SyncState.DELETING if metadata.get("deletionTimestamp") else SyncState.SYNCED
        obj.last_error = ""
    obj.save()
    return obj
