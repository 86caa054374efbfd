"""Sync figures (issue 2), each beside a reference measured in the same run.

- ``sync.resync_objects_per_s``: the portal's own part of a full resync of 10,000 InferenceModels
  (diff against stored rows, upsert, audit) on list pages already fetched and decoded;
  ``sync.pg_bulk_rows_per_s``: PostgreSQL's COPY of the same rows into a table of the same shape
  and indexes;
  ``sync.resync_ratio``: the first over the second (target: at least 0.5).
- ``sync.resync_e2e_objects_per_s``: the same resync through the real kube-apiserver (and etcd)
  of the tests' control plane, over HTTPS.
- ``testenv.start_s``: time from nothing to a ready control plane (etcd, kube-apiserver,
  controller manager, scheduler, kwok with its nodes Ready), binaries already built.
- ``sync.resync_peak_alloc_mb_10k``: Python's peak allocation during that resync (tracemalloc):
  pages are stored as they arrive, so it stays about one page's worth whatever the list's size.
- ``sync.watch_to_row_p50_ms`` / ``_p99_ms``: cluster write to committed row, over 1,000 events.
- ``sync.apply_p50_ms`` / ``_p99_ms``: portal save to object changed in the cluster, through a
  real Celery worker on Redis (skipped without Redis).
"""

from __future__ import annotations

import copy
import io
import statistics
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusters.audit import Actor
from clusters.models import AuditEntry, Cluster
from clusters.resync import ingest_items, resync_cluster
from clusters.watcher import KindWatcher
from models_app.models import InferenceModel
from tests.support.clusters import KubeCluster, apply_crds_to
from tests.support.control_plane import running_control_plane
from tests.support.fault_proxy import FaultProxy

OBJECTS = 10_000
EVENTS = 1_000
APPLIES = 100


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _items(count: int) -> list[dict[str, Any]]:
    sample = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-codellama-34b.yaml").read_text())
    items = []
    for index in range(count):
        item = copy.deepcopy(sample)
        item["metadata"].update(
            name=f"model-{index:05d}",
            namespace=f"team-{index % 20}",
            uid=f"uid-{index}",
            resourceVersion=str(1000 + index),
            generation=1,
            creationTimestamp="2026-11-01T00:00:00Z",
        )
        item["status"] = {"ready": True, "replicas": 1, "observedGeneration": 1}
        items.append(item)
    return items


def _pg_copy_rate(cluster: Cluster) -> float | None:
    """COPY the stored rows back into an empty table LIKE the mirror table (indexes included)."""
    if connection.vendor != "postgresql":
        return None
    table = InferenceModel._meta.db_table
    with connection.cursor() as cursor:
        # Same shape and the same indexes as the mirror table: the rate PostgreSQL itself reaches.
        cursor.execute(f"CREATE TEMP TABLE bench_copy (LIKE {table} INCLUDING ALL)")
        buffer = io.BytesIO()
        with cursor.copy(f"COPY (SELECT * FROM {table} WHERE cluster_id = %s) TO STDOUT", [cluster.pk]) as copy_out:
            for chunk in copy_out:
                buffer.write(chunk)
        cursor.execute("CREATE UNIQUE INDEX ON bench_copy (cluster_id, namespace, name)")
        started = time.perf_counter()
        with cursor.copy("COPY bench_copy FROM STDIN") as copy_in:
            copy_in.write(buffer.getvalue())
        elapsed = time.perf_counter() - started
        cursor.execute("DROP TABLE bench_copy")
    return OBJECTS / elapsed


def _watch_latencies(kube: KubeCluster, cluster: Cluster) -> list[float]:
    handled = threading.Event()
    stop = threading.Event()

    class TimedWatcher(KindWatcher):
        def handle(self, event: dict[str, Any]) -> None:
            super().handle(event)
            if event.get("type") != "BOOKMARK":
                handled.set()

    watcher = TimedWatcher(cluster, InferenceModel, kube.namespace, stop)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    while watcher.resource_version is None:
        time.sleep(0.01)
    time.sleep(0.2)  # let the watch connect
    target = _items(1)[0]
    target["metadata"]["name"] = "watched"
    target["metadata"].pop("uid"), target["metadata"].pop("resourceVersion")
    latencies = []
    for index in range(EVENTS):
        target["spec"]["cooldownPeriod"] = f"{index + 1}m"
        handled.clear()
        started = time.perf_counter()
        kube.write(target)
        if not handled.wait(5):
            raise RuntimeError(f"watch event {index} not handled within 5 s")
        latencies.append((time.perf_counter() - started) * 1000)
    stop.set()
    return latencies


def _apply_latencies(kube: KubeCluster, cluster: Cluster) -> list[float] | None:
    from tests.support.services import REDIS_URL, CeleryWorker

    try:
        import redis

        redis.Redis.from_url(REDIS_URL).ping()
    except Exception:
        return None
    from config.celery_app import app

    app.conf.update(broker_url=REDIS_URL, task_always_eager=False)
    app._pool, app.amqp._producer_pool = None, None
    worker = CeleryWorker(REDIS_URL)
    try:
        kube.write({**_items(1)[0], "metadata": {"name": "applied", "namespace": kube.namespace}})
        resync_cluster(cluster)
        obj = InferenceModel.objects.get(cluster=cluster, name="applied")
        latencies = []
        for index in range(APPLIES):
            memory = f"{40 + index}Gi"
            obj.refresh_from_db()
            made_from = obj.edit_version()
            obj.spec = {**obj.spec, "memory": memory}
            started = time.perf_counter()
            from clusters.services import save_portal_edit

            save_portal_edit(obj, Actor("bench", "api"), made_from=made_from)
            while kube.read(InferenceModel.kube, "applied")["spec"]["memory"] != memory:
                if time.perf_counter() - started > 10:
                    raise RuntimeError("apply did not reach the cluster within 10 s")
                time.sleep(0.001)
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies
    finally:
        worker.stop()
        app.conf.update(broker_url="", task_always_eager=True)


def _create_all(kube: KubeCluster, items: list[dict[str, Any]]) -> None:
    """Create the objects in the cluster (two writer threads: the API server is the bottleneck)."""
    def create(chunk: list[dict[str, Any]]) -> None:
        for item in chunk:
            body = copy.deepcopy(item)
            body["metadata"] = {"name": item["metadata"]["name"], "namespace": kube.namespace}
            body.pop("status", None)
            kube.custom.create_namespaced_custom_object(
                InferenceModel.kube.group, InferenceModel.kube.version, kube.namespace, InferenceModel.kube.plural,
                body)

    threads = [threading.Thread(target=create, args=(items[i::2],)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run() -> dict[str, float]:
    started = time.perf_counter()
    with running_control_plane(prepare=apply_crds_to) as plane:
        figures = {"testenv.start_s": time.perf_counter() - started}
        with plane.api_client() as api_client:
            workdir = plane.workdir
            proxy = FaultProxy(plane.url, str(workdir / "ca.crt"), str(workdir / "apiserver.crt"),
                               str(workdir / "apiserver.key")).start()
            kube = KubeCluster(api_client, name="bench", plane=plane, proxy=proxy)
            try:
                figures.update(_measure(kube))
            finally:
                kube.close()
                proxy.stop()
    return figures


def _measure(kube: KubeCluster) -> dict[str, float]:
    cluster = kube.register()
    items = _items(OBJECTS)
    started = time.perf_counter()
    ingest_items(InferenceModel, cluster, items, timezone.now())
    resync_rate = OBJECTS / (time.perf_counter() - started)
    figures = {"sync.resync_objects_per_s": resync_rate}
    pg_rate = _pg_copy_rate(cluster)
    if pg_rate:
        figures["sync.pg_bulk_rows_per_s"] = pg_rate
        figures["sync.resync_ratio"] = resync_rate / pg_rate
    InferenceModel.objects.filter(cluster=cluster).delete()
    AuditEntry.objects.filter(cluster=cluster).delete()

    _create_all(kube, items)
    tracemalloc.start()
    started = time.perf_counter()
    resync_cluster(cluster)
    figures["sync.resync_e2e_objects_per_s"] = OBJECTS / (time.perf_counter() - started)
    figures["sync.resync_peak_alloc_mb_10k"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()

    latencies = _watch_latencies(kube, cluster)
    figures["sync.watch_to_row_p50_ms"] = statistics.median(latencies)
    figures["sync.watch_to_row_p99_ms"] = _percentile(latencies, 0.99)
    applies = _apply_latencies(kube, cluster)
    if applies:
        figures["sync.apply_p50_ms"] = statistics.median(applies)
        figures["sync.apply_p99_ms"] = _percentile(applies, 0.99)
    return figures
