"""The cluster decides too: a person's write is first tried on the cluster as that person.

For a cluster with ``impersonate_users`` on, every create, edit and delete a person makes (the
portal's pages, the API, the admin: all go through :mod:`clusters.services`) is sent to the API
server with ``dryRun=All`` as ``Impersonate-User: <user name>`` and one ``Impersonate-Group`` per
team of theirs. The cluster's RBAC answers; a 403 refuses the write with the cluster's own words
(:class:`~django.core.exceptions.PermissionDenied`: 403 in the API and on the page) and nothing is
saved. The portal's own grants (teams, model permissions) are checked before, as always.

The apply that follows (a Celery task, later) impersonates the person whose change it carries (the
row's newest audit entry made by a person), so the portal's own credential needs only the
``impersonate`` verb for people's writes; what the sync engine or a controller writes goes as the
portal itself.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from kubernetes.config import ConfigException

from clusters.audit import Actor
from clusters.gateway import ClusterGateway, GatewayError, NotFoundError, translated
from clusters.models import AuditEntry, Cluster, KubeObject
from clusters.yaml_review import _dry_run


def identity_of(user: Any) -> tuple[str, list[str]]:
    """The user name and groups a person has in a cluster: ``IMPERSONATE_USER_PREFIX`` + user
    name, and ``IMPERSONATE_GROUP_PREFIX`` + the name of each of their teams."""
    teams = sorted(user.teams.values_list("name", flat=True)) if hasattr(user, "teams") else []
    return settings.IMPERSONATE_USER_PREFIX + user.get_username(), [
        settings.IMPERSONATE_GROUP_PREFIX + team for team in teams
    ]


def acting_for(obj: KubeObject) -> tuple[str, list[str]] | None:
    """Whom an apply of ``obj`` impersonates: the person behind its newest change (None: the
    portal itself, also for clusters that do not impersonate)."""
    if not obj.cluster.impersonate_users:
        return None
    entry = (
        AuditEntry.objects.filter(kind=obj.kube.kind, object_id=obj.pk, actor__isnull=False)
        .exclude(source__in=[AuditEntry.Source.CLUSTER, AuditEntry.Source.SYNC])
        .select_related("actor")
        .first()
    )
    return identity_of(entry.actor) if entry is not None else None


def _dry_run_delete(gateway: ClusterGateway, obj: KubeObject) -> None:
    kind = obj.kube
    with translated():
        gateway.custom.delete_namespaced_custom_object(
            kind.group, kind.version, obj.namespace, kind.plural, obj.name, dry_run="All",
            _request_timeout=gateway.timeout,
        )  # fmt: skip


def check_as_person(obj: KubeObject, actor: Actor, *, deleting: bool = False) -> None:
    """Raises PermissionDenied with the cluster's message when the cluster forbids the person this
    write; any other answer (allowed, invalid, unreachable) leaves the decision to the apply."""
    cluster = obj.cluster
    if not cluster.impersonate_users or actor.user is None or cluster.auth_method == Cluster.AuthMethod.SNAPSHOT:
        return
    try:
        gateway = ClusterGateway(cluster, acting_for=identity_of(actor.user))
    except (GatewayError, ConfigException):
        return
    try:
        if deleting:
            _dry_run_delete(gateway, obj)
        else:
            stored = type(obj).objects.filter(pk=obj.pk).first() if obj.pk else None
            _dry_run(gateway, stored, obj.to_manifest())
    except NotFoundError:
        return
    except GatewayError as error:
        if error.status == 403:
            raise PermissionDenied(f"cluster {cluster.name} refused this for you: {error}") from None
    finally:
        gateway.close()
