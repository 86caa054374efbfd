"""The model page's replica table: the gateway workers' snapshots (``ReplicaSnapshot``, one row per
model and worker) merged: picks summed over the workers, each replica's engine state from the newest
row; a gateway that stopped writing (rows older than 30 s) is not shown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from inference_gateway.models import ReplicaSnapshot
from models_app.models import InferenceModel

ENGINE = {"waiting": 2, "running": 7, "kv_usage": 0.4, "prefix_hit_rate": 0.83, "adapters": [], "age": 0.03,
          "fresh": True}


@pytest.fixture
def model(db) -> InferenceModel:
    cluster = Cluster.objects.create(name="seen", auth_method=Cluster.AuthMethod.SNAPSHOT)
    return InferenceModel.objects.create(cluster=cluster, namespace="default", name="llama", sync_state="Synced",
                                         spec={"modelName": "llama-2-7b", "memory": "1Gi"})


def snapshot(model: InferenceModel, worker: str, rows: list[dict], age_seconds: float = 0) -> None:
    ReplicaSnapshot.objects.create(kind="InferenceModel", cluster=model.cluster, namespace=model.namespace,
                                   name=model.name, worker=worker, replicas=rows,
                                   updated_at=timezone.now() - timedelta(seconds=age_seconds))


def table(model: InferenceModel, make_user) -> str:
    browser = Client()
    browser.force_login(make_user("viewer"))
    page = browser.get(reverse("inferencemodel-detail-page", args=[model.pk])).content.decode()
    return page.split('<section id="replica-picking">')[1].split("</section>")[0]


def test_the_workers_picks_are_summed_and_the_newest_engine_state_shown(model, make_user) -> None:
    snapshot(model, "host:1", [{"replica": "10.0.0.1:8000", "picks": {"prefix-cache": 5, "queue": 1},
                                **ENGINE, "waiting": 9},
                               {"replica": "10.0.0.2:8000", "picks": {}, "fresh": False}], age_seconds=2)
    snapshot(model, "host:2", [{"replica": "10.0.0.1:8000", "picks": {"prefix-cache": 3}, **ENGINE}])
    snapshot(model, "host:3", [{"replica": "10.0.0.1:8000", "picks": {"queue": 100}, **ENGINE}], age_seconds=60)

    shown = table(model, make_user)

    first = shown.split("<code>10.0.0.1:8000</code>")[1].split("</tr>")[0]
    cells = [cell.split("</td>")[0].strip() for cell in first.split("<td>")[1:]]
    assert cells == ["2", "7", "40%", "83%", "fresh", "9", "prefix-cache 8, queue 1"]
    second = shown.split("<code>10.0.0.2:8000</code>")[1].split("</tr>")[0]
    assert "none (picked by load)" in second and "<td>0</td>" in second


def test_without_recent_snapshots_the_table_says_so(model, make_user) -> None:
    snapshot(model, "host:1", [{"replica": "10.0.0.1:8000", "picks": {"queue": 1}, **ENGINE}], age_seconds=60)
    assert "No request through the gateway in the last minute." in table(model, make_user)
