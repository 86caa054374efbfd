"""Sync figures (issues 11 and 16), each beside a reference measured in the same run.

Objects are realistic: as a real cluster returns them, with ``metadata.managedFields`` and the
``kubectl.kubernetes.io/last-applied-configuration`` annotation. The machine may be shared: the
resync figures are the median of 3 rounds, each ratio taken within its round.

- ``sync.resync_objects_per_s`` / ``_changed_`` / ``_unchanged_``: the portal's own part of a
  resync of 10,000 InferenceModels (state lookup, bulk write, audit) on list pages already fetched
  and decoded, in pages of 500 as ``resync_namespace`` stores them: first load, every object
  changed, nothing changed. ``sync.pg_bulk_rows_per_s``: PostgreSQL's COPY of the same rows into
  a regular (WAL-logged) table of the same shape and indexes; ``sync.resync_ratio_first`` and
  ``sync.resync_ratio_changed``: resync over COPY (target: at least 0.5 on both paths).
- ``sync.resync_unchanged_wal_bytes``: WAL written while the unchanged relist ran
  (``pg_current_wal_lsn()`` before and after; the least of 3 rounds, as WAL is the whole server's
  and other databases may write meanwhile). The unchanged path sends no write at all: the tests
  prove no transaction id is even assigned.
- ``sync.resync_peak_rss_mb_100k``: peak RSS of a fresh process relisting 100,000 objects over
  HTTP from a local page source (bench/list_watch_server.py, which says why not the real
  apiserver) into the database (target: under 300 MB).
- ``sync.watch_p50_ms_at_300_eps`` / ``_p99_``, ``..._at_1000_eps``: event written by that page
  source's watch stream at a fixed rate -> row committed by the real KindWatcher through the real
  kubernetes client (target p99 under 200 ms at 1,000 per second).
- ``sync.watch_real_apiserver_eps``: the rate the real kube-apiserver reached creating the 10,000
  objects (two writer threads): the events per second it can emit on this machine.
- ``sync.steady_state_writes``: writes (at the fault proxy) sent to a synced, steady cluster over
  three rounds of reconcile and resync with its watches running (target 0).
- ``sync.resync_e2e_objects_per_s``: a resync through the real kube-apiserver (and etcd) of the
  tests' control plane, over HTTPS.
- ``testenv.start_s``: time from nothing to a ready control plane (etcd, kube-apiserver,
  controller manager, scheduler, kwok with its nodes Ready), binaries already built.
- ``sync.resync_peak_alloc_mb_10k``: Python's peak allocation during that resync (tracemalloc).
- ``sync.watch_to_row_p50_ms`` / ``_p99_ms``: real cluster write to committed row, one write at a
  time, over 1,000 events.
- ``sync.apply_p50_ms`` / ``_p99_ms``: portal save to object changed in the cluster, through a
  real Celery worker on Redis (skipped without Redis).
"""

from __future__ import annotations

import copy
import io
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.db import connection
from django.utils import timezone

from bench.list_watch_server import ListWatchServer
from clusters.models import AuditEntry, Cluster
from clusters.sync.audit import Actor
from clusters.sync.ingest import ingest_items
from clusters.sync.resync import PAGE_SIZE, resync_cluster
from clusters.sync.watcher import ClusterWatch, KindWatcher
from devstack.control_plane import apply_crds_to, running_control_plane
from models_app.models import InferenceModel
from scheduler.models import NodePool
from tests.support.clusters import KubeCluster
from tests.support.fault_proxy import FaultProxy

OBJECTS = 10_000
EVENTS = 1_000
RATE_OBJECTS = 200  # objects the fixed-rate watch events cycle through
APPLIES = 100
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _sample() -> dict[str, Any]:
    return yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-codellama-34b.yaml").read_text())


def _item(
    sample: dict[str, Any], index: int, generation: int, namespace: str | None = None, resource_version: str = ""
) -> dict[str, Any]:
    """One object as a real cluster returns it: ``metadata.managedFields`` (a client-side apply and
    the operator's status writer) and the ``kubectl.kubernetes.io/last-applied-configuration``
    annotation, which roughly doubles what is stored. ``generation`` changes the spec (and so the
    annotation) and the resourceVersion, as an edit of every object would."""
    item = copy.deepcopy(sample)
    name, namespace = f"model-{index:05d}", namespace or f"team-{index % 20}"
    item["spec"]["cooldownPeriod"] = f"{generation * 10}m"
    applied = {
        "apiVersion": item["apiVersion"], "kind": item["kind"],
        "metadata": {"annotations": {}, "labels": item["metadata"]["labels"], "name": name, "namespace": namespace},
        "spec": item["spec"],
    }
    item["metadata"].update(
        name=name,
        namespace=namespace,
        uid=f"0b7c{index:08d}-6a3e-4f2b-9d1e-3c5f7a9b1d2e",
        resourceVersion=resource_version or str(generation * 1_000_000 + index),
        generation=generation,
        creationTimestamp="2026-11-01T00:00:00Z",
        annotations={LAST_APPLIED: json.dumps(applied, separators=(",", ":")) + "\n"},
        managedFields=[
            {"apiVersion": item["apiVersion"], "fieldsType": "FieldsV1", "manager": "kubectl-client-side-apply",
             "operation": "Update", "time": "2026-11-01T00:00:00Z",
             "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}},
                                         "f:labels": {".": {}, "f:environment": {}, "f:team": {}}},
                          "f:spec": {".": {}, **{f"f:{key}": {} for key in item["spec"]}}}},
            {"apiVersion": item["apiVersion"], "fieldsType": "FieldsV1", "manager": "inference-operator",
             "operation": "Update", "subresource": "status", "time": "2026-11-01T00:01:00Z",
             "fieldsV1": {"f:status": {".": {}, "f:ready": {}, "f:replicas": {}, "f:observedGeneration": {}}}},
        ],
    )
    item["status"] = {"ready": True, "replicas": 1, "observedGeneration": generation}
    return item


def _items(count: int, generation: int = 1) -> list[dict[str, Any]]:
    sample = _sample()
    return [_item(sample, index, generation) for index in range(count)]


def _wal_lsn() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        return cursor.fetchone()[0]


def _wal_bytes_since(lsn: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [lsn])
        return int(cursor.fetchone()[0])


def _timed_resync(cluster: Cluster, items: list[dict[str, Any]]) -> float:
    """Objects per second of the portal's part of a resync: the pages as resync_namespace stores them."""
    listed_at = timezone.now()
    started = time.perf_counter()
    for offset in range(0, len(items), PAGE_SIZE):
        ingest_items(InferenceModel, cluster, items[offset:offset + PAGE_SIZE], listed_at)
    return len(items) / (time.perf_counter() - started)


def _resync_paths(cluster: Cluster) -> dict[str, float]:
    """First load, every object changed, nothing changed; each beside COPY of the same rows; the
    median of 3 rounds (the machine is shared). WAL of the unchanged pass: the least of 3, as
    WAL is the whole server's and other databases write too. Each round starts as the first did:
    the last round's rows deleted and vacuumed away, as autovacuum would between two resyncs
    (without it, round 3 wrote into a table holding 20,000 dead rows of the rounds before)."""
    rounds: dict[str, list[float]] = {}
    first, changed = _items(OBJECTS, 1), _items(OBJECTS, 2)
    for _ in range(3):
        InferenceModel.objects.filter(cluster=cluster).delete()
        AuditEntry.objects.filter(cluster=cluster).delete()
        _vacuum(InferenceModel, AuditEntry)
        rounds.setdefault("first", []).append(_timed_resync(cluster, first))
        rounds.setdefault("copy_first", []).append(_pg_copy_rate(cluster))
        rounds.setdefault("changed", []).append(_timed_resync(cluster, changed))
        rounds.setdefault("copy_changed", []).append(_pg_copy_rate(cluster))
        lsn = _wal_lsn()
        rounds.setdefault("unchanged", []).append(_timed_resync(cluster, changed))
        rounds.setdefault("unchanged_wal", []).append(_wal_bytes_since(lsn))
    median = {name: statistics.median(values) for name, values in rounds.items()}
    return {
        "sync.resync_objects_per_s": median["first"],
        "sync.resync_changed_objects_per_s": median["changed"],
        "sync.resync_unchanged_objects_per_s": median["unchanged"],
        "sync.pg_bulk_rows_per_s": median["copy_first"],
        "sync.resync_ratio_first": statistics.median(
            resync / reference for resync, reference in zip(rounds["first"], rounds["copy_first"], strict=True)),
        "sync.resync_ratio_changed": statistics.median(
            resync / reference for resync, reference in zip(rounds["changed"], rounds["copy_changed"], strict=True)),
        "sync.resync_unchanged_wal_bytes": min(rounds["unchanged_wal"]),
    }


def _vacuum(*models: type) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM {', '.join(model._meta.db_table for model in models)}")


def _pg_copy_rate(cluster: Cluster) -> float:
    """COPY the stored rows back into an empty table LIKE the mirror table (indexes included).
    A regular table, WAL-logged as the mirror table is: a temporary one writes no WAL and would
    measure less work than any resync must do."""
    table = InferenceModel._meta.db_table
    with connection.cursor() as cursor:
        buffer = io.BytesIO()
        with cursor.copy(f"COPY (SELECT * FROM {table} WHERE cluster_id = %s) TO STDOUT", [cluster.pk]) as copy_out:
            for chunk in copy_out:
                buffer.write(chunk)
        cursor.execute(f"CREATE TABLE bench_copy (LIKE {table} INCLUDING ALL)")
        try:
            started = time.perf_counter()
            with cursor.copy("COPY bench_copy FROM STDIN") as copy_in:
                copy_in.write(buffer.getvalue())
            elapsed = time.perf_counter() - started
        finally:
            cursor.execute("DROP TABLE bench_copy")
    return OBJECTS / elapsed


def _watch_latencies(kube: KubeCluster, cluster: Cluster) -> list[float]:
    handled = threading.Event()
    stop = threading.Event()

    class TimedWatcher(KindWatcher):
        def apply_batch(self, events: list[dict[str, Any]]) -> None:
            super().apply_batch(events)
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


def _item_source(namespace: str) -> Callable[[int, int, str], dict[str, Any]]:
    sample = _sample()
    return lambda index, generation, version: _item(sample, index, generation, namespace, version)


def _served_cluster(server: ListWatchServer, name: str) -> Cluster:
    return Cluster.objects.create(
        name=name, auth_method=Cluster.AuthMethod.TOKEN, server_url=server.url, bearer_token="bench",
        allow_insecure_http=True, namespaces=[server.namespace],
    )


def _watch_at_rate(rate: float, seconds: float = 5.0) -> list[float]:
    """Event written by the page source -> its row committed, for events arriving at ``rate`` per
    second through the real kubernetes client's watch and the real watcher (KindWatcher)."""
    namespace = f"rate-{int(rate)}"
    server = ListWatchServer(
        namespace, RATE_OBJECTS, _item_source(namespace), rate=rate, events=int(rate * seconds)
    ).start()
    committed: dict[str, float] = {}
    stop = threading.Event()

    class TimedWatcher(KindWatcher):
        def apply_batch(self, events: list[dict[str, Any]]) -> None:
            super().apply_batch(events)
            now = time.perf_counter()
            committed.update((event["object"]["metadata"]["resourceVersion"], now) for event in events)

    cluster = _served_cluster(server, f"bench-rate-{int(rate)}")
    watcher = TimedWatcher(cluster, InferenceModel, namespace, stop)
    thread = threading.Thread(target=watcher.run, daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + seconds * 6 + 60
        while len(committed) < server.events and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
        server.stop()
    missing = server.events - len(committed)
    if missing:
        raise RuntimeError(f"{missing} of {server.events} events at {rate}/s were not stored in time")
    return [(committed[version] - sent) * 1000 for version, sent in server.sent.items()]


# The child reports VmHWM (the peak RSS of its own address space): ru_maxrss survives exec and
# reported the bench process's own peak when it forked (461 MB for a relist that peaks at 164 MB).
CHILD_RESYNC = """
import re, sys
import django
django.setup()
from clusters.kube.client import ClusterGateway
from clusters.models import Cluster
from clusters.sync.resync import ResyncReport, resync_namespace
from models_app.models import InferenceModel
from scheduler.models import NodePool
cluster = Cluster.objects.get(pk=int(sys.argv[1]))
gateway = ClusterGateway(cluster)
report = ResyncReport("InferenceModel")
resync_namespace(gateway, InferenceModel, cluster.namespaces[0], report)
gateway.close()
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(report.listed, report.written, peak_kb / 1024)
"""


def _resync_peak_rss_mb(objects: int) -> float:
    """Peak RSS (MB) of a fresh process that relists ``objects`` InferenceModels from the page
    source over HTTP (pages of 500, decoded by the kubernetes client) into the database."""
    server = ListWatchServer("rss", objects, _item_source("rss")).start()
    try:
        cluster = _served_cluster(server, "bench-rss")
        database = connection.settings_dict
        url = (f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST']}:{database['PORT']}/"
               f"{database['NAME']}")
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
        output = subprocess.run(
            [sys.executable, "-c", CHILD_RESYNC, str(cluster.pk)], env=env, cwd=Path(__file__).parent.parent,
            capture_output=True, text=True, check=True,
        ).stdout.split()
    finally:
        server.stop()
    listed, written, peak_mb = int(output[0]), int(output[1]), float(output[2])
    if (listed, written) != (objects, objects):
        raise RuntimeError(f"the relist stored {written} of {listed} listed objects, not {objects}")
    InferenceModel.objects.filter(cluster=cluster).delete()
    AuditEntry.objects.filter(cluster=cluster).delete()
    return peak_mb


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
            from clusters.web.services import save_portal_edit

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
            steady = KubeCluster(api_client, name="bench-steady", plane=plane, proxy=proxy)
            try:
                figures["sync.steady_state_writes"] = _steady_state_writes(steady)
                figures.update(_measure(kube))
            finally:
                kube.close()
                steady.close()
                proxy.stop()
    return figures


def _steady_state_writes(kube: KubeCluster) -> int:
    """Writes the portal sends (counted at the fault proxy) to a steady cluster, once it is synced:
    a managed InferenceModel whose Deployment is ready and mirrored objects, over three rounds of
    reconcile and resync with the watches running."""
    cluster = kube.register(managed_kinds=["InferenceModel"])
    NodePool.objects.create(cluster=cluster, name="gpu-a100", allocatable_bytes=160 * 1024**3)
    sample = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-llama-2-7b.yaml").read_text())
    sample["metadata"]["namespace"] = kube.namespace
    kube.write(sample)
    for index in range(3):
        kube.write({**_sample(), "metadata": {"name": f"mirrored-{index}", "namespace": kube.namespace}})
    deadline = time.monotonic() + 60
    while not ((kube.get("apps/v1", "Deployment", "llama-2-7b") or {}).get("status") or {}).get("readyReplicas"):
        kube.sync()
        if time.monotonic() > deadline:
            raise RuntimeError("the managed model's Deployment did not become ready within 60 s")
        time.sleep(0.5)
    kube.sync()
    stop = threading.Event()
    watch = ClusterWatch(Cluster.objects.get(pk=cluster.pk), stop)

    def passes() -> None:
        watch.start()
        while not all(watcher.resource_version for watcher in watch.watchers):
            time.sleep(0.05)
        for _ in range(3):
            kube.sync()
            resync_cluster(cluster)
        time.sleep(1.0)

    try:
        return len(kube.writes_during(passes))
    finally:
        stop.set()
        watch.join(timeout=15)


def _measure(kube: KubeCluster) -> dict[str, float]:
    cluster = kube.register()
    figures = _resync_paths(cluster)
    if connection.vendor == "postgresql":
        figures["sync.resync_peak_rss_mb_100k"] = _resync_peak_rss_mb(100_000)
    for rate in (300, 1000):
        latencies = _watch_at_rate(rate)
        figures[f"sync.watch_p50_ms_at_{rate}_eps"] = statistics.median(latencies)
        figures[f"sync.watch_p99_ms_at_{rate}_eps"] = _percentile(latencies, 0.99)
    InferenceModel.objects.filter(cluster=cluster).delete()
    AuditEntry.objects.filter(cluster=cluster).delete()

    items = _items(OBJECTS)
    started = time.perf_counter()
    _create_all(kube, items)
    figures["sync.watch_real_apiserver_eps"] = OBJECTS / (time.perf_counter() - started)
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
