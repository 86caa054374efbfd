"""The inference gateway against the same backend called directly, in one run, 64 concurrent clients.

Three processes besides this one: the OpenAI-compatible backend (tests/support/openai_backend.py,
taking ``THINK_SECONDS`` before answering, as a small model's prefill would), the gateway
(``manage.py gateway``) and the load generator (bench/load_generator.py), so the load does not
share the gateway's event loop. Direct and gateway rounds alternate (``ROUNDS`` each) so a change
in the machine's load hits both alike; each figure compares the pooled samples.

Figures: ``gateway.overhead_p50_ms`` and ``gateway.overhead_p99_ms`` (gateway latency minus direct
latency at the same percentile; targets under 1 ms and under 5 ms), ``gateway.rps_ratio``
(gateway throughput over direct; target at least 0.7 on 2 cores),
``gateway.stream_first_chunk_overhead_ms`` (p50 time to the first SSE chunk, gateway minus
direct), and ``gateway.direct_rps`` for scale.
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
from models_app.models import InferenceModel
from tests.support.control_plane import free_port

CLIENTS = 64
SECONDS = 5.0
ROUNDS = 3
THINK_SECONDS = 0.02
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


def _load(url: str, key: str, stream: bool = False) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [sys.executable, "-m", "bench.load_generator", url, key, str(SECONDS), str(CLIENTS), out.name]
        subprocess.run([*args, "--stream"] if stream else args, cwd=ROOT, check=True)
        return json.loads(Path(out.name).read_text())


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
        _start(["-m", "tests.support.openai_backend", "--port", str(backend_port), "--think", str(THINK_SECONDS)],
               f"{backend_url}/stats"),
        _start(["manage.py", "gateway", "--host", "127.0.0.1", "--port", str(gateway_port)],
               f"{gateway_url}/healthz", env),
    ]
    try:
        direct, through, direct_stream, through_stream = {"rps": [], "ms": []}, {"rps": [], "ms": []}, [], []
        for _ in range(ROUNDS):
            for target, base in ((direct, backend_url), (through, gateway_url)):
                result = _load(f"{base}/v1/chat/completions", key)
                target["rps"].append(result["rps"])
                target["ms"] += result["latencies_ms"]
        for target, base in ((direct_stream, backend_url), (through_stream, gateway_url)):
            target += _load(f"{base}/v1/chat/completions", key, stream=True)["latencies_ms"]
        load = os.getloadavg()[0]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
    direct_rps = sum(direct["rps"]) / ROUNDS
    return {
        "gateway.overhead_p50_ms": _percentile(through["ms"], 0.5) - _percentile(direct["ms"], 0.5),
        "gateway.overhead_p99_ms": _percentile(through["ms"], 0.99) - _percentile(direct["ms"], 0.99),
        "gateway.rps_ratio": sum(through["rps"]) / ROUNDS / direct_rps,
        "gateway.stream_first_chunk_overhead_ms": _percentile(through_stream, 0.5) - _percentile(direct_stream, 0.5),
        "gateway.direct_rps": direct_rps,
        "gateway.machine_load_1m": load,
    }
