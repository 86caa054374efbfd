"""The inference gateway against a fast native backend called directly, in one run, both arms in turns.

Three kinds of process besides this one, all started here: the backend (tools/fast-backend: Go,
fasthttp, a fixed OpenAI-shaped reply with ``usage`` at once, tens of thousands of requests/s on
these cores, so the direct arm measures the machine, not a Python backend's cap of about
2,600/s), the gateway (``manage.py gateway --workers GATEWAY_WORKERS``: one per core unless
``BENCH_GATEWAY_WORKERS`` says otherwise) and the load generator
(tools/http-load: Go, fasthttp's client, ``CLIENTS`` keep-alive connections per arm, so the load
tool is not what caps either arm). The arms take turns in slices of ``SLICE_SECONDS``
(direct, gateway, gateway, direct, ...), ``SECONDS`` in all per load, so a load that comes and
goes on the shared machine falls on both alike. Everything shares the machine's cores: the
direct arm's backend and load generator have them to themselves, the gateway arm adds the
gateway's processes beside them (that contention is part of the gateway's cost here, as it would
be on a node that hosts it).

Figures (all against the fast backend; what each leaves out is said with it):

- ``gateway.direct_rps_fast_backend`` / ``gateway.rps_fast_backend``: saturated throughput, the
  ``CLIENTS`` workers sending one request after the other with no pause, directly and through the
  gateway; ``gateway.rps_ratio_fast_backend`` is gateway over direct (target >= 0.5). Leaves out:
  the time of a real model (the backend answers at once, so this is the gateway's own rate, the
  most it can add to a model that answers in no time), TLS, and request bodies above a few
  hundred bytes.
- ``gateway.overhead_p50_ms_fast_backend`` / ``gateway.overhead_p99_ms_fast_backend``: latency
  through the gateway minus latency direct, at the same percentile, under paced load: Poisson
  arrivals at ``gateway.paced_rps_fast_backend``, half the gateway's saturated rate just measured,
  the same arrivals in both arms (target p99 < 5 ms). A latency counts from the request's send to
  the answer's last byte; arrivals the load tool had no free connection for are not timed (their
  count is in the output, and is 0 at this rate). Leaves out: the load tool's own queueing, the
  first request on a connection (warm-up), the catalog's periodic reload only as far as it falls
  into the run.
- ``gateway.stream_first_chunk_overhead_p50_ms_fast_backend``: the same paced load asking for SSE
  streams; time to the first chunk, gateway minus direct, at the median.
- ``gateway.reference_proxy_rps_ratio_fast_backend`` and
  ``gateway.reference_proxy_overhead_p50_ms_fast_backend`` / ``_p99_ms_fast_backend``: the same
  saturated and paced loads (paced at half *its* saturated rate) through tools/reference-proxy
  instead of the gateway: fasthttp relaying each request to the backend and doing nothing else (no
  caller, route, limit, ledger or metrics). It is the ceiling any proxy reaches on this machine,
  measured in the same run, so the gateway's figures read against what is possible here, not only
  against the targets. Leaves out what the gateway's figures leave out.
- ``gateway.cpu_us_per_request_fast_backend`` / ``gateway.system_cpu_us_per_request_fast_backend``
  and ``gateway.reference_proxy_cpu_us_per_request_fast_backend`` /
  ``gateway.reference_proxy_system_cpu_us_per_request_fast_backend``: CPU the gateway's processes
  (its supervisor and workers), and the reference proxy's, spent over the saturated run, per
  request they answered (the load tool's warm-up requests counted too, as their CPU is), in
  microseconds; ``system`` is the kernel's part of it (system calls: the two sockets' reads and
  writes, epoll), from /proc (bench/cpu_use.py). They say why the ratio is what it is: the direct
  arm's backend and load tool spend their own microseconds, and a proxy's can only add to them.
  Leaves out: what the gateway makes other processes spend (PostgreSQL's backend writing the
  ledger, Redis admitting), the kernel's network work not charged to a process (softirqs), and
  what the backend and the load tool spend more per request when they share the cores with a proxy.
- ``gateway.workers`` (the gateway processes, one per core by default) and
  ``gateway.machine_load_1m`` (the 1-minute load average at the end: the machine may be shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from accounts.tokens import issue_token
from bench.cpu_use import SYSTEM, CpuSpan, process_tree
from clusters.models import Cluster, SyncState
from devstack.ports import free_port, wait_serving
from inference_gateway.workers import cores
from models_app.models import InferenceModel

CLIENTS = 64
SECONDS = 16.0  # per load, both arms' slices together
SLICE_SECONDS = 1.0
PACED_FRACTION = 0.5  # of the gateway's saturated rate
ROOT = Path(settings.BASE_DIR)
GATEWAY_WORKERS = int(os.environ.get("BENCH_GATEWAY_WORKERS", "0")) or cores()


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _database_url() -> str:
    """The benchmark's throwaway database, for the gateway process."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _go_tool(name: str) -> str:
    """The path of tools/<name>'s binary, built once (tools/go-build.sh caches it by hash)."""
    return subprocess.run(
        ["bash", str(ROOT / "tools" / name / "build.sh")], check=True, capture_output=True, text=True
    ).stdout.strip()


def _start(args: list[str], health: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``args`` and wait until ``health`` answers (devstack.ports.wait_serving)."""
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_serving(health, " ".join(args[1:3]), process)
    except RuntimeError:
        process.kill()
        raise
    return process


def _all_workers(gateway_url: str) -> None:
    """Wait until every worker answers, its whole catalog read: the load's keep-alive connections
    would otherwise all go to the first one up, and a measurement would include a worker's first
    read of the routes."""
    seen: set[str] = set()
    deadline = time.monotonic() + 120
    while len(seen) < GATEWAY_WORKERS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(seen)} of {GATEWAY_WORKERS} gateway workers answered, catalog read")
        answer = requests.get(f"{gateway_url}/healthz", timeout=5)
        if answer.headers["X-Catalog-Read"] == "whole":
            seen.add(answer.headers["X-Gateway-Worker"])


def _compare(load: str, urls: tuple[str, str], key: str, rate: float = 0.0, stream: bool = False) -> tuple[dict, dict]:
    """Both arms in one load-generator run, taking turns in slices of ``SLICE_SECONDS``: the
    direct arm's and the gateway's results (``rps``, ``latencies_ms``, ``errors``, ``late``)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [
            load,
            "-key",
            key,
            "-seconds",
            str(SECONDS),
            "-slice",
            str(SLICE_SECONDS),
            "-clients",
            str(CLIENTS),
            "-rate",
            str(rate),
            "-out",
            out.name,
            "-url",
            urls[0],
            "-url",
            urls[1],
        ]
        subprocess.run([*args, "-stream"] if stream else args, cwd=ROOT, check=True)
        direct, through = json.loads(Path(out.name).read_text())
    for arm in (direct, through):
        if arm["errors"]:
            raise RuntimeError(f"{arm['url']}: {arm['errors']} failed requests, first: {arm['first_error']}")
    return direct, through


def _saturated_with_cpu(
    load: str, urls: tuple[str, str], key: str, proxy: Callable[[], list[int]]
) -> tuple[dict, dict, float, float]:
    """The saturated load (:func:`_compare`), with what the processes ``proxy()`` names (those of the
    second arm) spent over it: CPU and its system part, microseconds per request they answered."""
    spans = CpuSpan(proxy), CpuSpan(proxy, (SYSTEM,))
    for span in spans:
        span.start()
    direct, through = _compare(load, urls, key)
    cpu, system = (span.stop() for span in spans)
    answered = len(through["latencies_ms"]) + through["warm_up"]
    return direct, through, cpu / answered * 1e6, system / answered * 1e6


def _overhead(direct: dict, through: dict, fraction: float) -> float:
    return _percentile(through["latencies_ms"], fraction) - _percentile(direct["latencies_ms"], fraction)


def run() -> dict[str, float]:
    backend_port, gateway_port = free_port(), free_port()
    backend_url, gateway_url = f"http://127.0.0.1:{backend_port}", f"http://127.0.0.1:{gateway_port}"
    cluster = Cluster.objects.create(name="bench-gateway", auth_method=Cluster.AuthMethod.SNAPSHOT)
    InferenceModel.objects.create(
        cluster=cluster,
        namespace="bench",
        name="bench",
        sync_state=SyncState.SYNCED,
        spec={"modelName": "bench", "memory": "1Gi", "backendUrl": backend_url},
        status={"ready": True},
    )
    _, key = issue_token(User.objects.create_user("bench-gateway", is_staff=True), "bench")
    env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "false"}
    load = _go_tool("http-load")
    path = "/v1/chat/completions"
    urls = (f"{backend_url}{path}", f"{gateway_url}{path}")
    reference_port = free_port()
    reference_url = f"http://127.0.0.1:{reference_port}"
    processes = [
        _start([_go_tool("fast-backend"), "--port", str(backend_port)], f"{backend_url}/healthz"),
        _start([_go_tool("reference-proxy"), "-listen", f"127.0.0.1:{reference_port}", "-upstream",
                f"127.0.0.1:{backend_port}"], f"{reference_url}/healthz"),
        _start(
            [sys.executable, "manage.py", "gateway", "--port", str(gateway_port), "--workers", str(GATEWAY_WORKERS)],
            f"{gateway_url}/healthz",
            env,
        ),
    ]
    try:
        _all_workers(gateway_url)
        gateway = processes[2]
        full_direct, full_gateway, gateway_cpu, gateway_system = _saturated_with_cpu(
            load, urls, key, lambda: process_tree(gateway.pid)
        )
        rate = PACED_FRACTION * full_gateway["rps"]
        paced_direct, paced_gateway = _compare(load, urls, key, rate)
        stream_direct, stream_gateway = _compare(load, urls, key, rate, stream=True)
        reference_urls = (urls[0], f"{reference_url}{path}")
        reference = processes[1]
        full_direct_r, full_reference, reference_cpu, reference_system = _saturated_with_cpu(
            load, reference_urls, key, lambda: [reference.pid]
        )
        paced_direct_r, paced_reference = _compare(load, reference_urls, key, PACED_FRACTION * full_reference["rps"])
        machine_load = os.getloadavg()[0]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    return {
        "gateway.direct_rps_fast_backend": full_direct["rps"],
        "gateway.rps_fast_backend": full_gateway["rps"],
        "gateway.rps_ratio_fast_backend": full_gateway["rps"] / full_direct["rps"],
        "gateway.paced_rps_fast_backend": rate,
        "gateway.overhead_p50_ms_fast_backend": _overhead(paced_direct, paced_gateway, 0.5),
        "gateway.overhead_p99_ms_fast_backend": _overhead(paced_direct, paced_gateway, 0.99),
        "gateway.stream_first_chunk_overhead_p50_ms_fast_backend": _overhead(stream_direct, stream_gateway, 0.5),
        "gateway.reference_proxy_rps_ratio_fast_backend": full_reference["rps"] / full_direct_r["rps"],
        "gateway.reference_proxy_overhead_p50_ms_fast_backend": _overhead(paced_direct_r, paced_reference, 0.5),
        "gateway.reference_proxy_overhead_p99_ms_fast_backend": _overhead(paced_direct_r, paced_reference, 0.99),
        "gateway.cpu_us_per_request_fast_backend": gateway_cpu,
        "gateway.system_cpu_us_per_request_fast_backend": gateway_system,
        "gateway.reference_proxy_cpu_us_per_request_fast_backend": reference_cpu,
        "gateway.reference_proxy_system_cpu_us_per_request_fast_backend": reference_system,
        "gateway.workers": GATEWAY_WORKERS,
        "gateway.machine_load_1m": machine_load,
    }
