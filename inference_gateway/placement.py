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
break it. Hosts are judged as the gateway connects to them (``inference_gateway.addresses``, one
parser); ``address_refusal`` is asked again for the address of every socket the gateway opens
(``inference_gateway.resolver``: DNS rebinding, IP literals).

**Ids.** Every served model has the gateway id ``namespace/modelName``; an id is served by one
object in the whole portal unless staff share it for a cluster
(:class:`~inference_gateway.models.SharedGatewayId`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from accounts.models import ALL_NAMESPACES, NamespaceGrant
from clusters.models import Cluster, SyncState
from clusters.validation.schemas import FieldError
from inference_gateway.addresses import (
    IPAddress,
    NotAnAddress,
    host_refusal,
    is_loopback_name,
    normalize_host,
    parse_backend_url,
)
from inference_gateway.models import BackendHost, SharedGatewayId, SharedNamespace
from inference_gateway.names import gateway_id, model_name_refusal

BACKEND_URL_FIELD = "spec.backendUrl"
GONE = (SyncState.DELETING, SyncState.DELETED_IN_CLUSTER)
API_SERVER_SERVICE = ("kubernetes", "default")  # never a backend, whoever may use namespace default


def service_of(host: str, namespace: str) -> tuple[str | None, str]:
    """The Service a normalized host (``inference_gateway.addresses``) names, and its namespace;
    (None, namespace) for an IP or another name."""
    try:
        host, address = normalize_host(host)
    except NotAnAddress:
        return None, namespace
    if address is not None:
        return None, namespace
    parts = host.split(".")
    if len(parts) == 1:
        return parts[0], namespace
    if len(parts) == 2 or parts[2:] in (["svc"], ["svc", "cluster", "local"]):
        return parts[0], parts[1]
    return None, namespace


def _host_matches(entry: str, host: str, address: IPAddress | None) -> bool:
    """Whether an allow-list entry covers a normalized host; the entry is read by the same parser
    (full-width or upper-case names, ``xn--...`` and ``127.1`` entries mean what a URL naming them connects to)."""
    entry = entry.strip().lower()
    if address is not None and "/" in entry:
        try:
            return address in ipaddress.ip_network(entry.strip("[]"), strict=False)
        except ValueError:
            return False
    suffix = entry.startswith("*.")
    try:
        entry_host, _ = normalize_host(entry[2:] if suffix else entry.strip("[]"))
    except NotAnAddress:
        return False
    if suffix:
        return address is None and host.endswith(f".{entry_host}")
    return host == entry_host


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
        value in a message); None when it may. The host judged is the one the gateway connects to
        (``inference_gateway.addresses.parse_backend_url``)."""
        try:
            backend = parse_backend_url(url)
        except NotAnAddress as error:
            return str(error)
        return self.host_refusal(cluster_id, namespace, backend.host, backend.ip)

    def host_refusal(self, cluster_id: int, namespace: str, host: str, address: IPAddress | None) -> str | None:
        """:meth:`refusal` for a normalized host."""
        refused = host_refusal(host, address)
        if refused:
            return f"names {host}, which {refused}"
        if is_loopback_name(host):
            return None  # development: GATEWAY_ALLOW_LOOPBACK is on
        service, service_namespace = service_of(host, namespace)
        if (service, service_namespace) == API_SERVER_SERVICE:
            return f"names {host}, which is the cluster's API server (Service kubernetes in default)"
        if self.allow_listed(cluster_id, host, address):
            return None
        cluster = self.cluster_names.get(cluster_id, str(cluster_id))
        if service is None:
            return (f"names {host}, outside the cluster and not on cluster {cluster}'s backend allow-list "
                    "(staff keep it: Backend hosts)")
        if self.may_use_namespace(cluster_id, namespace, service_namespace):
            return None
        return (f"names Service {service} in namespace {service_namespace}, which the team of namespace "
                f"{namespace} may not use (its own namespaces, or one staff share: Shared namespaces)")


def route_refusal(policy: Policy, row: Any, routes_backend_url: bool) -> str | None:
    """Why the gateway does not route a serving object, field first: its model name (at the kind's
    ``model_name_path``), then, where the object routes to its ``spec.backendUrl``
    (``routes_backend_url``: an InferenceModel), that URL; None: it does. Asked by the catalog and the
    model page, so both say the same."""
    backend_url = (row.spec or {}).get("backendUrl") if routes_backend_url else None
    return refusal_of(policy.refusal, row.model_name, row.model_name_path, row.cluster_id, row.namespace,
                      backend_url, routes_backend_url)


def refusal_of(
    backend_refusal: Callable[[int, str, Any], str | None], model_name: str, model_name_path: str, cluster_id: int,
    namespace: str, backend_url: Any, routes_backend_url: bool,
) -> str | None:
    """:func:`route_refusal` from the columns themselves (the catalog reads no model instance);
    ``backend_refusal`` is :meth:`Policy.refusal`, or a cache of it (many models share a backend)."""
    refused = model_name_refusal(model_name)
    if refused:
        return f"{model_name_path} {refused}"
    if routes_backend_url:
        refused = backend_refusal(cluster_id, namespace, backend_url)
        return None if refused is None else f"{BACKEND_URL_FIELD} {refused}"
    return None


def backend_url_errors(cluster: Cluster, namespace: str, spec: dict[str, Any]) -> list[FieldError]:
    """The validation rule for ``spec.backendUrl`` of a model in (cluster, namespace)."""
    if "backendUrl" not in spec:
        return []  # the CRD schema says whether it is required
    refused = Policy.load(cluster.pk).refusal(cluster.pk, namespace, spec["backendUrl"])
    return [] if refused is None else [FieldError(BACKEND_URL_FIELD, spec["backendUrl"], refused)]


def _served_as(kinds: Iterable[type[Any]], namespace: str, model_name: str,
               exclude: tuple[type[Any], Q] | None = None) -> Any:
    """An object (not being deleted) serving gateway id ``namespace/model_name``, else None;
    ``exclude``: (kind, condition) rows of that kind not to count (the object being validated)."""
    for kind in kinds:
        found = kind.objects.filter(namespace=namespace, model_name=model_name).exclude(sync_state__in=GONE)
        if exclude is not None and kind is exclude[0]:
            found = found.exclude(exclude[1])
        other = found.select_related("cluster").first()
        if other is not None:
            return other
    return None


def gateway_id_errors(
    row: Any, cluster: Cluster, path: str, kinds: Iterable[type[Any]]
) -> list[FieldError]:
    """A second object claiming the gateway id another object serves is refused, unless staff
    shared the id for this cluster. ``row`` is the (unsaved, projected) object; ``path`` the field
    its model name comes from."""
    if not row.model_name:
        return []
    refused = model_name_refusal(row.model_name)
    if refused:
        return [FieldError(path, row.model_name, refused)]
    kept = type(row).objects.filter(cluster=cluster, namespace=row.namespace, name=row.name, model_name=row.model_name)
    if kept.exists():
        # An edit that keeps the object's id claims nothing new: a duplicate that arrived from the
        # cluster meanwhile is the gateway's 409 to report, not a reason to refuse a label change.
        return []
    if "/" in row.model_name:
        # A bare name spelled as another object's id would catch requests meant for that id.
        other = _served_as(kinds, *row.model_name.split("/", 1))
        if other is not None:
            return [FieldError(path, row.model_name, (
                f"is spelled as gateway id {row.model_name}, which {other.kube.kind} {other.cluster.name}/"
                f"{other.namespace}/{other.name} serves; choose a name that names no other namespace's model"))]
    wanted = gateway_id(row.namespace, row.model_name)
    other = _served_as(kinds, row.namespace, row.model_name, (type(row), Q(cluster=cluster, name=row.name)))
    if other is None or SharedGatewayId.objects.filter(cluster=cluster, gateway_id=wanted).exists():
        return []
    rule = (f"would serve gateway id {wanted}, which {other.kube.kind} {other.cluster.name}/{other.namespace}/"
            f"{other.name} already serves; choose another name, or ask staff to share the id (Shared gateway ids)")
    return [FieldError(path, row.model_name, rule)]
