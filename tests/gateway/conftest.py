"""Real processes on both sides of the gateway: OpenAI-compatible backends (tests/support/
openai_backend.py) started as processes, the gateway serving in a thread of the test process
(the code ``manage.py gateway`` runs, on its own event loop), and the official ``openai`` client."""

from __future__ import annotations

import asyncio
import selectors
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import openai
import pytest
import requests
from django.conf import settings

from accounts.models import NamespaceGrant, Team
from accounts.tokens import issue_token
from clusters.models import Cluster
from devstack.ports import free_port, wait_serving
from inference_gateway.server import run
from models_app.models import InferenceModel
from tests.clusters.conftest import wait_for


@dataclass
class Backend:
    name: str
    host: str
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stats(self) -> dict[str, int]:
        return requests.get(f"{self.url}/stats", timeout=5).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a request still in flight (a slow backend's): no graceful end
            self.process.kill()
            self.process.wait(timeout=10)


def announced_port(process: subprocess.Popen, what: str, timeout: float = 120.0) -> int:
    """The port a process started with ``--port 0`` announces (``listening on http://HOST:PORT``)."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"{what} announced no port within {timeout} s")
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        raise AssertionError(f"{what} exited with {process.wait(timeout=10)} before listening: {line!r}")
    return int(line.rsplit(":", 1)[1])


Served = TypeVar("Served", bound=Backend)


class Starter(Generic[Served]):
    """Test servers of one kind (``python -m MODULE --host H --port 0 --name N *options``) as real
    processes: each binds a port the kernel picks and announces it, so no other process can hold it
    in between; each is waited for on its ``health`` path; those still running are stopped at the
    end (:meth:`stop_all`). The backends here and the simulated engines (tests/support/sim_engines.py)
    both start this way."""

    def __init__(self, kind: type[Served], module: str, health: str) -> None:
        self.kind, self.module, self.health = kind, module, health
        self.started: list[Served] = []

    def start(self, name: str, host: str, *options: str) -> Served:
        process = subprocess.Popen(
            [sys.executable, "-m", self.module, "--host", host, "--port", "0", "--name", name, *options],
            cwd=settings.BASE_DIR, stdout=subprocess.PIPE, text=True,
        )
        served = self.kind(name, host, 0, process)
        self.started.append(served)
        served.port = announced_port(process, f"{self.module} {name}")
        wait_serving(f"{served.url}{self.health}", f"{self.module} {name}", process=process)
        return served

    def stop_all(self) -> None:
        for served in self.started:
            if served.process.poll() is None:
                served.stop()


@pytest.fixture
def start_backend():
    """``start_backend(name, host="127.0.0.1", chunk_delay=0.0, fail=0, redirect="", think=0.0,
    hostile="", size=0)`` -> a running Backend process (``fail``: every generation answers that HTTP
    status; ``redirect``: a 307 to that URL; ``hostile``: devstack/openai_backend.py's modes)."""
    starter = Starter(Backend, "devstack.openai_backend", "/stats")

    def start(name: str = "backend", host: str = "127.0.0.1", chunk_delay: float = 0.0, fail: int = 0,
              redirect: str = "", think: float = 0.0, hostile: str = "", size: int = 0) -> Backend:
        return starter.start(name, host, "--chunk-delay", str(chunk_delay), "--fail", str(fail),
                             "--redirect", redirect, "--think", str(think), "--hostile", hostile, "--size", str(size))

    yield start
    starter.stop_all()


class RunningGateway:
    """``inference_gateway.server.run`` on its own event loop in a thread, stopped by ``stop()``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._serve, name="gateway", daemon=True)

    def _serve(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.stop_event = asyncio.Event()
        self.loop.run_until_complete(run("127.0.0.1", self.port, stop=self.stop_event))
        self.loop.close()

    def start(self) -> RunningGateway:
        self.thread.start()
        wait_serving(f"{self.url}/healthz", "the gateway")
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(timeout=30)

    def client(self, key: str, **options: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, **options)


@pytest.fixture
def cluster(transactional_db) -> Cluster:
    """A cluster without an API server: the gateway routes its models by their rows alone."""
    return Cluster.objects.create(name="snapshot", auth_method=Cluster.AuthMethod.SNAPSHOT)


@pytest.fixture
def gateway_settings(settings):
    """Short caches and intervals, so tests see changes within a fraction of a second."""
    settings.GATEWAY_CATALOG_TTL_SECONDS = 0
    settings.GATEWAY_CALLER_TTL_SECONDS = 0
    settings.GATEWAY_ENDPOINTS_TTL_SECONDS = 0
    settings.GATEWAY_LAST_REQUEST_INTERVAL_SECONDS = 1
    settings.GATEWAY_WAKE_TIMEOUT_SECONDS = 60
    settings.METRICS_TOKEN = "metrics-token-for-tests"
    return settings


@pytest.fixture
def gateway(transactional_db, gateway_settings):
    running = RunningGateway().start()
    yield running
    running.stop()


@pytest.fixture
def api_key(transactional_db, make_user):
    """The key of a portal API token whose user's team owns namespace ``team-a`` of every cluster."""
    team = Team.objects.create(name="team-a")
    NamespaceGrant.objects.create(team=team, cluster=None, namespace="team-a", access=NamespaceGrant.Access.VIEW)
    user = make_user("alice", teams=[team])
    _, key = issue_token(user, "gateway-tests")
    return key


def metrics_text(gateway) -> str:
    return requests.get(f"{gateway.url}/metrics", headers={"Authorization": "Bearer metrics-token-for-tests"},
                        timeout=5).text


def settles_at(read: Callable[[], float], expected: float) -> bool:
    """Whether a gateway metric reaches ``expected``, waited for: the gateway counts a request when
    its handler ends, which can be just after the client has read the answer's last byte, so a
    scrape sent at once may miss the last request (a busy machine made it miss one in six)."""
    seen: list[float] = []
    return bool(wait_for(lambda: seen.append(read()) or seen[-1] == expected, timeout=10,
                         message=f"the metric to reach {expected} (last read: {seen[-1:]})"))  # fmt: skip


def sample_value(text: str, name: str, **labels: str) -> float:
    """The value of one series in a Prometheus exposition (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    for line in text.splitlines():
        if not labels and line.startswith(f"{name} "):  # a series without labels
            return float(line.rsplit(" ", 1)[1])
        if line.startswith(f"{name}{{") and line.split("{", 1)[1].split("}", 1)[0] == wanted:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def serve_model(cluster: Cluster, model_name: str, backend_url: str, namespace: str = "team-a",
                **spec: Any) -> InferenceModel:
    """A mirrored InferenceModel row (as the sync stores it) whose backend is ``backend_url``."""
    return InferenceModel.objects.create(
        cluster=cluster, namespace=namespace, name=model_name.replace("/", "-").lower(), sync_state="Synced",
        spec={"modelName": model_name, "memory": "1Gi", "backendUrl": backend_url, **spec},
        status={"ready": True},
    )
