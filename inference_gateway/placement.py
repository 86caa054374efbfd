"""Where a model may answer, and under which id: the rules every write path and the gateway apply.

**Backends** (``spec.backendUrl``). A backend is reached over http or https only, and is either

- a Service of the cluster (``svc``, ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.cluster.local``) in a
  namespace the model's team may use: the model's own, one where a team owning the model's
  namespace holds a grant, or one staff mark as shared (:class:`~inference_gateway.models.SharedNamespace`);
- or a host outside the cluster that staff put on that cluster's allow-list
  (:class:`~inference_gateway.models.BackendHost`).

Never, whatever staff listed: link-local addresses (169.254.0.0/16, fe80::/10), the cloud metadata
addresses, the unspecified address, the portal's and gateway's own addresses (this host's, and
``GATEWAY_OWN_HOSTS`` / ``ALLOWED_HOSTS``), and loopback unless ``GATEWAY_ALLOW_LOOPBACK`` is on
(development and tests, where backends run beside the portal: then loopback and this host's own
addresses need no allow-list entry; the names in ``GATEWAY_OWN_HOSTS`` stay refused). The same :class:`Policy` answers
at validation (``KubeObject.cluster_rules`` -> ``clusters.validation.manifests.validate_manifest``: API, forms,
admin, ``/api/apply/``) and in the gateway's catalog, which refuses to route mirrored objects that
break it; :func:`address_refusal` is asked again after DNS resolution, for every address a
connection may use (a name that resolves to loopback is refused: DNS rebinding).

**Ids.** Every served model has the gateway id ``namespace/modelName``; an id is served by one
object in the whole portal unless staff share it for a cluster
(:class:`~inference_gateway.models.SharedGatewayId`).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Q

from accounts.models import ALL_NAMESPACES, NamespaceGrant
from clusters.models import Cluster, SyncState
from clusters.validation.schemas import FieldError
from inference_gateway.models import BackendHost, SharedGatewayId, SharedNamespace

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
BACKEND_URL_FIELD = "spec.backendUrl"
SCHEMES = ("http", "https")
GONE = (SyncState.DELETING, SyncState.DELETED_IN_CLUSTER)
# Instance metadata services: AWS/GCP/Azure/OpenStack (169.254.169.254, inside link-local anyway),
# AWS ECS task metadata, AWS over IPv6, Alibaba Cloud, Azure's wire server.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata.azure.com"})
NUMERIC_HOST = re.compile(r"[0-9a-fx.]+", re.IGNORECASE)
LOOPBACK_RULE = "is loopback, allowed only where GATEWAY_ALLOW_LOOPBACK=1 (development and tests)"


def service_of(host: str, namespace: str) -> tuple[str | None, str]:
    """The Service a host names, and its namespace; (None, namespace) for an IP or another name."""
    if _ip(host) is not None:
        return None, namespace
    parts = host.split(".")
    if len(parts) == 1:
        return parts[0], namespace
    if len(parts) == 2 or parts[2:] in (["svc"], ["svc", "cluster", "local"]):
        return parts[0], parts[1]
    return None, namespace


def _ip(host: str) -> IPAddress | None:
    """The address a host literally is, in any form the C resolver reads as one (``127.1``,
    ``2130706433``, ``0x7f.0.0.1`` are 127.0.0.1 to ``getaddrinfo``); None for a name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if not NUMERIC_HOST.fullmatch(host):
            return None
        try:
            address = ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
    return address


@functools.cache
def _this_hosts_addresses() -> frozenset[IPAddress]:
    """The addresses this host's name resolves to (a pod's IP); loopback is left to its own rule."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        return frozenset()
    found = (_ip(str(info[4][0]).split("%")[0]) for info in infos)
    return frozenset(address for address in found if address is not None and not address.is_loopback)


def _own_names() -> set[str]:
    """The portal's and gateway's own host names and addresses: GATEWAY_OWN_HOSTS and the exact
    (not wildcard) ALLOWED_HOSTS, loopback names left to the loopback rule."""
    names = {*settings.GATEWAY_OWN_HOSTS, *settings.ALLOWED_HOSTS}
    return {
        name.lower().strip("[]") for name in names
        if name and not name.startswith(".") and name != "*" and not _is_loopback_name(name.strip("[]"))
    }


def _is_loopback_name(host: str) -> bool:
    address = _ip(host)
    if address is not None:
        return address.is_loopback
    return host == "localhost" or host.endswith(".localhost")


def address_refusal(address: IPAddress | str) -> str | None:
    """Why a backend may not be reached at ``address``; None when it may. Asked for IP literals in
    URLs, for replicas from EndpointSlices and for every address a name resolves to."""
    if isinstance(address, str):
        parsed = _ip(address.split("%")[0])
        if parsed is None:
            return None
        address = parsed
    elif isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "is a cloud metadata address"
    if address.is_link_local:
        return "is link-local (169.254.0.0/16, fe80::/10)"
    if address.is_unspecified or address.is_multicast:
        return "is not a unicast address"
    if address.is_loopback:
        return None if settings.GATEWAY_ALLOW_LOOPBACK else LOOPBACK_RULE
    if str(address) in _own_names() or (address in _this_hosts_addresses() and not settings.GATEWAY_ALLOW_LOOPBACK):
        return "is the portal's own address"  # in development every process shares this host's addresses
    return None


def _host_matches(entry: str, host: str, address: IPAddress | None) -> bool:
    entry = entry.strip().lower().rstrip(".")
    if entry.startswith("*."):
        return address is None and host.endswith(entry[1:])
    if address is not None and "/" in entry:
        try:
            return address in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    return host == entry.strip("[]")


@dataclass(frozen=True)
class Policy:
    """Staff's decisions, read once (one query each), so the catalog checks thousands of routes
    without a query per route: shared namespaces, allow-listed hosts, teams' namespace grants."""

    shared: frozenset[tuple[int, str]]
    hosts: dict[int, tuple[str, ...]]
    grants: tuple[tuple[int, int | None, str, str], ...]  # (team, cluster or None, namespace, access)
    cluster_names: dict[int, str]

    @classmethod
    def load(cls, cluster_id: int | None = None) -> Policy:
        """Every cluster's decisions, or one cluster's (validation of one object)."""
        where = {} if cluster_id is None else {"cluster_id": cluster_id}
        hosts: dict[int, list[str]] = {}
        for host_cluster, host in BackendHost.objects.filter(**where).values_list("cluster_id", "host"):
            hosts.setdefault(host_cluster, []).append(host)
        grants = NamespaceGrant.objects.all()
        if cluster_id is not None:
            grants = grants.filter(Q(cluster_id=cluster_id) | Q(cluster__isnull=True))
        return cls(
            shared=frozenset(SharedNamespace.objects.filter(**where).values_list("cluster_id", "namespace")),
            hosts={key: tuple(value) for key, value in hosts.items()},
            grants=tuple(grants.values_list("team_id", "cluster_id", "namespace", "access")),
            cluster_names=dict(Cluster.objects.filter(**({} if cluster_id is None else {"pk": cluster_id}))
                               .values_list("pk", "name")),
        )

    def _teams_using(self, cluster_id: int, namespace: str, owners_only: bool) -> set[int]:
        return {
            team for team, granted, scope, access in self.grants
            if granted in (None, cluster_id) and scope in (ALL_NAMESPACES, namespace)
            and (access == NamespaceGrant.Access.EDIT or not owners_only)
        }

    def may_use_namespace(self, cluster_id: int, model_namespace: str, namespace: str) -> bool:
        """The model's own namespace, a shared one, or one where a team owning the model's holds a grant."""
        if namespace == model_namespace or (cluster_id, namespace) in self.shared:
            return True
        owners = self._teams_using(cluster_id, model_namespace, owners_only=True)
        return bool(owners & self._teams_using(cluster_id, namespace, owners_only=False))

    def allow_listed(self, cluster_id: int, host: str, address: IPAddress | None) -> bool:
        return any(_host_matches(entry, host, address) for entry in self.hosts.get(cluster_id, ()))

    def refusal(self, cluster_id: int, namespace: str, url: Any) -> str | None:
        """Why a model in (cluster, namespace) may not answer at ``url`` (a rule, to follow the
        value in a message); None when it may."""
        if not isinstance(url, str):
            return "must be an http(s) URL (a string)"
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError on a malformed port
        except ValueError as error:
            return f"is not a valid URL ({error})"
        if parts.scheme.lower() not in SCHEMES:
            return f"must use http or https, not {parts.scheme or 'no scheme'!r}"
        host = (parts.hostname or "").rstrip(".")
        if not host:
            return "has no host"
        if parts.username is not None or parts.password is not None:
            return "must not carry user-info (user:password@)"
        address = _ip(host)
        if address is not None:
            refused = address_refusal(address)
            if refused:
                return f"names {host}, which {refused}"
            if address.is_loopback:
                return None
        elif _is_loopback_name(host):
            return None if settings.GATEWAY_ALLOW_LOOPBACK else f"names {host}, which {LOOPBACK_RULE}"
        elif host in METADATA_NAMES:
            return f"names {host}, which is a cloud metadata address"
        if host in _own_names():
            return f"names {host}, which is the portal's own address"
        if self.allow_listed(cluster_id, host, address):
            return None
        service, service_namespace = service_of(host, namespace)
        cluster = self.cluster_names.get(cluster_id, str(cluster_id))
        if service is None:
            return (f"names {host}, outside the cluster and not on cluster {cluster}'s backend allow-list "
                    "(staff keep it: Backend hosts)")
        if self.may_use_namespace(cluster_id, namespace, service_namespace):
            return None
        return (f"names Service {service} in namespace {service_namespace}, which the team of namespace "
                f"{namespace} may not use (its own namespaces, or one staff share: Shared namespaces)")


def backend_url_errors(cluster: Cluster, namespace: str, spec: dict[str, Any]) -> list[FieldError]:
    """The validation rule for ``spec.backendUrl`` of a model in (cluster, namespace)."""
    if "backendUrl" not in spec:
        return []  # the CRD schema says whether it is required
    refused = Policy.load(cluster.pk).refusal(cluster.pk, namespace, spec["backendUrl"])
    return [] if refused is None else [FieldError(BACKEND_URL_FIELD, spec["backendUrl"], refused)]


def gateway_id(namespace: str, model_name: str) -> str:
    return f"{namespace}/{model_name}"


def gateway_id_errors(
    row: Any, cluster: Cluster, path: str, kinds: Iterable[type[Any]]
) -> list[FieldError]:
    """A second object claiming the gateway id another object serves is refused, unless staff
    shared the id for this cluster. ``row`` is the (unsaved, projected) object; ``path`` the field
    its model name comes from."""
    if not row.model_name:
        return []
    kept = type(row).objects.filter(cluster=cluster, namespace=row.namespace, name=row.name, model_name=row.model_name)
    if kept.exists():
        # An edit that keeps the object's id claims nothing new: a duplicate that arrived from the
        # cluster meanwhile is the gateway's 409 to report, not a reason to refuse a label change.
        return []
    wanted = gateway_id(row.namespace, row.model_name)
    for kind in kinds:
        others = kind.objects.filter(namespace=row.namespace, model_name=row.model_name).exclude(sync_state__in=GONE)
        if kind is type(row):
            others = others.exclude(cluster=cluster, name=row.name)
        other = others.select_related("cluster").first()
        if other is None:
            continue
        if SharedGatewayId.objects.filter(cluster=cluster, gateway_id=wanted).exists():
            return []
        rule = (f"would serve gateway id {wanted}, which {other.kube.kind} {other.cluster.name}/{other.namespace}/"
                f"{other.name} already serves; choose another name, or ask staff to share the id (Shared gateway ids)")
        return [FieldError(path, row.model_name, rule)]
    return []
