"""Where each serving kind answers: the in-cluster conventions, one function per kind.

- **InferenceModel** (reference 000): ``spec.backendUrl`` as written (a trailing ``/v1`` is
  dropped, as the OpenAI path carries it). When its host names a Service (``svc``, ``svc.ns``,
  ``svc.ns.svc``, ``svc.ns.svc.cluster.local``), its ready replicas are that Service's
  EndpointSlices (``inference_gateway.endpoints``); any other host is used as is.
- **KubeAI Model** (reference 002): KubeAI serves every Model through its own OpenAI proxy, the
  Service ``kubeai`` (port 80) of the model's namespace, under ``/openai`` (as KubeAI's docs call
  it: ``http://kubeai/openai/v1``). KubeAI balances its replicas and scales them from zero itself,
  so the gateway hands it the request and never wakes it. Where the portal is the cluster's Model
  controller, there is no KubeAI proxy: the route is the Service ``model-<name>`` (port 8000) the
  portal renders, and the Model is woken from zero like an InferenceModel.
- **ModelService** (reference 004): the operator exposes decode pods only through its
  InferencePool and the Gateway API; the gateway talks to a Service named after the ModelService
  in its namespace, on ``spec.engine.port`` (default 8000), selecting the pods the operator labels
  ``llm-d.ai/model: <name>`` (docs/gateway.md shows the Service to add).

Only a kind the portal manages in the model's cluster (``Cluster.manages``) is woken from zero;
a mirrored one is routed whatever its status says, as another controller owns its replicas.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from clusters.models import Cluster
from inference_gateway.addresses import BackendURL, NotAnAddress, parse_backend_url
from inference_gateway.picking.config import DEFAULT, PickingConfig, columns, from_columns
from inference_gateway.placement import gateway_id, service_of
from models_app.models import InferenceModel, KubeAIModel, ModelService, ServingModel
from models_app.public import KUBEAI_ENGINE_PORT, kubeai_service_name

KUBEAI_SERVICE, KUBEAI_PORT, KUBEAI_PREFIX = "kubeai", 80, "/openai"
MODEL_SERVICE_PORT = 8000


@dataclass(frozen=True)
class Route:
    """One served model: who may see it (cluster, namespace), where it answers, whether it may be woken."""

    model: str
    kind: str
    pk: int
    cluster_id: int
    namespace: str
    name: str
    scheme: str
    host: str
    port: int
    prefix: str
    service: str | None
    service_namespace: str
    wakeable: bool
    ready: bool
    # Unix seconds: the object's creation in its cluster, else the mirror row's (OpenAI's ``created``).
    created: int
    features: tuple[str, ...] = field(default=())
    # Why the gateway will not route it, field first (``placement.route_refusal``); None: it may.
    refusal: str | None = None
    # Staff let several objects serve this route's id (``SharedGatewayId``).
    shared: bool = False
    # How its replicas are picked (``picking.config``), read with the row: no read of its own.
    picking: PickingConfig = DEFAULT

    # Cached (the instance's __dict__, beside the frozen fields): a request reads both several times.
    @cached_property
    def id(self) -> str:
        """The gateway id, unique across the portal: ``namespace/modelName``."""
        return gateway_id(self.namespace, self.model)

    @cached_property
    def key(self) -> tuple[str, int, str, str]:
        return (self.kind, self.cluster_id, self.namespace, self.name)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"


@dataclass(frozen=True, slots=True)
class RouteRow:
    """The columns of one serving row a route is built from, as ``values_list`` reads them: no model
    instance (building 100,000 of them, ``post_init`` signals and JSON decoding included, was most
    of a catalog load). ``detail`` is the one value a kind adds (:attr:`ServingKind.detail`)."""

    pk: int
    cluster_id: int
    namespace: str
    name: str
    model_name: str
    ready: bool
    created: int
    detail: Any
    picking: PickingConfig


@dataclass(frozen=True)
class ServingKind:
    """A serving kind as the catalog reads it: its table, the one kind-specific value a route needs
    (``detail``: a lookup ``values_list`` reads without decoding the whole spec), and its builder."""

    model: type[ServingModel]
    detail: str
    build: Callable[[RouteRow, str, bool, str | None], Route]  # (row, kind, wakeable, refusal)
    routes_backend_url: bool = False  # the placement rules judge its detail as ``spec.backendUrl``

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    @property
    def kind(self) -> str:
        return self.model.kube.kind

    @functools.cached_property
    def picking(self) -> dict[str, Any]:
        """The annotations a row's picking is read from (``picking.config.columns``)."""
        return columns(self.kind)

    @functools.cached_property
    def columns(self) -> tuple[str, ...]:
        """What :func:`route_row` takes, in its order: :data:`COLUMNS`, the detail, the picking's two."""
        return (*COLUMNS, self.detail, *self.picking)


# The columns every kind's route reads, in the order :func:`route_row` takes them (then the kind's own).
COLUMNS = ("pk", "cluster_id", "namespace", "name", "model_name", "ready", "cluster_created_at", "created_at",
           "sync_state")


def route_row(kind: str, values: tuple) -> RouteRow:
    """A :class:`RouteRow` from :attr:`ServingKind.columns`' values. ``created`` is OpenAI's: the
    object's ``creationTimestamp`` in its cluster, else the mirror row's creation (an object the
    portal made and has not yet seen come back from the cluster), in Unix seconds."""
    pk, cluster_id, namespace, name, model_name, ready, cluster_created_at, created_at, _, detail, first, second = (
        values[:12])
    return RouteRow(pk, cluster_id, namespace, name, model_name, ready,
                    int((cluster_created_at or created_at).timestamp()), detail,
                    from_columns(kind, first, second, f"{kind} {namespace}/{name}"))


@functools.lru_cache(maxsize=65536)
def _backend(url: Any) -> tuple[BackendURL, str]:
    """``spec.backendUrl`` as the gateway connects to it, and its path less a trailing ``/v1``;
    cached: many models name the same backend, and yarl's parse is most of a route's cost."""
    try:
        backend = parse_backend_url(url)
    except NotAnAddress:
        backend = BackendURL("http", "", 80, "", None)
    prefix = backend.path.rstrip("/")
    return backend, prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix


_service = functools.lru_cache(maxsize=65536)(service_of)  # (host, namespace): models share backends


def inference_model_route(row: RouteRow, kind: str, wakeable: bool, refusal: str | None = None) -> Route:
    """The route of ``spec.backendUrl`` as the gateway connects to it: host and port as yarl reads
    them (``inference_gateway.addresses``), the host the placement rules judged. A URL that is not
    a backend address routes nowhere (the catalog's refusal says why)."""
    url, prefix = _backend(row.detail if isinstance(row.detail, str) else None)  # any other value: no address
    service, service_namespace = _service(url.host, row.namespace) if url.host else (None, row.namespace)
    return Route(
        model=row.model_name, kind=kind, pk=row.pk, cluster_id=row.cluster_id, namespace=row.namespace,
        name=row.name, scheme=url.scheme, host=url.host, port=url.port, prefix=prefix, service=service,
        service_namespace=service_namespace, wakeable=wakeable, ready=row.ready, created=row.created,
        refusal=refusal, picking=row.picking,
    )


def kubeai_route(row: RouteRow, kind: str, wakeable: bool, refusal: str | None = None) -> Route:
    """KubeAI's proxy, or where the portal is the Models' controller (``wakeable``) the Service it
    renders in front of the Model's engines (``models_app.kubeai_controller``), woken from zero."""
    service, port, prefix = (kubeai_service_name(row.name), KUBEAI_ENGINE_PORT, "") if wakeable else (
        KUBEAI_SERVICE, KUBEAI_PORT, KUBEAI_PREFIX)  # fmt: skip
    return Route(
        model=row.name, kind=kind, pk=row.pk, cluster_id=row.cluster_id, namespace=row.namespace,
        name=row.name, scheme="http", host=f"{service}.{row.namespace}.svc.cluster.local", port=port,
        prefix=prefix, service=service, service_namespace=row.namespace, wakeable=wakeable,
        ready=row.ready, created=row.created,
        features=tuple(feature for feature in (row.detail or "").split(",") if feature), refusal=refusal,
        picking=row.picking,
    )


def model_service_route(row: RouteRow, kind: str, wakeable: bool, refusal: str | None = None) -> Route:
    port = row.detail or MODEL_SERVICE_PORT
    return Route(
        model=row.model_name, kind=kind, pk=row.pk, cluster_id=row.cluster_id, namespace=row.namespace,
        name=row.name, scheme="http", host=f"{row.name}.{row.namespace}.svc.cluster.local", port=port, prefix="",
        service=row.name, service_namespace=row.namespace, wakeable=False, ready=row.ready,
        created=row.created, refusal=refusal, picking=row.picking,
    )


# In the order the catalog lists a shared id's objects (a ready one first, then this order).
SERVING_KINDS = (
    ServingKind(InferenceModel, "spec__backendUrl", inference_model_route, routes_backend_url=True),
    ServingKind(KubeAIModel, "features", kubeai_route),
    ServingKind(ModelService, "spec__engine__port", model_service_route),
)
KIND_OF = {kind.model: kind for kind in SERVING_KINDS}
MODEL_OF = {kind.kind: kind.model for kind in SERVING_KINDS}


def route_for(row: ServingModel) -> Route:
    """The route of one stored object, read as the catalog reads it (one query; tests and tools)."""
    kind = KIND_OF[type(row)]
    values = type(row).objects.filter(pk=row.pk).annotate(**kind.picking).values_list(*kind.columns).get()
    cluster = Cluster.objects.filter(pk=row.cluster_id).values_list("managed_kinds", flat=True).get()
    return kind.build(route_row(kind.kind, values), kind.kind, kind.kind in (cluster or []))
