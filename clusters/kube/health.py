"""What the portal says about an object's health, apart from its sync state.

"Synced" only says the portal's copy matches the cluster's; whether the object works is another
question: the controller's failure (``clusters.kube.failures.last_error``), or, for the embedded demo's
snapshot cluster, that no cluster is connected at all, so nothing in it will ever move. Both are
shown on the object's page instead of a spinner that never ends.
"""

from __future__ import annotations

from typing import Any

from clusters.kube.failures import last_error
from clusters.models import Cluster, KubeObject

NO_CLUSTER = (
    "No cluster connected: {cluster} is a snapshot of demo data with no API server behind it, so nothing "
    "here starts, scales or finishes. With Go installed, `make run` starts a live local cluster instead."
)


def connected(cluster: Cluster) -> bool:
    """True when an API server is behind the cluster (every kind of cluster but a snapshot)."""
    return cluster.auth_method != Cluster.AuthMethod.SNAPSHOT


def object_health(obj: KubeObject) -> dict[str, Any]:
    """``{"no_cluster": why nothing moves or "", "error": lastError or None}`` for the page."""
    return {
        "no_cluster": "" if connected(obj.cluster) else NO_CLUSTER.format(cluster=obj.cluster.name),
        "error": last_error(obj),
    }
