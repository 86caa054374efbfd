"""Which (cluster, namespace) pairs a person's fleet views read: their teams' grants, within the
namespaces each cluster syncs, narrowed by the page's cluster and namespace filters.

A snapshot cluster has no API server behind it: it is named as such rather than read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accounts.models import ALL_NAMESPACES
from accounts.public import grants_of, is_unrestricted, visible_clusters
from clusters.models import Cluster


@dataclass(frozen=True)
class ClusterScope:
    """One cluster and its namespaces to list; ``[None]`` lists all of the cluster's namespaces."""

    cluster: Cluster
    namespaces: list[str | None]


def fleet_scopes(user: Any, cluster_name: str = "", namespace: str = "") -> tuple[list[ClusterScope], list[Cluster]]:
    """(clusters with an API server and the namespaces to read in each, snapshot clusters skipped)."""
    scopes, snapshots = [], []
    grants = grants_of(user, "view")
    clusters = visible_clusters(user).order_by("name")
    if cluster_name:
        clusters = clusters.filter(name=cluster_name)
    for cluster in clusters:
        if cluster.auth_method == Cluster.AuthMethod.SNAPSHOT:
            snapshots.append(cluster)
            continue
        granted = {ns for cluster_id, ns in grants if cluster_id in (None, cluster.pk)}
        everywhere = is_unrestricted(user) or ALL_NAMESPACES in granted
        synced = set(cluster.namespaces or [])
        if everywhere:
            names: list[str | None] = sorted(synced) if synced else [None]
        else:
            names = sorted(granted & synced if synced else granted)
        if namespace:
            names = [namespace] if namespace in names or (None in names) else []
        if names:
            scopes.append(ClusterScope(cluster, names))
    return scopes, snapshots
