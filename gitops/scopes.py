"""Which change mode holds for an object, and where its file lives."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from clusters.models import KubeObject
from gitops.models import ChangeMode


def mode_for(cluster_id: int, namespace: str) -> ChangeMode | None:
    """The namespace's own change mode, else the cluster's, else None (direct, as always)."""
    return (
        ChangeMode.objects.filter(cluster_id=cluster_id, namespace__in=[namespace, ""])
        .select_related("cluster")
        .order_by("-namespace")
        .first()
    )


def in_git(obj: KubeObject) -> ChangeMode | None:
    """The object's change mode when it is ``git``; None when its edits go to the cluster."""
    mode = mode_for(obj.cluster_id, obj.namespace)
    return mode if mode is not None and mode.mode == ChangeMode.Mode.GIT else None


def path_for(mode: ChangeMode, obj: KubeObject) -> str:
    """The object's file in the repository, by the kind's layout. The layout's rules
    (``ChangeMode.clean``) and the names' (RFC 1123) keep each namespace's files apart."""
    path = mode.layout_for(obj.kube.kind)
    for placeholder, value in (
        ("<cluster>", mode.cluster.name),  # the object's cluster, read once with the mode
        ("<namespace>", obj.namespace),
        ("<kind>", obj.kube.kind.lower()),
        ("<name>", obj.name),
    ):
        path = path.replace(placeholder, value)
    return path


def objects_in(mode: ChangeMode, model: type[KubeObject]) -> QuerySet:
    """The rows of ``model`` the change mode covers: its namespace, or its cluster's namespaces
    that have no change mode of their own."""
    rows = model.objects.filter(cluster_id=mode.cluster_id).select_related("cluster")
    if mode.namespace:
        return rows.filter(namespace=mode.namespace)
    own = ChangeMode.objects.filter(cluster_id=mode.cluster_id).exclude(namespace="").values("namespace")
    return rows.exclude(Q(namespace__in=own))
