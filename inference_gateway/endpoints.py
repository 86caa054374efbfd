"""A Service's ready replicas, from its EndpointSlices, as the gateway reaches them.

The Service port the route names (the ``backendUrl`` port) is looked up on the Service, and its
name picks the port of each EndpointSlice (the pods' target port), as kube-proxy does. Endpoints
whose ``conditions.ready`` is false are left out (absent means ready, as in the API). A Service
without a selector and with hand-written EndpointSlices (``kubernetes.io/service-name`` label,
another ``endpointslice.kubernetes.io/managed-by``) is served the same way, which is how
replicas outside the cluster's pod network are put behind a model.

When the cluster has no such Service, or cannot be asked, the route's own URL is the one
endpoint (the cluster's DNS and kube-proxy then do the balancing).

**Which replica addresses are followed.** Anyone who may write EndpointSlices in a namespace may
list any address in one, so an address is checked like a backend (:class:`ReplicaRule`), after the
same normalization (``inference_gateway.addresses``):

- never an address no backend may have (loopback outside development, link-local, metadata, the
  portal's own), nor the cluster's API server: the addresses its URL resolves to, the ``kubernetes``
  Service's ClusterIPs and its EndpointSlice's addresses (read where the portal may), even when
  staff's allow-list covers them;
- then either the IP of a Pod of the Service's namespace (a namespace the model's team may use:
  the route's placement rule checked it), not on the host network, as the API server lists it now;
- or an address on the cluster's allow-list (staff's *Backend hosts*: an IP or a CIDR), which is
  how replicas outside the pod network, another team's Pods or other Services' ClusterIPs are put
  behind a model. An FQDN EndpointSlice's names are judged as a ``backendUrl`` host is.

A refused address is left out (logged with its reason); the gateway answers 502
``backend_unreachable`` when none is left.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from kubernetes import client

from clusters.kube.client import ClusterGateway, GatewayError, NotFoundError, translated
from clusters.models import Cluster
from inference_gateway.addresses import IPAddress, NotAnAddress, address_refusal, ip_of, normalize_host
from inference_gateway.placement import Policy
from inference_gateway.routes import Route

logger = logging.getLogger(__name__)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def _service_port_name(service: dict, port: int) -> str | None:
    for item in (service.get("spec") or {}).get("ports") or []:
        if item.get("port") == port:
            return item.get("name") or ""
    return None


def _endpoints(slices: list[dict], port_name: str) -> list[tuple[str, int]]:
    """(address as listed, target port) of every ready endpoint of the slices."""
    found = []
    for endpoint_slice in slices:
        target = next((p.get("port") for p in endpoint_slice.get("ports") or [] if (p.get("name") or "") == port_name),
                      None)
        if target is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False or not endpoint.get("addresses"):
                continue
            found.append((str(endpoint["addresses"][0]), target))
    return found


def _resolved(host: str) -> set[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return set()
    return {address for info in infos if (address := ip_of(str(info[4][0]).split("%")[0])) is not None}


@dataclass
class ReplicaRule:
    """Which EndpointSlice addresses a route may be sent to (see the module's docstring), read from
    the cluster once per discovery."""

    route: Route
    policy: Policy
    api_server: set[IPAddress]
    pods: dict[IPAddress, bool] = field(default_factory=dict)  # Pod IP -> on the host network
    pods_unreadable: str | None = None

    @classmethod
    def read(cls, gateway: ClusterGateway, core: client.CoreV1Api, discovery: client.DiscoveryV1Api,
             route: Route) -> ReplicaRule:
        rule = cls(route, Policy.load(route.cluster_id), set(_api_server_addresses(gateway, core, discovery, route)))
        serialize, timeout = gateway.api_client.sanitize_for_serialization, gateway.timeout
        try:
            with translated():
                pods = serialize(core.list_namespaced_pod(route.service_namespace, _request_timeout=timeout))["items"]
        except GatewayError as error:
            rule.pods_unreadable = f"the Pods of namespace {route.service_namespace} cannot be read ({error})"
            return rule
        for pod in pods:
            host_network = bool((pod.get("spec") or {}).get("hostNetwork"))
            for item in (pod.get("status") or {}).get("podIPs") or []:
                address = ip_of(str(item.get("ip") or ""))
                if address is not None:
                    rule.pods[address] = host_network
        return rule

    def refusal(self, listed: str) -> str | None:
        """Why the gateway may not send the route's requests to an EndpointSlice address; None: it may."""
        try:
            host, address = normalize_host(listed)
        except NotAnAddress as error:
            return str(error)
        cluster_id, namespace = self.route.cluster_id, self.route.namespace
        if address is None:  # an FQDN slice: judged as a backendUrl's host is
            return self.policy.host_refusal(cluster_id, namespace, host, None)
        refused = address_refusal(address)
        if refused:
            return refused
        if address in self.api_server:
            return "is the cluster's API server"
        if self.policy.allow_listed(cluster_id, host, address):
            return None
        if self.pods.get(address) is False:
            return None
        if self.pods.get(address):
            return f"is a Pod on the host network (a node's address), not on cluster {cluster_id}'s allow-list"
        return (f"is neither a Pod of namespace {self.route.service_namespace}"
                f"{f' ({self.pods_unreadable})' if self.pods_unreadable else ''} nor on the cluster's backend "
                "allow-list (staff keep it: Backend hosts)")


# The API server's own addresses, per cluster and server URL: they move only with the control plane,
# so one read per cluster and interval serves every route of it (a read per route per discovery
# was two API calls each). A failed read is not kept: the next discovery asks again.
API_SERVER_TTL_SECONDS = 60.0
_api_servers: dict[tuple[int, str], tuple[float, frozenset[IPAddress]]] = {}


def _api_server_addresses(gateway: ClusterGateway, core: client.CoreV1Api, discovery: client.DiscoveryV1Api,
                          route: Route) -> frozenset[IPAddress]:
    """The addresses its URL resolves to, and where readable the ClusterIPs of ``default/kubernetes``
    and the addresses of its EndpointSlice."""
    host = gateway.api_client.configuration.host
    key, now = (route.cluster_id, host), time.monotonic()
    cached = _api_servers.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    addresses = set(_resolved(urlsplit(host).hostname or ""))
    serialize, timeout = gateway.api_client.sanitize_for_serialization, gateway.timeout
    try:
        with translated():
            service = serialize(core.read_namespaced_service("kubernetes", "default", _request_timeout=timeout))
            addresses.update(ipaddress.ip_address(ip) for ip in (service.get("spec") or {}).get(
                "clusterIPs") or [] if ip != "None")
            own = serialize(discovery.read_namespaced_endpoint_slice("kubernetes", "default",
                                                                     _request_timeout=timeout))
            addresses.update(ipaddress.ip_address(address) for endpoint in own.get("endpoints") or []
                             for address in endpoint.get("addresses") or [])
    except (GatewayError, ValueError) as error:  # default/kubernetes not readable: its URL is still known
        logger.info("the API server's Service in cluster %s: %s", route.cluster_id, error)
        return frozenset(addresses)
    _api_servers[key] = (now + API_SERVER_TTL_SECONDS, frozenset(addresses))
    return frozenset(addresses)


def _endpoint_urls(endpoints: list[tuple[str, int]], rule: ReplicaRule) -> list[str]:
    urls = []
    for listed, target in endpoints:
        refused = rule.refusal(listed)
        if refused:
            logger.warning("model %s: EndpointSlice address %s %s; not sent requests", rule.route.id, listed, refused)
            continue
        host, _ = normalize_host(listed)
        host = f"[{host}]" if ":" in host else host
        urls.append(f"{rule.route.scheme}://{host}:{target}{rule.route.prefix}")
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
        endpoints = _endpoints(slices, port_name)
        if not endpoints:
            return []
        rule = ReplicaRule.read(gateway, core, discovery, route)
    except NotFoundError:
        return [route.base_url]
    except GatewayError as error:
        logger.info("endpoints of %s: %s; using %s", route.model, error, route.base_url)
        return [route.base_url]
    finally:
        gateway.close()
    return _endpoint_urls(endpoints, rule)
