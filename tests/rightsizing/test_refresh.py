"""Refreshing against a real Prometheus serving backfilled history (see conftest.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from models_app.models import InferenceModel
from scheduler.rightsizing.conf import MetricsConvention
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import GI, Policy
from scheduler.rightsizing.prometheus import PrometheusClient
from scheduler.rightsizing.queries import ModelKey, QueryBuilder
from scheduler.rightsizing.refresh import collect_figures, refresh_cluster
from tests.rightsizing.factories import make_cluster, make_model, reference_models
from tests.rightsizing.prometheus_server import MI, free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def refreshed(prometheus, end):
    cluster = make_cluster(prometheus.url)
    models = reference_models(cluster)
    refresh = refresh_cluster(cluster, at=end)
    latest = {f"{o.namespace}/{o.name}": o for o in Observation.objects.filter(is_latest=True, kind="InferenceModel")}
    return cluster, models, refresh, latest


def test_reference_example_from_metrics(refreshed):
    _, models, refresh, latest = refreshed
    assert refresh.ok, refresh.error
    observation = latest["default/llama-2-70b"]
    assert observation.peak_bytes == 75 * GI  # not the pod cgroup (90Gi), not the pause container (100Gi)
    assert observation.utilization_percent == 93
    assert observation.recommended_bytes == 78 * GI
    assert observation.recommendation == (
        "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)"
    )
    assert observation.samples == 5080
    assert observation.gpu_memory_peak_bytes == 70000 * MI
    assert observation.kv_cache_peak_ratio == pytest.approx(0.85)
    row = InferenceModel.objects.get(pk=models["default/llama-2-70b"].pk)
    assert row.status["observedPeakMemory"] == "75Gi"
    assert row.status["utilizationPercent"] == 93
    assert row.status["recommendation"] == observation.recommendation
    assert row.status["lastObservation"] == observation.observed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (row.observed_peak_bytes, row.utilization_percent) == (75 * GI, 93)


def test_models_are_told_apart_by_namespace_and_found_by_any_model_label(refreshed):
    _, _, _, latest = refreshed
    assert latest["team-b/llama-2-70b"].peak_bytes == 40 * GI
    assert latest["team-b/llama-2-70b"].utilization_percent == 83
    assert latest["team-b/llama-2-70b"].overprovisioned
    assert latest["default/llmd-served"].peak_bytes == 12 * GI


def test_no_data_and_too_few_samples_give_no_number(refreshed):
    _, models, refresh, latest = refreshed
    for key, samples in [("default/no-data", 0), ("default/few-samples", 30)]:
        observation = latest[key]
        assert observation.samples == samples
        assert (observation.peak_bytes, observation.utilization_percent, observation.recommended_bytes) == (
            None,
            None,
            None,
        )
        assert observation.recommendation == (
            f"Not enough data: {samples} memory samples in the last 7d (at least 60 needed)"
        )
        status = InferenceModel.objects.get(pk=models[key].pk).status
        assert "observedPeakMemory" not in status and "utilizationPercent" not in status
    assert refresh.models_seen == 8 and refresh.models_with_data == 6


def test_peak_above_declared_tiny_and_rounding(refreshed):
    _, models, _, latest = refreshed
    over = latest["default/over-peak"]
    assert (over.utilization_percent, over.ratio, over.recommended_bytes) == (100, 1.25, 21 * GI)
    assert InferenceModel.objects.get(pk=models["default/over-peak"].pk).status["utilizationPercent"] == 100
    assert over.recommendation.startswith("Consider increasing memory from 16Gi to 21Gi")
    tiny = latest["default/tiny"]
    assert (tiny.peak_bytes, tiny.recommended_bytes) == (100 * MI, 512 * MI)
    rounding = latest["default/rounding"]
    assert (rounding.peak_bytes, rounding.recommended_bytes, rounding.utilization_percent) == (
        30 * GI + 512 * MI,
        32 * GI,
        76,
    )
    assert rounding.recommendation == (
        "Consider reducing memory from 40Gi to 32Gi (observed peak 30.5Gi, 23% overprovisioned)"
    )


def test_queries_are_batched_whatever_the_number_of_models(prometheus, end):
    cluster = make_cluster(prometheus.url)
    reference_models(cluster)
    for index in range(40):
        make_model(cluster, f"extra-{index}", "8Gi")
    before = prometheus.query_requests_served()
    refresh = refresh_cluster(cluster, at=end)
    assert refresh.ok and refresh.models_seen == 48
    assert refresh.queries == 7
    assert prometheus.query_requests_served() - before == 7  # Prometheus' own count agrees


def test_percentile_window_and_model_filter(prometheus, end):
    builder = QueryBuilder(MetricsConvention.from_settings(), 7 * 86400)
    with PrometheusClient(prometheus.url) as client:
        median = collect_figures(client, builder, Policy(percentile=0.5), end, ModelKey("default", "llama-2-70b"))
        assert list(median) == [ModelKey("default", "llama-2-70b")]  # one model asked, one answered
        assert 60 * GI < median[ModelKey("default", "llama-2-70b")].peak_bytes < 70 * GI
        day = QueryBuilder(MetricsConvention.from_settings(), 3600)
        recent = collect_figures(client, day, Policy(), end)
    assert recent[ModelKey("default", "few-samples")].samples == 30
    assert recent[ModelKey("team-b", "llama-2-70b")].peak_bytes == 30 * GI  # the 40Gi sample is a week old


def test_prometheus_down_is_a_clear_error_and_keeps_the_last_report(prometheus, end):
    cluster = make_cluster(prometheus.url)
    models = reference_models(cluster)
    assert refresh_cluster(cluster, at=end).ok
    cluster.prometheus_url = f"http://127.0.0.1:{free_port()}"
    cluster.save()
    failed = refresh_cluster(cluster, at=end + timedelta(hours=1))
    assert not failed.ok
    assert (
        failed.error
        == f"Prometheus at {cluster.prometheus_url} is unreachable (ConnectionError); the last report is kept"
    )
    latest = Observation.objects.get(object_id=models["default/llama-2-70b"].pk, kind="InferenceModel", is_latest=True)
    assert latest.refresh.ok and latest.utilization_percent == 93
    assert Observation.objects.count() == len(models)
    assert Refresh.objects.filter(cluster=cluster).count() == 2


def test_a_refused_query_is_reported_with_prometheus_message(prometheus, end):
    cluster = make_cluster(prometheus.url)
    make_model(cluster, "llama-2-70b", "80Gi")
    broken = MetricsConvention.from_settings()
    broken = MetricsConvention(**{**broken.__dict__, "memory_metric": "container_memory{"})
    refresh = refresh_cluster(cluster, at=end, convention=broken)
    assert not refresh.ok
    assert refresh.error.startswith(f"Prometheus at {prometheus.url} answered 400: ")
    assert "parse error" in refresh.error


def test_history_is_kept_and_only_the_newest_is_latest(prometheus, end):
    cluster = make_cluster(prometheus.url)
    model = make_model(cluster, "llama-2-70b", "80Gi")
    refresh_cluster(cluster, at=end - timedelta(days=1))
    refresh_cluster(cluster, at=end)
    history = list(Observation.objects.filter(kind="InferenceModel", object_id=model.pk).order_by("observed_at"))
    assert len(history) == 2
    assert [o.is_latest for o in history] == [False, True]
    assert history[1].peak_bytes == 75 * GI


def test_command_refreshes_a_named_cluster(prometheus, end, capsys):
    cluster = make_cluster(prometheus.url)
    make_model(cluster, "llama-2-70b", "80Gi")
    call_command("refresh_rightsizing", "--cluster", cluster.name)
    assert "metrics: 1/1 models with data, 7 queries" in capsys.readouterr().out
    with pytest.raises(CommandError, match="'nope' is not a registered cluster"):
        call_command("refresh_rightsizing", "--cluster", "nope")
    cluster.prometheus_url = f"http://127.0.0.1:{free_port()}"
    cluster.save()
    with pytest.raises(CommandError, match="1 of 1 refreshes failed"):
        call_command("refresh_rightsizing")


def test_one_query_per_model_agrees_with_the_batched_queries(prometheus, end):
    cluster = make_cluster(prometheus.url)
    models = reference_models(cluster)
    batched = refresh_cluster(cluster, at=end)
    first = {o.object_id: (o.peak_bytes, o.samples, o.gpu_memory_peak_bytes) for o in batched.observations.all()}
    per_model = refresh_cluster(cluster, at=end, batched=False)
    second = {o.object_id: (o.peak_bytes, o.samples, o.gpu_memory_peak_bytes) for o in per_model.observations.all()}
    assert first == second
    assert per_model.queries == 7 * len(models)  # 8 models, 8 distinct (namespace, modelName) pairs
