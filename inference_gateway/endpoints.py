"""A Service's ready replicas, from its EndpointSlices, as the gateway reaches them.

The Service port the route names (the ``backendUrl`` port) is looked up on the Service, and its
name picks the port of each EndpointSlice (the pods' target port), as kube-proxy does. Endpoints
whose ``conditions.ready`` is false are left out (absent means ready, as in the API). A Service
without a selector and with hand-written EndpointSlices (``kubernetes.io/service-name`` label,
another ``endpointslice.kubernetes.io/managed-by``) is served the same way, which is how
replicas outside the cluster's pod network are put behind a model.

When the cluster has no such Service, or cannot be asked, the route's own URL is the one
endpoint (the cluster's DNS and kube-proxy then do the balancing).
"""

from __future__ import annotations

import logging

from kubernetes import client

from clusters.kube.client import ClusterGateway, GatewayError, NotFoundError, translated
from clusters.models import Cluster
from inference_gateway.routes import Route

logger = logging.getLogger(__name__)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def _service_port_name(service: dict, port: int) -> str | None:
    for item in (service.get("spec") or {}).get("ports") or []:
        if item.get("port") == port:
            return item.get("name") or ""
    return None


def _endpoint_urls(slices: list[dict], port_name: str, route: Route) -> list[str]:
    urls = []
    for endpoint_slice in slices:
        target = next((p.get("port") for p in endpoint_slice.get("ports") or [] if (p.get("name") or "") == port_name),
                      None)
        if target is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False or not endpoint.get("addresses"):
                continue
            address = endpoint["addresses"][0]
            host = f"[{address}]" if ":" in address else address
            urls.append(f"{route.scheme}://{host}:{target}{route.prefix}")
    return sorted(set(urls))


def discover(route: Route) -> list[str]:
    """Base URLs of the route's ready replicas (see the module's docstring). Runs in a worker thread."""
    if route.service is None:
        return [route.base_url]
    cluster = Cluster.objects.get(pk=route.cluster_id)
    try:
        gateway = ClusterGateway(cluster)
    except GatewayError as error:
        logger.info("endpoints of %s: %s; using %s", route.model, error, route.base_url)
        return [route.base_url]
    try:
        core, discovery = client.CoreV1Api(gateway.api_client), client.DiscoveryV1Api(gateway.api_client)
        with translated():
            service = gateway.api_client.sanitize_for_serialization(
                core.read_namespaced_service(route.service, route.service_namespace, _request_timeout=gateway.timeout)
            )
            port_name = _service_port_name(service, route.port)
            if port_name is None:
                return [route.base_url]
            slices = gateway.api_client.sanitize_for_serialization(
                discovery.list_namespaced_endpoint_slice(
                    route.service_namespace, label_selector=f"{SERVICE_NAME_LABEL}={route.service}",
                    _request_timeout=gateway.timeout,
                )
            )["items"]
    except NotFoundError:
        return [route.base_url]
    except GatewayError as error:
        logger.info("endpoints of %s: %s; using %s", route.model, error, route.base_url)
        return [route.base_url]
    finally:
        gateway.close()
    return _endpoint_urls(slices, port_name, route)
