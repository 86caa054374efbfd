"""Whom the portal's requests to a cluster go as, for clusters with ``impersonate_users`` on.

A person's identity in the cluster is ``IMPERSONATE_USER_PREFIX`` + their user name
(``IMPERSONATE_OIDC_USER_PREFIX``, default ``oidc:``, for a person signed in through single
sign-on, whose name the provider chose: ``accounts.oidc.portal_username``), in one group per team
of theirs (``IMPERSONATE_GROUP_PREFIX`` + the team's name); ``ClusterGateway(...,
acting_for=...)`` sends it as ``Impersonate-User`` / ``Impersonate-Group`` headers. The apply of a
row goes as the person behind its newest change, so the portal's own credential needs only the
``impersonate`` verb for people's writes; what the sync engine or a controller writes goes as the
portal itself. (The check before a person's write is saved is ``clusters.web.impersonation``.)
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied

from clusters.models import AuditEntry, KubeObject

RESERVED_PREFIX = "system:"  # Kubernetes' own users and groups: never impersonated for a person


def identity_of(user: Any) -> tuple[str, list[str]]:
    """The user name and groups a person has in a cluster; PermissionDenied for a name Kubernetes
    reserves (``system:``...), whatever the prefixes are set to."""
    teams = sorted(user.teams.values_list("name", flat=True)) if hasattr(user, "teams") else []
    linked = hasattr(user, "external_identity")  # to the identity provider (accounts' ExternalIdentity)
    prefix = settings.IMPERSONATE_OIDC_USER_PREFIX if linked else settings.IMPERSONATE_USER_PREFIX
    name = prefix + user.get_username()
    if name.casefold().startswith(RESERVED_PREFIX):
        raise PermissionDenied(f"the cluster identity {name!r} is reserved to Kubernetes: it is never impersonated")
    return name, [settings.IMPERSONATE_GROUP_PREFIX + team for team in teams]


def acting_for(obj: KubeObject) -> tuple[str, list[str]] | None:
    """Whom an apply of ``obj`` impersonates: the person behind its newest change (None: the
    portal itself, also for clusters that do not impersonate)."""
    if not obj.cluster.impersonate_users:
        return None
    editor = latest_editor(obj)
    return identity_of(editor) if editor is not None else None


def latest_editor(obj: KubeObject) -> Any | None:
    """The person behind the row's newest change made in the portal (None: only the cluster and the
    sync engine changed it). Also whom a change proposed through Git is made for (``gitops``)."""
    entry = (
        AuditEntry.objects.filter(kind=obj.kube.kind, object_id=obj.pk, actor__isnull=False)
        .exclude(source__in=[AuditEntry.Source.CLUSTER, AuditEntry.Source.SYNC])
        .select_related("actor")
        .first()
    )
    return entry.actor if entry is not None else None
