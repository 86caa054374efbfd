"""Where each serving kind answers: the in-cluster conventions, one function per kind.

- **InferenceModel** (reference 000): ``spec.backendUrl`` as written (a trailing ``/v1`` is
  dropped, as the OpenAI path carries it). When its host names a Service (``svc``, ``svc.ns``,
  ``svc.ns.svc``, ``svc.ns.svc.cluster.local``), its ready replicas are that Service's
  EndpointSlices (``inference_gateway.endpoints``); any other host is used as is.
- **KubeAI Model** (reference 002): KubeAI serves every Model through its own OpenAI proxy, the
  Service ``kubeai`` (port 80) of the model's namespace, under ``/openai`` (as KubeAI's docs call
  it: ``http://kubeai/openai/v1``). KubeAI balances its replicas and scales them from zero itself,
  so the gateway hands it the request and never wakes it.
- **ModelService** (reference 004): the operator exposes decode pods only through its
  InferencePool and the Gateway API; the gateway talks to a Service named after the ModelService
  in its namespace, on ``spec.engine.port`` (default 8000), selecting the pods the operator labels
  ``llm-d.ai/model: <name>`` (docs/gateway.md shows the Service to add).

Only a kind the portal manages in the model's cluster (``Cluster.manages``) is woken from zero;
a mirrored one is routed whatever its status says, as another controller owns its replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from inference_gateway.addresses import BackendURL, NotAnAddress, parse_backend_url
from inference_gateway.placement import gateway_id, service_of
from models_app.models import InferenceModel, KubeAIModel, ModelService, ServingModel

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


def created_of(row: ServingModel) -> int:
    """When the model came to be, as OpenAI's ``created`` says it (Unix seconds): the object's
    ``creationTimestamp`` in its cluster, else the mirror row's creation (an object the portal made
    and has not yet seen come back from the cluster)."""
    return int((row.cluster_created_at or row.created_at).timestamp())


def inference_model_route(row: InferenceModel) -> Route:
    """The route of ``spec.backendUrl`` as the gateway connects to it: host and port as yarl reads
    them (``inference_gateway.addresses``), the host the placement rules judged. A URL that is not
    a backend address routes nowhere (the catalog's refusal says why)."""
    try:
        url = parse_backend_url(row.spec.get("backendUrl"))
    except NotAnAddress:
        url = BackendURL("http", "", 80, "", None)
    prefix = url.path.rstrip("/")
    prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix
    service, service_namespace = service_of(url.host, row.namespace) if url.host else (None, row.namespace)
    return Route(
        model=row.model_name, kind=row.kube.kind, pk=row.pk, cluster_id=row.cluster_id, namespace=row.namespace,
        name=row.name, scheme=url.scheme, host=url.host, port=url.port, prefix=prefix, service=service,
        service_namespace=service_namespace, wakeable=row.cluster.manages(row.kube.kind), ready=row.ready,
        created=created_of(row),
    )


def kubeai_route(row: KubeAIModel) -> Route:
    return Route(
        model=row.name, kind=row.kube.kind, pk=row.pk, cluster_id=row.cluster_id, namespace=row.namespace,
        name=row.name, scheme="http", host=f"{KUBEAI_SERVICE}.{row.namespace}.svc.cluster.local", port=KUBEAI_PORT,
        prefix=KUBEAI_PREFIX, service=KUBEAI_SERVICE, service_namespace=row.namespace, wakeable=False,
        ready=row.ready, created=created_of(row),
        features=tuple(feature for feature in row.features.split(",") if feature),
    )


def model_service_route(row: ModelService) -> Route:
    port = (row.spec.get("engine") or {}).get("port") or MODEL_SERVICE_PORT
    return Route(
        model=row.model_name, kind=row.kube.kind, pk=row.pk, cluster_id=row.cluster_id, namespace=row.namespace,
        name=row.name, scheme="http", host=f"{row.name}.{row.namespace}.svc.cluster.local", port=port, prefix="",
        service=row.name, service_namespace=row.namespace, wakeable=False, ready=row.ready,
        created=created_of(row),
    )


ROUTE_BUILDERS = {
    InferenceModel: inference_model_route,
    KubeAIModel: kubeai_route,
    ModelService: model_service_route,
}


def route_for(row: ServingModel) -> Route:
    return ROUTE_BUILDERS[type(row)](row)
