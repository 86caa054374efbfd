"""The inference gateway against the same backend called directly, in one run, 64 concurrent clients.

Three processes besides this one: the OpenAI-compatible backend (devstack/openai_backend.py,
taking ``THINK_SECONDS`` before answering, as a small model's prefill would), the gateway
(``manage.py gateway``) and the load generator (bench/load_generator.py), so the load does not
share the gateway's event loop. In both arms the same 64 clients each hold one keep-alive
connection (to the backend, or to the gateway, which keeps its own to the backend) and pause a
seeded random time between requests, the same pauses in both arms: without them the 64 clients
move in lockstep and meet the backend as one burst it serves serially, which the gateway, slower
per request, smoothed out, so the direct arm looked slower than the gateway (see
bench/load_generator.py). The two arms take turns in one load-generator run, in slices of
``SLICE_SECONDS`` (direct, gateway, gateway, direct, ...), ``SECONDS`` in all per load, so a load
that comes and goes on the machine falls on both alike (whole 5 s runs one after the other gave
figures that moved by several milliseconds with the machine's load).

Two loads, because latency under a saturated closed loop is the length of a queue (Little's law:
64 clients over the throughput), not what the gateway adds to a request:

- **Paced** (latency): each client pauses ``PACED_PAUSE_MS`` on average, about 1,000 requests/s
  in both arms, which every process keeps up with; the backend then sees the same arrival rate
  and the same requests in flight (about 20) in both arms, and the difference in latency is
  the gateway's work per request plus its share of the 2 cores. ``gateway.overhead_p50_ms`` and
  ``gateway.overhead_p99_ms`` (gateway latency minus direct latency at the same percentile; targets
  under 1 ms and under 5 ms), ``gateway.stream_first_chunk_overhead_ms`` (p50 time to the first
  SSE chunk, gateway minus direct) and ``gateway.paced_rps`` (the direct arm's rate, for scale).
- **Saturated** (throughput): the clients pause only ``SATURATED_PAUSE_MS`` on average (enough to
  break the lockstep); ``gateway.rps_ratio`` (gateway throughput over direct; target at least 0.7 on
  2 cores, where the gateway takes CPU from the load generator and the backend) and
  ``gateway.direct_rps``.

``gateway.machine_load_1m`` is the 1-minute load average at the end (the machine may be shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from accounts.tokens import issue_token
from clusters.models import Cluster, SyncState
from devstack.control_plane import free_port
from models_app.models import InferenceModel

CLIENTS = 64
SECONDS = 16.0  # per load, both arms' slices together
SLICE_SECONDS = 1.0
THINK_SECONDS = 0.02
PACED_PAUSE_MS = 40.0
SATURATED_PAUSE_MS = 2.0
ROOT = Path(settings.BASE_DIR)


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _database_url() -> str:
    """The benchmark's throwaway database, for the gateway process."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _start(args: list[str], health: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            requests.get(health, timeout=1)
            return process
        except requests.ConnectionError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{args} did not serve {health}")


def _compare(backend_url: str, gateway_url: str, key: str, pause_ms: float, stream: bool = False) -> tuple[dict, dict]:
    """Both arms in one load-generator run, taking turns in slices of ``SLICE_SECONDS``: the
    direct arm's and the gateway's results (``rps``, ``latencies_ms``)."""
    path = "/v1/chat/completions"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [sys.executable, "-m", "bench.load_generator", key, str(SECONDS), str(CLIENTS), out.name,
                "--url", f"{backend_url}{path}", "--url", f"{gateway_url}{path}", "--pause-ms", str(pause_ms),
                "--slice-seconds", str(SLICE_SECONDS)]
        subprocess.run([*args, "--stream"] if stream else args, cwd=ROOT, check=True)
        direct, through = json.loads(Path(out.name).read_text())
    return direct, through


def _overhead(direct: dict, through: dict, fraction: float) -> float:
    return _percentile(through["latencies_ms"], fraction) - _percentile(direct["latencies_ms"], fraction)


def run() -> dict[str, float]:
    backend_port, gateway_port = free_port(), free_port()
    backend_url, gateway_url = f"http://127.0.0.1:{backend_port}", f"http://127.0.0.1:{gateway_port}"
    cluster = Cluster.objects.create(name="bench-gateway", auth_method=Cluster.AuthMethod.SNAPSHOT)
    InferenceModel.objects.create(cluster=cluster, namespace="bench", name="bench", sync_state=SyncState.SYNCED,
                                  spec={"modelName": "bench", "memory": "1Gi", "backendUrl": backend_url},
                                  status={"ready": True})
    _, key = issue_token(User.objects.create_user("bench-gateway", is_staff=True), "bench")
    env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "false"}
    processes = [
        _start(["-m", "devstack.openai_backend", "--port", str(backend_port), "--think", str(THINK_SECONDS)],
               f"{backend_url}/stats"),
        _start(["manage.py", "gateway", "--host", "127.0.0.1", "--port", str(gateway_port)],
               f"{gateway_url}/healthz", env),
    ]
    try:
        paced_direct, paced_gateway = _compare(backend_url, gateway_url, key, PACED_PAUSE_MS)
        stream_direct, stream_gateway = _compare(backend_url, gateway_url, key, PACED_PAUSE_MS, stream=True)
        full_direct, full_gateway = _compare(backend_url, gateway_url, key, SATURATED_PAUSE_MS)
        load = os.getloadavg()[0]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
    return {
        "gateway.overhead_p50_ms": _overhead(paced_direct, paced_gateway, 0.5),
        "gateway.overhead_p99_ms": _overhead(paced_direct, paced_gateway, 0.99),
        "gateway.stream_first_chunk_overhead_ms": _overhead(stream_direct, stream_gateway, 0.5),
        "gateway.paced_rps": paced_direct["rps"],
        "gateway.rps_ratio": full_gateway["rps"] / full_direct["rps"],
        "gateway.direct_rps": full_direct["rps"],
        "gateway.machine_load_1m": load,
    }
