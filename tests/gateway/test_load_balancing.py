"""Least outstanding requests over a Service's ready replicas, with a passive health check, on the
real control plane: the replicas are real backend processes listed in hand-written EndpointSlices
of a Service without a selector (``endpointslice.kubernetes.io/managed-by: tests``), their address
on the cluster's backend allow-list, as addresses that are no Pod's must be.

kube-apiserver refuses loopback addresses in EndpointSlices ("may not be in the loopback range
(127.0.0.0/8, ::1/128)"), so distinct loopback addresses (127.0.0.2, 127.0.0.3) cannot stand for
pods. The replicas listen instead on this machine's own non-loopback address, each on its own
port, one EndpointSlice per replica (a slice's ports apply to all its endpoints, and a Service
may have many slices), which is what the gateway reads for any Service."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from types import SimpleNamespace

import kubernetes
import openai
import pytest

from accounts.models import NamespaceGrant, Team
from accounts.tokens import issue_token
from inference_gateway.balancer import Balancer
from inference_gateway.models import BackendHost
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest
from tests.gateway.conftest import metrics_text, sample_value

SERVICE_PORT = 8000


def host_address() -> str:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        address = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.fail("this machine has no non-loopback IPv4 address for the replicas to listen on")
    return address


@pytest.fixture
def mirrored(transactional_db, kube, gateway_settings, make_user):
    """A cluster where another controller owns InferenceModels (the gateway routes, never wakes), and a key."""
    cluster = kube.register()
    team = Team.objects.create(name="owners")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    # The replicas are no Pods: staff allow their address (inference_gateway/endpoints.py's rule).
    BackendHost.objects.create(cluster=cluster, host=host_address())
    _, key = issue_token(make_user("owner", teams=[team]), "gateway")
    return kube, key


def publish_replicas(kube, service: str, backends, ready: tuple[bool, ...] | None = None,
                     port: int = SERVICE_PORT) -> None:
    """A Service without a selector (on ``port``) and one EndpointSlice per backend (its own port)."""
    publish_service(kube, service, port)
    for backend, up in zip(backends, ready or (True,) * len(backends), strict=True):
        list_replica(kube, service, backend, up)


def publish_service(kube, service: str, port: int = SERVICE_PORT) -> None:
    """A Service without a selector: its replicas are the EndpointSlices :func:`list_replica` writes."""
    kubernetes.client.CoreV1Api(kube.api_client).create_namespaced_service(kube.namespace, {
        "metadata": {"name": service},
        "spec": {"ports": [{"name": "http", "port": port}]},
    })


def list_replica(kube, service: str, backend, up: bool = True) -> None:
    """An EndpointSlice of ``service`` listing ``backend`` (ready or not) on its own port."""
    kubernetes.client.DiscoveryV1Api(kube.api_client).create_namespaced_endpoint_slice(kube.namespace, {
        "metadata": {"name": f"{service}-{backend.name}", "labels": {
            "kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "tests"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": backend.port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [backend.host], "conditions": {"ready": up}}],
    })


def serve_through_service(kube, service: str) -> None:
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml")
    manifest["spec"]["backendUrl"] = f"http://{service}.{kube.namespace}.svc.cluster.local:{SERVICE_PORT}"
    kube.write(manifest)
    kube.sync()


def chat(client: openai.OpenAI, **options):
    return client.chat.completions.create(model="llama-2-7b", messages=[{"role": "user", "content": "hi"}], **options)


def test_least_outstanding_requests_over_the_ready_replicas(mirrored, gateway, start_backend) -> None:
    kube, key = mirrored
    host = host_address()
    a = start_backend("a", host=host, chunk_delay=0.5)
    b = start_backend("b", host=host, chunk_delay=0.5)
    c = start_backend("c", host=host)
    publish_replicas(kube, "llama", [a, b, c], ready=(True, True, False))
    serve_through_service(kube, "llama")
    assert not InferenceModel.objects.get(name="llama-2-7b").ready  # mirrored: routed whatever its status says
    client = gateway.client(key)

    assert sorted(chat(client).system_fingerprint for _ in range(6)) == ["a"] * 3 + ["b"] * 3
    stream = chat(client, stream=True, max_tokens=20)  # held open on one replica
    busy = next(iter(stream)).system_fingerprint
    idle = ({"a", "b"} - {busy}).pop()
    assert {chat(client).system_fingerprint for _ in range(4)} == {idle}
    stream.close()
    assert c.stats() == {}  # not ready: never sent anything


def test_a_failing_replica_is_skipped_and_its_requests_go_elsewhere(mirrored, gateway, start_backend) -> None:
    kube, key = mirrored
    host = host_address()
    a = start_backend("a", host=host)
    b = start_backend("b", host=host)
    publish_replicas(kube, "llama", [a, b])
    serve_through_service(kube, "llama")
    client = gateway.client(key)
    b.stop()

    served = [chat(client).system_fingerprint for _ in range(6)]

    assert served == ["a"] * 6
    assert a.stats()["/v1/chat/completions"] == 6
    # b was tried once, then skipped: without the passive check every other pick would try it
    errors = sample_value(
        metrics_text(gateway), "inference_portal_gateway_upstream_errors_total", model=f"{kube.namespace}/llama-2-7b"
    )
    assert errors == 1


def test_a_replica_answering_server_errors_is_skipped_after_three_in_a_row(mirrored, gateway, start_backend) -> None:
    kube, key = mirrored
    host = host_address()
    a = start_backend("a", host=host)
    b = start_backend("b", host=host, fail=503)
    publish_replicas(kube, "llama", [a, b])
    serve_through_service(kube, "llama")
    client = gateway.client(key).with_options(max_retries=0)

    answers = []
    for _ in range(12):
        try:
            answers.append(chat(client).system_fingerprint)
        except openai.InternalServerError as error:
            assert error.status_code == 503  # the replica's own answer, passed through
            answers.append("503")

    assert answers.count("503") == 3 and answers[-6:] == ["a"] * 6
    assert b.stats()["/v1/chat/completions"] == 3  # skipped after its third server error in a row



def test_a_model_mirrored_from_the_cluster_with_a_refused_backend_is_not_routed(
        mirrored, gateway_settings, gateway, start_backend) -> None:
    """Objects arrive from the cluster as they are (never validated): the gateway refuses the route."""
    kube, key = mirrored
    gateway_settings.GATEWAY_ALLOW_LOOPBACK = False
    backend = start_backend("loop", host="127.0.0.1")
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml")
    manifest["spec"]["backendUrl"] = backend.url
    kube.write(manifest)
    kube.sync()
    with pytest.raises(openai.InternalServerError) as caught:
        chat(gateway.client(key))
    assert caught.value.code == "backend_refused"
    assert "spec.backendUrl names 127.0.0.1, which is loopback" in caught.value.message
    assert backend.stats() == {}


def test_requests_waiting_for_a_woken_models_replicas_share_one_read_per_interval() -> None:
    """A hundred requests held through a wake, each polling for its replicas every 0.1 s: the
    cluster is asked at most once per interval for the model (0.5 s here, GATEWAY_WAKE_POLL_SECONDS),
    the reads shared, never one per request."""
    reads: list[float] = []

    def discover(route) -> list[str]:  # the cluster's answer: no replica listed yet, after a while
        reads.append(time.monotonic())
        time.sleep(0.05)
        return []

    balancer = Balancer(ttl=60, eject_seconds=10, discoverer=discover)
    route = SimpleNamespace(key=("InferenceModel", 1, "team-a", "llama-2-7b"))

    async def waiting() -> None:
        for _ in range(8):
            assert await balancer.rediscover(route, within=0.5) == []
            await asyncio.sleep(0.1)

    async def hundred() -> None:
        await asyncio.gather(*(waiting() for _ in range(100)))

    asyncio.run(hundred())
    assert len(reads) >= 2
    assert all(later - earlier >= 0.5 for earlier, later in itertools.pairwise(reads)), reads
