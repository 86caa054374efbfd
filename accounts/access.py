"""The one restriction every page and API endpoint applies: what a user may see or act on.

Modelled on NetBox's ``RestrictedQuerySet.restrict(user, action)``: a queryset of namespaced rows
goes in, the rows of the user's teams' namespaces come out. Staff see and act everywhere;
anonymous and inactive users get nothing. Django model permissions still say *which kinds* a user
may add or change; this says *where*.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from django.db.models import Q, QuerySet

from accounts.models import ALL_NAMESPACES, NamespaceGrant

VIEW, ADD, CHANGE, DELETE = "view", "add", "change", "delete"
ACTIONS = (VIEW, ADD, CHANGE, DELETE)
# A POST reaching an existing row (resolve, wake, apply a recommendation) changes it; creating a row
# is checked with ADD through can_act_in, as the row does not exist yet.
ACTION_BY_METHOD = {
    "GET": VIEW,
    "HEAD": VIEW,
    "OPTIONS": VIEW,
    "POST": CHANGE,
    "PUT": CHANGE,
    "PATCH": CHANGE,
    "DELETE": DELETE,
}

Scope = tuple[int | None, str]
"""(cluster id or None for every cluster, namespace or ``*``)."""


def is_unrestricted(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def grants_of(user: Any, action: str) -> list[Scope]:
    """The scopes the user's teams grant for ``action``; cached on the user for the request."""
    if action not in ACTIONS:
        raise ValueError(f"action {action!r} must be one of {', '.join(ACTIONS)}")
    if user is None or not user.is_authenticated or not user.is_active:
        return []
    cache = user.__dict__.setdefault("_namespace_grants", {})
    write = action != VIEW
    if write not in cache:
        grants = NamespaceGrant.objects.filter(team__members=user)
        if write:
            grants = grants.filter(access=NamespaceGrant.Access.EDIT)
        cache[write] = sorted(set(grants.values_list("cluster_id", "namespace")), key=str)
    return cache[write]


def _condition(scopes: list[Scope], prefix: str) -> Q | None:
    """OR of the scopes as a Q on ``<prefix>cluster_id`` and ``<prefix>namespace``, one term per
    cluster (its namespaces as one ``IN``); None for no scope. A pair of lookups per namespace made
    a member of ten namespaces pay for compiling twenty lookups on every query of a page, six to
    eight queries a page (about twice staff's CPU, issue 41), and left PostgreSQL an OR to plan
    where one index condition does."""
    namespaces: dict[int | None, set[str]] = {}
    for cluster_id, namespace in scopes:
        namespaces.setdefault(cluster_id, set()).add(namespace)
    condition: Q | None = None
    for cluster_id, names in sorted(namespaces.items(), key=str):
        part = Q() if cluster_id is None else Q(**{f"{prefix}cluster_id": cluster_id})
        if ALL_NAMESPACES not in names:
            part &= Q(**{f"{prefix}namespace__in": sorted(names)})
        condition = part if condition is None else condition | part
    return condition


def restrict(queryset: QuerySet, user: Any, action: str = VIEW, prefix: str = "") -> QuerySet:
    """Only the rows of ``queryset`` in namespaces the user may ``action`` in.

    ``prefix`` reaches namespaced rows through a relation (``"model__"`` for right-sizing
    observations). Unknown actions raise rather than silently allowing.
    """
    if is_unrestricted(user):
        if action not in ACTIONS:
            raise ValueError(f"action {action!r} must be one of {', '.join(ACTIONS)}")
        return queryset
    condition = _condition(grants_of(user, action), prefix)
    return queryset.none() if condition is None else queryset.filter(condition)


def can_act_in(user: Any, cluster_id: int, namespace: str, action: str) -> bool:
    """Whether the user may ``action`` in one namespace (for objects that do not exist yet)."""
    return is_unrestricted(user) or any(
        granted in (None, cluster_id) and scope_ns in (ALL_NAMESPACES, namespace)
        for granted, scope_ns in grants_of(user, action)
    )


def everywhere(cluster_id: int, namespace: str) -> bool:
    """The predicate of a user who may act in every namespace: callers may test for it (``is``) and
    skip filtering what it would keep whole."""
    return True


def namespace_predicate(user: Any, action: str = VIEW) -> Callable[[int, str], bool]:
    """``visible(cluster_id, namespace)`` for plain records (scheduler holdings) that are not querysets;
    :func:`everywhere` for a user who may act in every namespace."""
    if is_unrestricted(user):
        return everywhere
    scopes = grants_of(user, action)

    @cache  # a page asks about thousands of records in a few namespaces: each is answered once
    def visible(cluster_id: int, namespace: str) -> bool:
        return any(
            granted in (None, cluster_id) and scope_ns in (ALL_NAMESPACES, namespace) for granted, scope_ns in scopes
        )

    return visible


def unreadable_references(user: Any, cluster_id: int, model: Any, manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Field errors for namespaces a manifest points at (e.g. a run's configRef) that the user may not read."""
    return {
        path: [f"{path}: {namespace!r} is not a namespace your teams may read"]
        for path, namespace in model.referenced_namespaces(manifest).items()
        if not can_act_in(user, cluster_id, namespace, VIEW)
    }


def visible_cluster_ids(user: Any, action: str = VIEW) -> set[int] | None:
    """Clusters where the user's teams hold a grant for ``action``; None means every cluster."""
    if is_unrestricted(user):
        return None
    scopes = grants_of(user, action)
    if any(cluster_id is None for cluster_id, _ in scopes):
        return None
    return {cluster_id for cluster_id, _ in scopes}


def visible_clusters(user: Any) -> QuerySet:
    """Clusters the user's teams have a namespace in (every one for staff or an every-cluster grant).

    Node pools, their budgets and node names belong to a cluster: only these clusters' are shown.
    """
    ids = visible_cluster_ids(user)
    clusters = NamespaceGrant.cluster.field.related_model.objects  # Cluster's, by the grants' relation
    return clusters.all() if ids is None else clusters.filter(pk__in=ids)
