"""A real Celery worker on real Redis applies portal edits to the cluster (over real HTTP)."""

from __future__ import annotations

import time

import pytest
import redis

from clusters.models import AuditEntry, SyncState
from config.celery_app import app as celery_app
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for
from tests.support.services import CeleryWorker, require_redis

pytestmark = pytest.mark.integration
KIND = InferenceModel.kube


@pytest.fixture
def worker(live_cluster):
    broker = require_redis()
    redis.Redis.from_url(broker).flushdb()
    previous = dict(celery_app.conf)
    celery_app.conf.update(broker_url=broker, task_always_eager=False)
    _forget_connections()
    running = CeleryWorker(broker)
    yield running
    running.stop()
    celery_app.conf.update(broker_url=previous["broker_url"], task_always_eager=previous["task_always_eager"])
    _forget_connections()


def _forget_connections() -> None:
    """Make the app reconnect with the current broker_url (as Celery itself does after a fork)."""
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


def test_worker_applies_creates_and_edits(live_cluster, kube, editor, worker) -> None:
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    started = time.monotonic()
    response = editor.post("/api/inferencemodels/", manifest, format="json")
    assert response.status_code == 201
    pk = response.json()["id"]
    wait_for(
        lambda: InferenceModel.objects.get(pk=pk).sync_state == SyncState.SYNCED,
        timeout=20,
        message="the worker to apply the create",
    )
    assert kube.read(KIND, "mistral-7b")["spec"]["memory"] == "8Gi"
    editor.patch(f"/api/inferencemodels/{pk}/", {"spec": {"memory": "11Gi"}}, format="json")
    wait_for(
        lambda: kube.read(KIND, "mistral-7b")["spec"]["memory"] == "11Gi",
        timeout=20,
        message="the worker to apply the edit",
    )
    wait_for(lambda: InferenceModel.objects.get(pk=pk).sync_state == SyncState.SYNCED, timeout=20)
    assert time.monotonic() - started < 20
    applied = AuditEntry.objects.filter(object_id=pk, kind="InferenceModel", action="applied").count()
    assert applied == 2


@pytest.mark.usefixtures("needs_faults")
def test_worker_retries_transient_errors_with_backoff(live_cluster, kube, editor, worker) -> None:
    kube.proxy.inject("create", "inferencemodels", status=503, times=2)
    response = editor.post("/api/inferencemodels/", sample_manifest("inferencemodel-mistral-7b.yaml"), format="json")
    pk = response.json()["id"]
    wait_for(
        lambda: InferenceModel.objects.get(pk=pk).sync_state == SyncState.SYNCED,
        timeout=30,
        message="retries to converge",
    )
    assert "retry" in worker.log.read_text().lower()


@pytest.mark.usefixtures("needs_faults")
def test_worker_waits_as_long_as_retry_after_asks(live_cluster, kube, editor, worker) -> None:
    """A 429 with Retry-After: 4 is retried no sooner than 4 s later (the backoff alone says 1 s)."""
    kube.proxy.inject("create", "inferencemodels", status=429, times=1, retry_after=4)
    started = time.monotonic()
    response = editor.post("/api/inferencemodels/", sample_manifest("inferencemodel-mistral-7b.yaml"), format="json")
    pk = response.json()["id"]
    wait_for(lambda: InferenceModel.objects.get(pk=pk).sync_state == SyncState.SYNCED, timeout=30,
             message="the retry after the server's wait")
    assert time.monotonic() - started >= 4
