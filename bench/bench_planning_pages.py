"""The planning page and API at platform scale: 10 clusters x 10,000 InferenceModels (100,000 rows).

Figures (median of 3, staff, who sees every row): ``pages.planning_get_inprocess_ms_100k`` (accounts of
every pool, chart), ``pages.planning_post_inprocess_ms_100k`` (a what-if on one cluster of 10,000 models,
with the placement chart), ``api.planning_plan_inprocess_ms_100k`` and ``api.planning_pools_inprocess_ms_100k``;
``pages.planning_inprocess_ms_100k`` is the slowest of the four. Target: under 0.5 s. Measured in a process
whose collector is set up as the web workers' is (:mod:`bench.web_worker`).

In process (``_inprocess_`` figures): Django's test client, one request at a time. Leaves out the
HTTP server (accept, parse, its workers' queueing under concurrent clients), the transfer and other
clients' load: bench/bench_http.py measures the same pages over HTTP with 16 clients.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from bench.planner_data import add_models, make_cluster
from bench.web_worker import collector_as_in_web_workers

CLUSTERS, PER_CLUSTER, POOLS, NODES = 10, 10_000, 5, 4
RUNS = 3
ESTIMATE = {"name": "new-70b", "namespace": "team-0", "pool": "pool-0", "memory": "160Gi", "gpus": 2,
            "gpu_memory": "140Gi"}  # fmt: skip
FORM_MODELS = "- estimate: {name: new-70b, namespace: team-0, pool: pool-0, memory: 160Gi, gpus: 2, gpu_memory: 140Gi}"


def median_ms(request: Callable[[], object]) -> float:
    request()  # warm-up: first-request imports and template loading are not page time
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        response = request()
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.content[:500]
    return statistics.median(samples)


def run() -> dict[str, float]:
    for number in range(CLUSTERS):
        cluster = make_cluster(f"scale-{number}", pools=POOLS, nodes=NODES)
        add_models(cluster, PER_CLUSTER, seed=number, pools=POOLS)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would after a load: plans see these rows, not the last module's
    client = Client()
    client.force_login(User.objects.create_user("bench-staff", is_staff=True, is_superuser=True))
    with collector_as_in_web_workers():
        figures = measure_routes(client)
    figures["pages.planning_inprocess_ms_100k"] = max(figures.values())
    return figures


def measure_routes(client: Client) -> dict[str, float]:
    return {
        "pages.planning_get_inprocess_ms_100k": median_ms(lambda: client.get("/planning/")),
        "pages.planning_post_inprocess_ms_100k": median_ms(lambda: client.post(
            "/planning/", {"cluster": "scale-0", "models": FORM_MODELS, "include_running": "on"})),
        "api.planning_plan_inprocess_ms_100k": median_ms(lambda: client.post(
            "/api/planning/plan/", {"cluster": "scale-0", "models": [{"estimate": ESTIMATE}]},
            content_type="application/json")),
        "api.planning_pools_inprocess_ms_100k": median_ms(lambda: client.get("/api/planning/pools/")),
    }  # fmt: skip
