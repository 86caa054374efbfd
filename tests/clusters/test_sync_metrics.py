"""The portal's own metrics: the sync's health per cluster and kind is recorded by the processes that
see it (watcher, workers, controllers) and read from the database by the web process at scrape time,
so every web worker answers the same."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import requests
from kombu import Connection
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import Cluster, SyncStat, SyncState
from clusters.sync import stats as sync_stats
from config.web_server import WORKER_KILL_TIMEOUT_S
from devstack.ports import free_port
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for
from tests.conftest import ENDPOINTS
from tests.support.services import REPO_ROOT, require_redis, session_database_url

KIND = InferenceModel.kube
TOKEN = "metrics-token-for-tests"


def samples(body: str) -> dict[tuple[str, frozenset], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def value(body: str, metric: str, /, **labels: str) -> float | None:
    return samples(body).get((metric, frozenset(labels.items())))


def stat(cluster: Cluster, counter: str, kind: str = "InferenceModel", label: str = "") -> float:
    row = SyncStat.objects.filter(cluster=cluster, kind=kind, counter=counter, label=label).first()
    return row.value if row else 0


def test_watch_reconnects_410_relists_last_list_and_apply_errors(
    live_cluster, kube, editor, watcher, needs_faults, metrics_client
) -> None:
    counter = SyncStat.Counter
    started = time.time()
    wait_for(lambda: stat(live_cluster, counter.LAST_LIST) > started - 60, message="the watcher's first list")
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml"))
    wait_for(lambda: InferenceModel.objects.filter(name="llama-2-7b").exists())
    kube.compact_behind_the_watch("inferencemodels", lambda: (
        kube.write(sample_manifest("inferencemodel-mistral-7b.yaml")), kube.remove(KIND, "llama-2-7b")))
    wait_for(lambda: InferenceModel.objects.filter(name="llama-2-7b", sync_state=SyncState.DELETED_IN_CLUSTER),
             message="the delete seen by a relist")  # fmt: skip
    assert stat(live_cluster, counter.RELISTS_AFTER_GONE) >= 1
    assert stat(live_cluster, counter.WATCH_RECONNECTS) >= 1

    kube.proxy.inject("create", "inferencemodels", status=422, message="spec.memory: denied")
    kube.proxy.inject("create", "inferencemodels", status=500, times=1)
    manifest = sample_manifest("inferencemodel-codellama-34b.yaml", kube.namespace)
    assert editor.post(ENDPOINTS["InferenceModel"], manifest, format="json").status_code == 201
    manifest = sample_manifest("inferencemodel-tokenizer-service.yaml", kube.namespace)
    assert editor.post(ENDPOINTS["InferenceModel"], manifest, format="json").status_code == 201

    body = metrics_client.get("/metrics").content.decode()
    labels = {"cluster": live_cluster.name, "kind": "InferenceModel"}
    assert value(body, "inference_portal_watch_relists_total", **labels) >= 1
    assert value(body, "inference_portal_watch_reconnects_total", **labels) >= 1
    assert value(body, "inference_portal_sync_last_list_timestamp_seconds", **labels) > time.time() - 60
    assert value(body, "inference_portal_apply_errors_total", code="422", **labels) == 1
    assert value(body, "inference_portal_apply_errors_total", code="500", **labels) == 1


@pytest.fixture
def web_server(transactional_db):
    """The web process as deployed (``python -m config.web_server``: granian) with three worker
    processes, on the test database."""
    broker = require_redis()
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local", "DEBUG": "false",
           "DATABASE_URL": session_database_url(), "CELERY_BROKER_URL": broker, "METRICS_TOKEN": TOKEN,
           "WEB_CONCURRENCY": "3"}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "config.web_server", "--bind", f"127.0.0.1:{port}"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{url}/healthz", timeout=5).ok
        except requests.RequestException:  # not listening yet, or its workers still starting
            return False

    try:
        wait_for(up, timeout=120, message="the web server to serve")  # bounds one that never serves
        yield url, broker
    finally:
        process.terminate()
        process.wait(timeout=WORKER_KILL_TIMEOUT_S + 30)  # a worker still starting is killed after that


def test_every_web_worker_exports_the_same_figures_from_the_database(web_server) -> None:
    url, broker = web_server
    cluster = Cluster.objects.create(name="managed", auth_method=Cluster.AuthMethod.SNAPSHOT,
                                     managed_kinds=["InferenceModel"])  # fmt: skip
    for name, replicas, state in (("llama", 2, SyncState.SYNCED), ("leaving", 1, SyncState.DELETING)):
        InferenceModel.objects.create(
            cluster=cluster, namespace="ml", name=name, sync_state=state, spec={"modelName": name, "memory": "16Gi"},
            status={"replicas": replicas},
        )  # fmt: skip
    # what a watcher and a worker record, in this process (not the web server's)
    sync_stats.watch_reconnected(cluster, "InferenceModel")
    sync_stats.watch_reconnected(cluster, "InferenceModel")
    sync_stats.apply_failed(cluster, "InferenceModel", 403)
    sync_stats.reconciled(cluster, "InferenceModel", 0.25)
    with Connection(broker) as connection:
        queue = connection.SimpleQueue("default")
        try:
            for number in range(3):
                queue.put({"n": number})
            # /healthz answers before every worker has started Django (seconds each on a busy host);
            # a /metrics request that reaches a starting worker waits for it
            bodies = [requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=90).text
                      for _ in range(6)]  # fmt: skip
        finally:
            queue.clear()
            queue.close()

    labels = {"cluster": "managed", "kind": "InferenceModel"}
    for body in bodies:
        assert value(body, "inference_portal_watch_reconnects_total", **labels) == 2
        assert value(body, "inference_portal_apply_errors_total", code="403", **labels) == 1
        assert value(body, "inference_portal_reconcile_duration_seconds_count", **labels) == 1
        assert value(body, "inference_portal_reconcile_duration_seconds_sum", **labels) == 0.25
        assert value(body, "inference_portal_model_replicas", cluster="managed", namespace="ml", name="llama") == 2
        assert value(body, "inference_portal_model_memory_bytes", cluster="managed", namespace="ml",
                     name="llama") == 16 * 1024**3  # fmt: skip
        assert value(body, "inference_portal_model_replicas", cluster="managed", namespace="ml", name="leaving") is None
        assert value(body, "inference_portal_task_queue_depth", queue="default") == 3
        assert value(body, "inference_portal_task_queue_depth", queue="sync") == 0
