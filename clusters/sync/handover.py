"""Handing a kind back: when a cluster stops letting the portal manage a kind (``manage`` ->
``mirror``), or the cluster is removed from the portal, the portal's finalizer comes off the
objects it put it on. Left there, it would hold every later delete of those objects forever: no
process of the portal would ever run the cleanup that removes it.
"""

from __future__ import annotations

import logging
from typing import Any

from clusters.controller_registry import controller_finalizer
from clusters.kinds import KindInfo, all_models
from clusters.kube.client import ClusterGateway, ConflictError, NotFoundError
from clusters.models import Cluster, SyncState

logger = logging.getLogger(__name__)


def release_finalizers(cluster: Cluster, kinds: list[str], gateway: ClusterGateway | None = None) -> int:
    """Remove the portal's finalizer of each kind from that kind's objects in the cluster; returns
    how many objects were changed. Each patch carries the object's resourceVersion (a concurrent
    change of the finalizer list is re-read, not overwritten)."""
    own = gateway is None
    gateway = gateway or ClusterGateway(cluster)
    released = 0
    try:
        for model in all_models():
            finalizer = controller_finalizer(model.kube.kind)
            if model.kube.kind not in kinds or finalizer is None:
                continue
            rows = model.objects.filter(cluster=cluster).exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
            for namespace, name in rows.values_list("namespace", "name"):
                released += remove_finalizer(gateway, model.kube, namespace, name, finalizer)
    finally:
        if own:
            gateway.close()
    return released


def remove_finalizer(
    gateway: ClusterGateway, kind: KindInfo, namespace: str, name: str, finalizer: str,
    current: dict[str, Any] | None = None,
) -> bool:
    """Take ``finalizer`` off the object (``current`` when the caller just read it), as a merge
    patch carrying its resourceVersion; on 409 read again and retry. True when it was removed."""
    for _ in range(5):
        try:
            current = current or gateway.get(kind, namespace, name)
        except NotFoundError:
            return False
        finalizers = current["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            return False
        patch = {"metadata": {"finalizers": [f for f in finalizers if f != finalizer],
                              "resourceVersion": current["metadata"]["resourceVersion"]}}
        try:
            gateway.patch(kind, namespace, name, patch)
            return True
        except ConflictError:
            current = None
    logger.warning("%s %s/%s: the finalizer list kept changing; %s left in place", kind.kind, namespace, name,
                   finalizer)
    return False
