"""The inference gateway with 100,000 mirrored serving objects beside the one it serves: what the
catalog's size costs (inference_gateway/catalog.py). Same processes and tools as
bench/bench_gateway.py (tools/fast-backend, tools/http-load, ``manage.py gateway --workers``), whose
helpers it reuses; the catalog is bench/dataset.py's (10 clusters; 80,000 InferenceModels, 10,000
KubeAI Models, 10,000 ModelServices), built after the one-model arm.

Figures:

- ``gateway.cpu_us_per_request_one_model_catalog`` and ``gateway.cpu_us_per_request_100k_catalog``:
  CPU the gateway's processes spent per request answered under the saturated load
  (bench_gateway's ``_saturated_with_cpu``), first with the served model alone in the database, then
  with the 100,000 others, in the same run; ``gateway.cpu_ratio_100k_to_one_model_catalog`` is the
  second over the first (target: within 10%, <= 1.1). Leaves out what bench_gateway's CPU figures
  leave out (PostgreSQL's and Redis's CPU, softirqs), and the first read of the routes (before the
  load starts).
- ``gateway.first_request_s_100k_catalog``: from the gateway's process start (``Popen``) to its first
  answered chat request (200), polled every 20 ms on new connections. Includes Python's and Django's
  start, the workers' start and the read of the rows the request's model may name (a worker answers
  from those until its whole read is done: inference_gateway/catalog.py) (target < 5 s). Leaves out
  the dataset's build and the machine's other load (reported beside it). The figures after it are
  taken once every worker has read its whole catalog.
- ``gateway.overhead_p50_ms_at_500_rps_100k_catalog`` / ``gateway.overhead_p99_ms_at_500_rps_100k_catalog``:
  bench_gateway's overhead (through the gateway minus direct, at the same percentile) under Poisson
  arrivals at 500 requests/s, with the 100,000 objects in the catalog (target p99 < 5 ms). Leaves out
  what bench_gateway's overhead leaves out.
- ``gateway.route_fresh_ms_100k_catalog``: from the commit of a change to a model row (its
  ``spec.modelName`` renamed) to the first request on a new connection that routes by the new name
  (polled every millisecond or so), the worst of ``FRESH_ROUNDS``, while another thread commits
  changes to ``CHANGES_PER_SECOND`` other rows (their ``spec.memory``, 10 rows a statement) that
  the gateway must read too (target < 1,000 ms). ``gateway.route_fresh_p50_ms_100k_catalog`` is the
  median. Leaves out: the polling's own latency (a request each time, about a millisecond).
- ``gateway.machine_load_1m_catalog``: the 1-minute load average at the end.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time

import requests
from django.contrib.auth.models import User
from django.db import connection, connections

from accounts.tokens import issue_token
from bench import dataset
from bench.bench_gateway import (
    GATEWAY_WORKERS,
    ROOT,
    _all_workers,
    _compare,
    _database_url,
    _go_tool,
    _overhead,
    _saturated_with_cpu,
    _start,
)
from bench.cpu_use import process_tree
from clusters.models import Cluster, SyncState
from devstack.ports import free_port
from models_app.models import InferenceModel, KubeAIModel, ModelService

PACED_RPS = 500
CHANGES_PER_SECOND = 100
CHANGES_PER_STATEMENT = 10
FRESH_ROUNDS = 10
PATH = "/v1/chat/completions"


def _serve(cluster: Cluster, name: str, model_name: str, backend_url: str) -> InferenceModel:
    return InferenceModel.objects.create(
        cluster=cluster, namespace="bench", name=name, sync_state=SyncState.SYNCED,
        spec={"modelName": model_name, "memory": "1Gi", "backendUrl": backend_url}, status={"ready": True},
    )


def _chat(gateway_url: str, key: str, model: str) -> int:
    answer = requests.post(f"{gateway_url}{PATH}", headers={"Authorization": f"Bearer {key}", "Connection": "close"},
                           json={"model": model, "messages": [{"role": "user", "content": "hi"}]}, timeout=60)
    return answer.status_code


def _gateway(port: int) -> list[str]:
    return [sys.executable, "manage.py", "gateway", "--port", str(port), "--workers", str(GATEWAY_WORKERS)]


def _one_model_cpu(load: str, backend_url: str, key: str, env: dict[str, str]) -> float:
    port = free_port()
    gateway = _start(_gateway(port), f"http://127.0.0.1:{port}/healthz", env)
    try:
        _all_workers(f"http://127.0.0.1:{port}")
        _, _, cpu, _ = _saturated_with_cpu(load, (f"{backend_url}{PATH}", f"http://127.0.0.1:{port}{PATH}"), key,
                                           lambda: process_tree(gateway.pid))
    finally:
        gateway.terminate()
        gateway.wait(timeout=60)
    return cpu


class Changes(threading.Thread):
    """``CHANGES_PER_SECOND`` committed changes of other model rows' ``spec.memory`` (each a notice
    the gateway reads), ``CHANGES_PER_STATEMENT`` rows a statement, until stopped."""

    def __init__(self, ids: list[int]) -> None:
        super().__init__(daemon=True)
        self.ids, self.stopping, self.made = ids, threading.Event(), 0

    def run(self) -> None:
        interval = CHANGES_PER_STATEMENT / CHANGES_PER_SECOND
        next_at, offset = time.monotonic(), 0
        try:
            with connections["default"].cursor() as cursor:
                while not self.stopping.is_set():
                    chunk = self.ids[offset:offset + CHANGES_PER_STATEMENT]
                    offset = (offset + CHANGES_PER_STATEMENT) % (len(self.ids) - CHANGES_PER_STATEMENT)
                    cursor.execute("UPDATE models_app_inferencemodel SET spec = jsonb_set(spec, '{memory}', "
                                   "to_jsonb(%s::text)) WHERE id = ANY(%s)", [f"{1 + self.made % 64}Gi", chunk])
                    self.made += len(chunk)
                    next_at += interval
                    self.stopping.wait(max(0.0, next_at - time.monotonic()))
        finally:
            connections["default"].close()


def _fresh_ms(gateway_url: str, key: str, probe: InferenceModel) -> float:
    """One rename of ``probe``'s model name: milliseconds from its commit to the first request that
    the new name routes."""
    renamed = "probe-b" if probe.spec["modelName"] == "probe-a" else "probe-a"
    probe.spec = {**probe.spec, "modelName": renamed}
    probe.save()  # autocommit: committed on return
    committed = time.monotonic()
    while _chat(gateway_url, key, f"bench/{renamed}") != 200:
        if time.monotonic() - committed > 60:
            raise RuntimeError(f"bench/{renamed} did not route within 60 s of its commit")
    return (time.monotonic() - committed) * 1000


def run() -> dict[str, float]:
    if connection.vendor != "postgresql":
        raise RuntimeError("the catalog benchmark needs PostgreSQL (its notices and COPY)")
    backend_port = free_port()
    backend_url = f"http://127.0.0.1:{backend_port}"
    load = _go_tool("http-load")
    env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "false"}
    _, key = issue_token(User.objects.create_user("bench-gateway", is_staff=True), "bench")
    backend = _start([_go_tool("fast-backend"), "--port", str(backend_port)], f"{backend_url}/healthz")
    try:
        cluster = Cluster.objects.create(name="bench-gateway", auth_method=Cluster.AuthMethod.SNAPSHOT)
        _serve(cluster, "bench", "bench", backend_url)
        one_model_cpu = _one_model_cpu(load, backend_url, key, env)
        InferenceModel.objects.all().delete()  # the dataset sets its own ids
        cluster.delete()

        dataset.build(clusters=10, models_per_cluster=8_000, kubeai_models=10_000, model_services=10_000, runs=0,
                      observations=0)
        cluster = Cluster.objects.create(name="bench-gateway", auth_method=Cluster.AuthMethod.SNAPSHOT)
        _serve(cluster, "bench", "bench", backend_url)
        probe = _serve(cluster, "probe", "probe-a", backend_url)
        others = list(InferenceModel.objects.exclude(cluster=cluster).order_by("pk").values_list("pk", flat=True))
        serving = sum(kind.objects.count() for kind in (InferenceModel, KubeAIModel, ModelService))

        port = free_port()
        gateway_url = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        gateway = subprocess.Popen(_gateway(port), cwd=ROOT, env=env, stdout=subprocess.DEVNULL)  # timed, not awaited
        try:
            while True:
                try:
                    if _chat(gateway_url, key, "bench") == 200:
                        break
                except requests.ConnectionError:
                    pass
                if gateway.poll() is not None or time.monotonic() - started > 600:
                    raise RuntimeError("the gateway answered no request within 600 s")
                time.sleep(0.02)
            first_request = time.monotonic() - started
            _all_workers(gateway_url)
            urls = (f"{backend_url}{PATH}", f"{gateway_url}{PATH}")
            _, _, cpu_100k, _ = _saturated_with_cpu(load, urls, key, lambda: process_tree(gateway.pid))
            paced_direct, paced_gateway = _compare(load, urls, key, PACED_RPS)
            changes = Changes(others)
            changes.start()
            try:
                fresh = [_fresh_ms(gateway_url, key, probe) for _ in range(FRESH_ROUNDS)]
            finally:
                changes.stopping.set()
                changes.join(timeout=30)
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)
    finally:
        backend.terminate()
        backend.wait(timeout=30)
    return {
        "gateway.catalog_objects_100k_catalog": serving,
        "gateway.cpu_us_per_request_one_model_catalog": one_model_cpu,
        "gateway.cpu_us_per_request_100k_catalog": cpu_100k,
        "gateway.cpu_ratio_100k_to_one_model_catalog": cpu_100k / one_model_cpu,
        "gateway.first_request_s_100k_catalog": first_request,
        "gateway.overhead_p50_ms_at_500_rps_100k_catalog": _overhead(paced_direct, paced_gateway, 0.5),
        "gateway.overhead_p99_ms_at_500_rps_100k_catalog": _overhead(paced_direct, paced_gateway, 0.99),
        "gateway.route_fresh_ms_100k_catalog": max(fresh),
        "gateway.route_fresh_p50_ms_100k_catalog": statistics.median(fresh),
        "gateway.route_fresh_changes_made_100k_catalog": changes.made,
        "gateway.machine_load_1m_catalog": os.getloadavg()[0],
    }


