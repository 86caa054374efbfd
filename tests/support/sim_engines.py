"""Simulated engines (devstack/sim_engine.py) as real processes, for the engine's and the routing tests."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.conftest import Backend, Starter


class Engine(Backend):
    """A simulated engine: a backend (its ``/stats``, its stop) that also serves vLLM's ``/metrics``."""

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Every sample of its ``/metrics``, by name: [(labels, value)]."""
        found: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(requests.get(f"{self.url}/metrics", timeout=5).text):
            for sample in family.samples:
                found.setdefault(sample.name, []).append((sample.labels, sample.value))
        return found

    def value(self, name: str) -> float:
        """The value of a metric with one series (0 when absent)."""
        samples = self.metrics().get(name) or [({}, 0.0)]
        return samples[0][1]



@pytest.fixture(name="start_engine")
def start_engine_fixture() -> Iterator:
    """``start_engine(name, *options, host="127.0.0.1")`` -> a running Engine; ``options`` are the
    engine's command-line options (``"--max-num-seqs", "2"``)."""
    starter = Starter(Engine, "devstack.sim_engine", "/health")

    def start(name: str = "engine", *options: str, host: str = "127.0.0.1") -> Engine:
        return starter.start(name, host, *options)

    yield start
    starter.stop_all()


def list_behind(api_client: kubernetes.client.ApiClient, namespace: str, service: str, engines: list[Engine]) -> None:
    """Put ``engines`` behind ``service``: one hand-written EndpointSlice per engine (its own port),
    as a Service's replicas outside the pod network are listed (tests/gateway/test_load_balancing.py)."""
    discovery = kubernetes.client.DiscoveryV1Api(api_client)
    for engine in engines:
        discovery.create_namespaced_endpoint_slice(namespace, {
            "metadata": {"name": f"{service}-{engine.name}", "labels": {
                "kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "tests"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": engine.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [engine.host], "conditions": {"ready": True}}],
        })  # fmt: skip
