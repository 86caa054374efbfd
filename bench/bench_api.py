"""Validation throughput and API latency for the catalog list, beside a bare ORM query.

Figures: ``validation.manifests_per_s`` (schema + rules per manifest), ``api.list_inprocess_p50_ms`` and
``api.list_inprocess_p99_ms`` (GET /api/inferencemodels/?limit=50 over 2,000 rows, with the garbage
collector tuned as the web entry points tune it, common.gc_tuning), ``api.list_inprocess_p99_ms_gc_untuned``
(as many requests first, with CPython's default collector: the difference is the GC pauses the
tuning removes), ``api.list_gc_pause_*`` (the collector's CPU time within one request: its pauses,
apart from the machine's load, which stretches every wall-clock latency alike),
``api.gc_full_collection_ms`` (one full collection, tuned and not) and ``api.orm_page_p50_ms``,
the same page straight from the ORM, so the API's own overhead shows.

In process (``_inprocess_`` figures): Django's test client, one request at a time. Leaves out the
HTTP server (accept, parse, its workers' queueing under concurrent clients), the transfer and other
clients' load: bench/bench_http.py measures the same pages over HTTP with 16 clients.
"""

from __future__ import annotations

import copy
import gc
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from bench.web_worker import collector_as_in_web_workers
from clusters.models import Cluster, SyncState
from clusters.validation.manifests import resolve_kind, validate_manifest
from common.gc_tuning import load_application_code
from models_app.models import InferenceModel

ROWS = 2_000
REQUESTS = 200


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class CollectorClock:
    """CPU seconds the garbage collector spends (a ``gc.callbacks`` hook): its pauses, measured apart
    from the machine's load, which stretches every wall-clock latency alike."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started


@dataclass
class Latencies:
    api_ms: list[float] = field(default_factory=list)
    orm_ms: list[float] = field(default_factory=list)
    gc_ms: list[float] = field(default_factory=list)  # collector CPU time within each API request

    def extend(self, other: Latencies) -> None:
        self.api_ms += other.api_ms
        self.orm_ms += other.orm_ms
        self.gc_ms += other.gc_ms


def _list_latencies(client: APIClient, requests: int) -> Latencies:
    """``requests`` API pages at spread offsets, and the same pages straight from the ORM."""
    samples, clock = Latencies(), CollectorClock()
    gc.callbacks.append(clock)
    try:
        for index in range(requests):
            offset = (index * 37) % (ROWS - 50)
            clock.seconds = 0.0
            start = time.perf_counter()
            response = client.get(f"/api/inferencemodels/?limit=50&offset={offset}&ordering=name")
            samples.api_ms.append((time.perf_counter() - start) * 1000)
            samples.gc_ms.append(clock.seconds * 1000)
            assert response.status_code == 200 and len(response.json()["results"]) == 50
            start = time.perf_counter()
            list(InferenceModel.objects.select_related("cluster").order_by("name")[offset : offset + 50])
            samples.orm_ms.append((time.perf_counter() - start) * 1000)
    finally:
        gc.callbacks.remove(clock)
    return samples


def _full_collection_ms() -> float:
    """CPU milliseconds of one full collection: the pause a request pays when one falls in it."""
    start = time.thread_time()
    gc.collect()
    return (time.thread_time() - start) * 1000


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
    load_application_code()  # as config/wsgi.py does before tuning
    untuned_full_ms = _full_collection_ms()
    untuned = _list_latencies(client, REQUESTS)
    with collector_as_in_web_workers():
        tuned_full_ms = _full_collection_ms()
        tuned = _list_latencies(client, REQUESTS)
    InferenceModel.objects.all().delete()
    cluster.delete()
    return {
        "validation.manifests_per_s": validation_rate,
        "api.list_inprocess_p50_ms": statistics.median(tuned.api_ms),
        "api.list_inprocess_p99_ms": _percentile(tuned.api_ms, 0.99),
        "api.list_gc_pause_p99_ms": _percentile(tuned.gc_ms, 0.99),
        "api.list_gc_pause_max_ms": max(tuned.gc_ms),
        "api.gc_full_collection_ms": tuned_full_ms,
        "api.gc_full_collection_ms_gc_untuned": untuned_full_ms,
        "api.list_inprocess_p50_ms_gc_untuned": statistics.median(untuned.api_ms),
        "api.list_inprocess_p99_ms_gc_untuned": _percentile(untuned.api_ms, 0.99),
        "api.list_gc_pause_p99_ms_gc_untuned": _percentile(untuned.gc_ms, 0.99),
        "api.list_gc_pause_max_ms_gc_untuned": max(untuned.gc_ms),
        "api.orm_page_p50_ms": statistics.median(tuned.orm_ms),
        "api.load_1m": os.getloadavg()[0],  # other work on the machine shows in every latency
    }
