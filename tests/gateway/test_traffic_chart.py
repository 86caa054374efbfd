"""The model page's traffic charts, from a real Prometheus holding a day of the gateway's series."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from models_app.models import InferenceModel, KubeAIModel
from models_app.traffic import traffic
from tests.rightsizing.prometheus_server import History, PrometheusServer, minutes

DAY_MINUTES = 24 * 60
# The series reach an hour past either end of the chart's day: a point whose 15-minute window held
# only part of the series (the chart's first, or its last once the test ran minutes after the
# series were written) was a rate of the samples it held (52 for 13 of 15), not the series' own.
MARGIN_MINUTES = 60


def gateway_series(history: History, model: str, per_minute: int, end: int) -> None:
    """``per_minute`` requests a minute up to ``end``, over the chart's day and the margins, each
    answered in 50-100 ms."""
    stamps = list(minutes(end, DAY_MINUTES + 2 * MARGIN_MINUTES))
    counts = [(stamp, per_minute * index) for index, stamp in enumerate(stamps)]
    history.add("inference_portal_gateway_requests_total", {"model": model, "status": "200"}, counts)
    for le, share in (("0.05", 0), ("0.1", 1), ("+Inf", 1)):
        history.add("inference_portal_gateway_request_duration_seconds_bucket", {"model": model, "le": le},
                    [(stamp, share * count) for stamp, count in counts])


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    history = History()
    end = (int(time.time()) // 60) * 60 + MARGIN_MINUTES * 60  # samples ahead of now are read once now passes them
    gateway_series(history, "default/llama-2-7b", 60, end)
    gateway_series(history, "other", 6, end)
    server = PrometheusServer(history)
    yield server
    server.stop()


@pytest.fixture
def watched(db, prometheus) -> Cluster:
    return Cluster.objects.create(name="watched", auth_method=Cluster.AuthMethod.SNAPSHOT,
                                  prometheus_url=prometheus.url)


def values(svg: str) -> set[str]:
    """The values pygal writes beside each point (``<desc class="value">``)."""
    return {part.split("<", 1)[0] for part in svg.split('<desc class="value">')[1:]}


def test_model_page_charts_requests_per_minute_and_latency_percentiles(watched, make_user) -> None:
    model = InferenceModel.objects.create(cluster=watched, namespace="default", name="llama", sync_state="Synced",
                                          spec={"modelName": "llama-2-7b", "memory": "1Gi"})
    browser = Client()
    browser.force_login(make_user("viewer"))
    page = browser.get(reverse("inferencemodel-detail-page", args=[model.pk])).content.decode()
    section = page.split('<section id="traffic">')[1].split("</section>")[0]
    assert "Requests per minute (gateway)" in section and "Latency (ms, gateway)" in section
    shown = values(section)
    # this model's rate at every point (not the other model's 6), p50 and p95 interpolated in the 50-100 ms bucket
    assert shown == {"60", "75", "97.5"}


def test_without_prometheus_or_traffic_the_page_says_why(watched, db) -> None:
    quiet = KubeAIModel.objects.create(cluster=watched, namespace="default", name="silent", sync_state="Synced",
                                       spec={"url": "ollama://x", "engine": "OLlama"})
    assert traffic(quiet).note == "No request through the gateway in the last day."
    watched.prometheus_url = ""
    assert traffic(quiet).note == "cluster watched has no Prometheus URL: no traffic history."
    watched.prometheus_url = "http://127.0.0.1:9"
    assert "is unreachable (ConnectionError)" in traffic(quiet).note
