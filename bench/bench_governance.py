"""Team limits and the usage ledger: what they add to a request, how fast the ledger writes, and
how many requests two replicas let past one limit.

- ``gateway.limits_overhead_p99_ms`` (target under 1): two ``manage.py gateway`` processes on the
  same database and backend, one with limits and the ledger off (``USAGE_LIMITS=false``), one with
  them on in their production configuration (limits on the team, its model and its API token,
  every figure too high to refuse, so every request is admitted against five counters and
  reserves its tokens, is charged them and queued for the ledger; at this rate the counters are
  busy, so most requests are admitted from the gateway's quota leases and the rest by the Redis
  admission script, governance.leases; limits and teams held in memory and
  re-read on change notices). The load generator (bench/load_generator.py, ``LOAD_CLIENTS``
  clients pausing 40 ms on average, about 130 requests/s: on the shared 2-core machine at load
  10-15 a process gets a sixth of a core, and at 300 requests/s both gateways ran out of it, so the
  latencies were queues, not the work added per request) alternates between the two in 1 s
  slices (A B B A ...) for ``SECONDS`` in all, a few thousand requests per arm, so a p99 rests on
  dozens of samples; the figure is the p99 latency with minus without (and
  ``gateway.limits_overhead_p50_ms``), ``gateway.limits_overhead_requests`` the requests of the
  smaller arm and ``gateway.limits_machine_load_1m`` the load at the end. Because latency on a
  loaded machine is mostly waiting for a core, ``gateway.limits_cpu_ms_per_request`` is the work
  itself, whatever the load: CPU time (user and system) of the gateway with limits over its
  requests, minus the same of the gateway without (each is busy only in its own slices; it
  includes their background work: ledger COPY, token charges, re-reads). What it includes:
  the round trip to Redis (another process on the same cores: on a loaded machine, its turn on a
  core), the admission's and charging's Python, the ledger's queueing and its COPY (in the
  gateway's own thread, off the request path, but on the same 2 cores). What it leaves out:
  Redis on another host (a network round trip, typically 0.1-0.5 ms in one zone).
- ``ledger.rows_per_s`` (target at least 20,000): 200,000 request records queued in a
  :class:`governance.ledger.LedgerWriter`, then flushed with COPY in batches of 5,000 into the
  month's partition; rows over wall time of the flush. Leaves out the request path (appending to
  the queue is a deque append).
- ``limits.over_admitted_per_replica`` (target at most 1): two gateways with limits on, one
  requests-per-minute limit of 200 for the team; 64 concurrent clients send 600 requests split
  over both within one clock minute; (admitted - 200) / 2. Negative when units leased by one
  replica were unused when the burst ended (``limits.burst_admitted``: how many of the 200 got in).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import redis
from django.contrib.auth.models import User

from accounts.models import NamespaceGrant, Team
from accounts.tokens import issue_token
from bench.bench_gateway import CLIENTS, ROOT, SLICE_SECONDS, _database_url, _percentile, _start
from clusters.models import Cluster, SyncState
from devstack.ports import free_port
from governance.leases import IDLE_SECONDS
from governance.ledger import LedgerWriter, default_sink
from governance.limits import PREFIX
from governance.models import Limit, RequestRecord
from models_app.models import InferenceModel

SECONDS = 60.0
LOAD_CLIENTS = 8
PACED_PAUSE_MS = 40.0  # each load client's pause between requests: paced, not saturating
THINK_SECONDS = 0.02  # the Python backend's think time before it answers
LEDGER_ROWS = 200_000
BURST_LIMIT, BURST_REQUESTS = 200, 600
HUGE = 10**9
REDIS_URL = os.environ.get("GOVERNANCE_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"


def _ledger_rows_per_second() -> float:
    now = datetime.now(UTC)
    row = (now, "bench", "bench-user", "bench-token", "bench-model", 1, "bench", 200, 12.5, 3.2, 120, 80, False)

    async def fill_and_flush() -> float:
        writer = LedgerWriter(default_sink(), LEDGER_ROWS, 5_000, 3600)
        for _ in range(LEDGER_ROWS):
            writer.add(row)
        started = time.perf_counter()
        await writer.flush()
        spent = time.perf_counter() - started
        await writer.stop()
        return spent

    spent = asyncio.run(fill_and_flush())
    assert RequestRecord.objects.count() == LEDGER_ROWS
    return LEDGER_ROWS / spent


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _compare(off_url: str, on_url: str, key: str) -> tuple[dict, dict]:
    path = "/v1/chat/completions"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.load_generator", key, str(SECONDS), str(LOAD_CLIENTS), out.name,
                        "--url", f"{off_url}{path}", "--url", f"{on_url}{path}", "--pause-ms", str(PACED_PAUSE_MS),
                        "--slice-seconds", str(SLICE_SECONDS)], cwd=ROOT, check=True)
        off, on = json.loads(Path(out.name).read_text())
    return off, on


async def _burst(urls: list[str], key: str) -> int:
    """How many of ``BURST_REQUESTS`` the gateways admit, 64 at a time."""
    body = {"model": "bench", "max_tokens": 4, "messages": [{"role": "user", "content": "burst"}]}
    gate = asyncio.Semaphore(CLIENTS)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:

        async def one(index: int) -> int:
            async with gate, session.post(f"{urls[index % len(urls)]}/v1/chat/completions", json=body) as answer:
                await answer.read()
                return answer.status

        statuses = await asyncio.gather(*(one(index) for index in range(BURST_REQUESTS)))
    if set(statuses) - {200, 429}:
        raise RuntimeError(f"unexpected statuses in the burst: {sorted(set(statuses))}")
    return statuses.count(200)


def run() -> dict[str, float]:
    results = {"ledger.rows_per_s": _ledger_rows_per_second()}
    RequestRecord.objects.all().delete()
    backend_port = free_port()
    backend_url = f"http://127.0.0.1:{backend_port}"
    cluster = Cluster.objects.create(name="bench-governance", auth_method=Cluster.AuthMethod.SNAPSHOT)
    InferenceModel.objects.create(cluster=cluster, namespace="bench", name="bench", sync_state=SyncState.SYNCED,
                                  spec={"modelName": "bench", "memory": "1Gi", "backendUrl": backend_url},
                                  status={"ready": True})
    team = Team.objects.create(name="bench-team")
    NamespaceGrant.objects.create(team=team, cluster=None, namespace="bench")
    user = User.objects.create_user("bench-governance")
    team.members.add(user)
    _, key = issue_token(user, "bench")
    limit = Limit.objects.create(team=team, requests_per_minute=HUGE, tokens_per_minute=HUGE, monthly_tokens=HUGE,
                                 api_token_requests_per_minute=HUGE, api_token_tokens_per_minute=HUGE)
    Limit.objects.create(team=team, model="bench/bench", requests_per_minute=HUGE, tokens_per_minute=HUGE)
    counters = redis.Redis.from_url(REDIS_URL)
    for stale in counters.scan_iter(f"{PREFIX}:*"):
        counters.delete(stale)
    env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "false", "GOVERNANCE_REDIS_URL": REDIS_URL}
    ports = [free_port(), free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    processes = [_start([sys.executable, "-m", "devstack.openai_backend", "--port", str(backend_port), "--think",
                         str(THINK_SECONDS)], f"{backend_url}/stats")]
    try:
        for port, url, enabled in zip(ports, urls, ("false", "true", "true"), strict=True):
            gateway = [sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port)]
            processes.append(_start(gateway, f"{url}/healthz", {**env, "USAGE_LIMITS": enabled}))
        gateways = [process.pid for process in processes[1:3]]
        cpu_before = [_cpu_seconds(pid) for pid in gateways]
        off, on = _compare(urls[0], urls[1], key)
        off_cpu, on_cpu = (_cpu_seconds(pid) - before for pid, before in zip(gateways, cpu_before, strict=True))
        results["gateway.limits_cpu_ms_per_request"] = 1000 * (on_cpu / len(on["latencies_ms"])
                                                                - off_cpu / len(off["latencies_ms"]))
        results["gateway.limits_overhead_p99_ms"] = (_percentile(on["latencies_ms"], 0.99)
                                                     - _percentile(off["latencies_ms"], 0.99))
        results["gateway.limits_overhead_p50_ms"] = (_percentile(on["latencies_ms"], 0.5)
                                                     - _percentile(off["latencies_ms"], 0.5))
        results["gateway.limits_overhead_requests"] = min(len(on["latencies_ms"]), len(off["latencies_ms"]))
        results["gateway.limits_machine_load_1m"] = os.getloadavg()[0]
        limit.requests_per_minute = BURST_LIMIT
        limit.save()
        # both replicas re-read the limits (on the change notice) and give back, once idle, what
        # they leased under the old one: the counters deleted below hold none of it any more
        time.sleep(IDLE_SECONDS + 1)
        while time.time() % 60 > 30:  # the burst falls in one clock minute
            time.sleep(0.2)
        minute = int(time.time() // 60)
        for stale in counters.scan_iter(f"{PREFIX}:r:*"):
            counters.delete(stale)
        admitted = asyncio.run(_burst(urls[1:], key))
        if int(time.time() // 60) != minute:
            raise RuntimeError("the burst crossed a minute boundary: run again")
        results["limits.over_admitted_per_replica"] = (admitted - BURST_LIMIT) / 2
        results["limits.burst_admitted"] = admitted
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        counters.close()
    return results
