"""The cluster decides too: a person's write is first tried on the cluster as that person.

For a cluster with ``impersonate_users`` on, every create, edit and delete a person makes (the
portal's pages, the API, the admin: all go through :mod:`clusters.web.services`) is sent to the API
server with ``dryRun=All`` as that person (:mod:`clusters.kube.impersonation`). The cluster's RBAC
answers; a 403 refuses the write with the cluster's own words
(:class:`~django.core.exceptions.PermissionDenied`: 403 in the API and on the page) and nothing is
saved. The portal's own grants (teams, model permissions) are checked before, as always.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from kubernetes.config import ConfigException

from clusters.kube.client import ClusterGateway, GatewayError, NotFoundError, translated
from clusters.kube.impersonation import identity_of
from clusters.models import Cluster, KubeObject
from clusters.sync.audit import Actor
from clusters.web.yaml_review import _dry_run


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
