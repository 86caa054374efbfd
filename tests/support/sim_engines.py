"""Simulated engines (devstack/sim_engine.py) as real processes, for the engine's and the routing tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import kubernetes
import pytest
import requests
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from devstack.ports import wait_serving
from tests.gateway.conftest import announced_port


@dataclass
class Engine:
    name: str
    host: str
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

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

    def stats(self) -> dict[str, int]:
        return requests.get(f"{self.url}/stats", timeout=5).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def launch(name: str = "engine", *options: str, host: str = "127.0.0.1", started: list[Engine] | None = None
           ) -> Engine:
    """A running Engine (the tests' fixture and the benchmarks'); ``options`` are the engine's
    command-line options (``"--max-num-seqs", "2"``); ``started`` collects it before it serves, so
    one that never comes up is stopped too."""
    process = subprocess.Popen(
        [sys.executable, "-m", "devstack.sim_engine", "--host", host, "--port", "0", "--name", name, *options],
        cwd=settings.BASE_DIR, stdout=subprocess.PIPE, text=True,
    )
    engine = Engine(name, host, 0, process)
    if started is not None:
        started.append(engine)
    engine.port = announced_port(process, f"engine {name}")
    wait_serving(f"{engine.url}/health", f"engine {name}", process=process)
    return engine


@pytest.fixture(name="start_engine")
def start_engine_fixture() -> Iterator:
    """``start_engine(name, host="127.0.0.1", *options)`` -> a running Engine (:func:`launch`)."""
    started: list[Engine] = []

    def start(name: str = "engine", *options: str, host: str = "127.0.0.1") -> Engine:
        return launch(name, *options, host=host, started=started)

    yield start
    for engine in started:
        if engine.process.poll() is None:
            engine.stop()


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
