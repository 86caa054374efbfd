"""The right-sizing page at platform scale: 10 clusters x 10,000 InferenceModels (100,000 models)
with 200,000 observations (the newest and one before it for each), rendered for staff (all
clusters) through Django's test client, as a browser would ask for it.

Figure: ``pages.rightsizing_ms_100k``, the median of 3 renders after one warm-up (the page is one
page of 50 rows, its COUNT and the pool totals' GROUP BY, all in SQL), and
``pages.rightsizing_queries_100k`` (SQL statements per render). Rows are written with COPY
(clusters.bulk), so the setup takes seconds, not minutes.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from clusters import bulk
from clusters.models import Cluster, SyncState
from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import evaluate

CLUSTERS = 10
PER_CLUSTER = int(os.environ.get("BENCH_RIGHTSIZING_PAGE_MODELS", "10000"))
GI = 1024**3


def _models(cluster: Cluster) -> Iterator[InferenceModel]:
    for index in range(PER_CLUSTER):
        row = InferenceModel(
            cluster=cluster, namespace=f"team-{index % 50}", name=f"model-{index:05d}", sync_state=SyncState.SYNCED,
            spec={"modelName": f"model-{index:05d}", "memory": f"{16 + index % 64}Gi", "backendUrl": "http://v:8000",
                  "nodeSelector": {"inference-pool": f"pool-{index % 10}"}},
        )  # fmt: skip
        row.project()
        yield row


def _observations(refreshes: list[Refresh], rows: list[tuple], at: datetime) -> Iterator[Observation]:
    by_cluster = {refresh.cluster_id: refresh for refresh in refreshes}
    for pk, cluster_id, namespace, name, model_name, pool, declared in rows:
        for latest, when in ((False, at - timedelta(days=1)), (True, at)):
            peak = declared * (60 + pk % 45) // 100
            verdict = evaluate(declared, peak)
            yield Observation(
                refresh=by_cluster[cluster_id], cluster_id=cluster_id, kind="InferenceModel", object_id=pk,
                model_id=pk, namespace=namespace, name=name, model_name=model_name, node_pool=pool,
                observed_at=when, is_latest=latest, samples=10080, declared_bytes=declared, peak_bytes=peak,
                ratio=verdict.ratio, utilization_percent=verdict.utilization_percent,
                recommended_bytes=verdict.recommended_bytes, freed_bytes=verdict.freed_bytes,
                recommendation=verdict.recommendation, overprovisioned=verdict.overprovisioned,
            )  # fmt: skip


def run() -> dict[str, float]:
    at = datetime(2026, 11, 1, tzinfo=UTC)
    started = time.perf_counter()
    clusters = [
        Cluster.objects.create(name=f"bench-page-{index}", auth_method=Cluster.AuthMethod.SNAPSHOT)
        for index in range(CLUSTERS)
    ]
    for cluster in clusters:
        bulk.insert(InferenceModel, _models(cluster))
    refreshes = [
        Refresh.objects.create(cluster=cluster, started_at=at, finished_at=at, window_seconds=604800, ok=True)
        for cluster in clusters
    ]
    # the rows are read before the COPY starts: one connection cannot stream a cursor and a COPY at once
    rows = list(InferenceModel.objects.values_list("id", "cluster_id", "namespace", "name", "model_name",
                                                   "node_pool", "memory_bytes"))  # fmt: skip
    bulk.insert(Observation, _observations(refreshes, rows, at))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    setup_s = time.perf_counter() - started
    models = CLUSTERS * PER_CLUSTER
    print(f"rightsizing page: {models:,} models, {2 * models:,} observations, setup {setup_s:.1f} s")
    client = Client()
    client.force_login(User.objects.create_superuser("bench-page-staff", password="x"))
    assert client.get("/rightsizing/").status_code == 200  # warm-up
    timings = []
    for _ in range(3):
        with CaptureQueriesContext(connection) as statements:
            started = time.perf_counter()
            response = client.get("/rightsizing/")
            timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and b"page 1 of" in response.content
    size_kb = len(response.content) / 1024
    for cluster in clusters:
        cluster.delete()
    return {
        "pages.rightsizing_ms_100k": statistics.median(timings),
        "pages.rightsizing_queries_100k": float(len(statements.captured_queries)),
        "pages.rightsizing_kb_100k": size_kb,
        "pages.rightsizing_setup_s_100k": setup_s,
    }
