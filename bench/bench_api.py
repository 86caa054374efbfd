"""Validation throughput and API latency for the catalog list, beside a bare ORM query.

Figures: ``validation.manifests_per_s`` (schema + rules per manifest), ``api.list_p50_ms`` and
``api.list_p99_ms`` (GET /api/inferencemodels/?limit=50 over 2,000 rows, with the garbage
collector tuned as the web entry points tune it, config.gc_tuning), ``api.list_p99_ms_gc_untuned``
(the same requests with CPython's default collector, measured first: the difference is the GC
pauses the tuning removes), and ``api.orm_page_p50_ms``, the same page straight from the ORM, so
the API's own overhead shows.
"""

from __future__ import annotations

import copy
import gc
import os
import statistics
import time
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from clusters.manifests import resolve_kind, validate_manifest
from clusters.models import Cluster, SyncState
from config.gc_tuning import tune_after_startup
from models_app.models import InferenceModel

ROWS = 2_000
REQUESTS = 200


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _list_latencies(client: APIClient) -> tuple[list[float], list[float]]:
    """Milliseconds of REQUESTS API pages at spread offsets, and of the same pages from the ORM."""
    api_ms, orm_ms = [], []
    for index in range(REQUESTS):
        offset = (index * 37) % (ROWS - 50)
        start = time.perf_counter()
        response = client.get(f"/api/inferencemodels/?limit=50&offset={offset}&ordering=name")
        api_ms.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200 and len(response.json()["results"]) == 50
        start = time.perf_counter()
        list(InferenceModel.objects.select_related("cluster").order_by("name")[offset : offset + 50])
        orm_ms.append((time.perf_counter() - start) * 1000)
    return api_ms, orm_ms


def run() -> dict[str, float]:
    sample = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-codellama-34b.yaml").read_text())
    model = resolve_kind(sample)
    start = time.perf_counter()
    for index in range(ROWS):
        manifest = copy.deepcopy(sample)
        manifest["metadata"]["name"] = f"m-{index}"
        validate_manifest(model, manifest)
    validation_rate = ROWS / (time.perf_counter() - start)

    cluster = Cluster.objects.create(name="bench", server_url="https://bench:6443")
    rows = []
    for index in range(ROWS):
        row = InferenceModel(cluster=cluster, name=f"m-{index}", spec=sample["spec"], sync_state=SyncState.SYNCED)
        row.project()
        rows.append(row)
    InferenceModel.objects.bulk_create(rows, batch_size=500)
    client = APIClient()
    client.force_authenticate(User.objects.create_user("bench", is_staff=True))  # staff: sees every row
    client.get("/api/inferencemodels/?limit=50")  # warm-up: first-request imports are not latency
    untuned_ms, _ = _list_latencies(client)
    thresholds = gc.get_threshold()
    tune_after_startup()  # what config/wsgi.py and config/asgi.py do once the application is loaded
    try:
        api_ms, orm_ms = _list_latencies(client)
    finally:
        gc.unfreeze()  # leave the process as it was for the next benchmark module
        gc.set_threshold(*thresholds)
    InferenceModel.objects.all().delete()
    cluster.delete()
    return {
        "validation.manifests_per_s": validation_rate,
        "api.list_p50_ms": statistics.median(api_ms),
        "api.list_p99_ms": _percentile(api_ms, 0.99),
        "api.list_p50_ms_gc_untuned": statistics.median(untuned_ms),
        "api.list_p99_ms_gc_untuned": _percentile(untuned_ms, 0.99),
        "api.orm_page_p50_ms": statistics.median(orm_ms),
        "api.load_1m": os.getloadavg()[0],  # other work on the machine shows in every latency
    }
