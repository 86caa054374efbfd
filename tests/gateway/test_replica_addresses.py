"""Which EndpointSlice addresses the gateway sends a model's requests to (``inference_gateway.endpoints``),
on the real control plane (kwok runs the Pods and gives them their IPs): a Pod of the Service's
namespace, or an address staff allow-listed; never the API server, whatever the allow-list says."""

from __future__ import annotations

import ipaddress

import kubernetes
import pytest

from inference_gateway.endpoints import SERVICE_NAME_LABEL, discover
from inference_gateway.models import BackendHost
from inference_gateway.routes import route_for
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model

PORT, TARGET = 8000, 8080


@pytest.fixture
def placed(transactional_db, kube) -> tuple:
    """A Service without a selector in the test's namespace and a model routed through it."""
    cluster = kube.register()
    core = kubernetes.client.CoreV1Api(kube.api_client)
    core.create_namespaced_service(kube.namespace, {
        "metadata": {"name": "vllm"}, "spec": {"ports": [{"name": "http", "port": PORT}]}})
    row = serve_model(cluster, "m", f"http://vllm.{kube.namespace}:{PORT}", namespace=kube.namespace)
    return kube, cluster, route_for(row)


def publish(kube, name: str, address: str) -> None:
    kubernetes.client.DiscoveryV1Api(kube.api_client).create_namespaced_endpoint_slice(kube.namespace, {
        "metadata": {"name": name, "labels": {SERVICE_NAME_LABEL: "vllm",
                                              "endpointslice.kubernetes.io/managed-by": "tests"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": TARGET, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address]}],
    })


def url(address: str) -> str:
    return f"http://{address}:{TARGET}"


def test_an_address_that_is_no_pod_needs_the_allow_list(placed) -> None:
    kube, cluster, route = placed
    publish(kube, "outside", "203.0.113.7")
    assert discover(route) == []
    BackendHost.objects.create(cluster=cluster, host="203.0.113.0/24")
    assert discover(route) == [url("203.0.113.7")]


def test_the_api_server_is_never_a_replica_even_allow_listed(placed) -> None:
    kube, cluster, route = placed
    service = kubernetes.client.CoreV1Api(kube.api_client).read_namespaced_service("kubernetes", "default")
    api_ip = service.spec.cluster_ip
    neighbour = str(ipaddress.ip_address(api_ip) + 7)
    BackendHost.objects.create(cluster=cluster, host=str(ipaddress.ip_network(f"{api_ip}/16", strict=False)))
    publish(kube, "api", api_ip)
    publish(kube, "neighbour", neighbour)
    assert discover(route) == [url(neighbour)]


def test_a_pod_of_the_services_namespace_needs_no_allow_list(placed) -> None:
    kube, _, route = placed
    core = kubernetes.client.CoreV1Api(kube.api_client)
    core.create_namespaced_pod(kube.namespace, {
        "metadata": {"name": "replica"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    pod_ip = wait_for(lambda: core.read_namespaced_pod("replica", kube.namespace).status.pod_ip, timeout=60,
                      message="kwok to give the pod an IP")
    publish(kube, "pod", pod_ip)
    publish(kube, "stranger", "198.51.100.9")  # no Pod's, not allow-listed: left out
    assert discover(route) == [url(pod_ip)]


def test_a_pod_of_another_namespace_is_not_the_models(placed) -> None:
    """Another team's Pod listed in this namespace's EndpointSlice is refused (staff may allow-list it)."""
    kube, cluster, route = placed
    core = kubernetes.client.CoreV1Api(kube.api_client)
    elsewhere = f"{kube.namespace}-b"
    core.create_namespace({"metadata": {"name": elsewhere}})
    try:
        core.create_namespaced_pod(elsewhere, {
            "metadata": {"name": "theirs"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        pod_ip = wait_for(lambda: core.read_namespaced_pod("theirs", elsewhere).status.pod_ip, timeout=60,
                          message="kwok to give the pod an IP")
        publish(kube, "theirs", pod_ip)
        assert discover(route) == []
        BackendHost.objects.create(cluster=cluster, host=pod_ip)
        assert discover(route) == [url(pod_ip)]
    finally:
        core.delete_namespace(elsewhere)
