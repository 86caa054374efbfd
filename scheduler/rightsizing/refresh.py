"""Refreshing a cluster's right-sizing: batched queries -> policy -> history, status, write-back.

Four Prometheus requests per cluster whatever the number of models (memory peak, sample count,
GPU framebuffer, KV cache). When Prometheus cannot answer, the refresh is recorded as failed with
the reason and nothing else changes: the last report stays as it was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from clusters.gateway import ClusterGateway, GatewayError
from clusters.models import Cluster, SyncState
from models_app.models import InferenceModel
from scheduler.rightsizing.conf import MetricsConvention, default_policy, format_duration, option
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import Policy, evaluate
from scheduler.rightsizing.prometheus import PrometheusClient, PrometheusError, Sample
from scheduler.rightsizing.queries import ModelKey, QueryBuilder
from scheduler.rightsizing.writeback import (
    RIGHTSIZING_STATUS_FIELDS,
    status_fields,
    write_back,
)

logger = logging.getLogger(__name__)
MIB = 1024**2


@dataclass
class Figures:
    """What Prometheus says about one model over the window (None: no series)."""

    peak_bytes: int | None = None
    samples: int = 0
    gpu_memory_peak_bytes: int | None = None
    kv_cache_peak_ratio: float | None = None


def _by_model(samples: list[Sample]) -> dict[ModelKey, float]:
    return {ModelKey(s.labels.get("namespace", ""), s.labels.get("model", "")): s.value for s in samples}


def collect_figures(
    client: PrometheusClient, builder: QueryBuilder, policy: Policy, at: datetime, only: ModelKey | None = None
) -> dict[ModelKey, Figures]:
    """Run the four figure queries (for every model, or for ``only``) and join them by model."""
    peaks = _by_model(client.query(builder.memory_peak(policy.percentile, only), at))
    counts = _by_model(client.query(builder.memory_samples(only), at))
    gpus = _by_model(client.query(builder.gpu_memory_peak(only), at))
    kv = _by_model(client.query(builder.kv_cache_peak(only), at))
    figures: dict[ModelKey, Figures] = {}
    for key in {*peaks, *counts, *gpus, *kv}:
        figures[key] = Figures(
            peak_bytes=round(peaks[key]) if key in peaks else None,
            samples=round(counts.get(key, 0)),
            gpu_memory_peak_bytes=round(gpus[key] * MIB) if key in gpus else None,
            kv_cache_peak_ratio=kv.get(key),
        )
    return figures


def observe(model: InferenceModel, figures: Figures | None, policy: Policy, at: datetime) -> Observation:
    """One Observation (unsaved) from a model's figures; too few samples give no number at all."""
    figures = figures or Figures()
    observation = Observation(
        model=model,
        observed_at=at,
        node_pool=model.node_pool,
        samples=figures.samples,
        declared_bytes=model.memory_bytes,
        gpu_memory_peak_bytes=figures.gpu_memory_peak_bytes,
        kv_cache_peak_ratio=figures.kv_cache_peak_ratio,
    )
    window = format_duration(policy.window_seconds)
    if figures.peak_bytes is None or figures.samples < policy.min_samples:
        observation.recommendation = (
            f"Not enough data: {figures.samples} memory samples in the last {window} "
            f"(at least {policy.min_samples} needed)"
        )
        return observation
    observation.peak_bytes = figures.peak_bytes
    if not model.memory_bytes:
        observation.recommendation = "No declared memory to compare with"
        return observation
    verdict = evaluate(model.memory_bytes, figures.peak_bytes, policy)
    observation.ratio = verdict.ratio
    observation.utilization_percent = verdict.utilization_percent
    observation.recommended_bytes = verdict.recommended_bytes
    observation.recommendation = verdict.recommendation
    observation.overprovisioned = verdict.overprovisioned
    return observation


def refresh_cluster(
    cluster: Cluster,
    policy: Policy | None = None,
    at: datetime | None = None,
    convention: MetricsConvention | None = None,
    batched: bool = True,
) -> Refresh:
    """Refresh one cluster now (``at`` is the end of the window; tests pass fixed times).

    ``batched=False`` asks Prometheus once per model instead: the benchmark's reference only.
    """
    policy = policy or default_policy()
    at = at or timezone.now()
    refresh = Refresh(cluster=cluster, started_at=timezone.now(), window_seconds=policy.window_seconds)
    if not cluster.prometheus_url:
        return _failed(refresh, f"cluster {cluster.name} has no Prometheus URL (set prometheus_url)")
    refused = cluster.insecure_url_errors().get("prometheus_url")
    if refused:
        return _failed(refresh, f"cluster {cluster.name}: prometheus_url {refused}")
    builder = QueryBuilder(convention or MetricsConvention.from_settings(), policy.window_seconds)
    rows = list(InferenceModel.objects.filter(cluster=cluster).exclude(sync_state=SyncState.DELETED_IN_CLUSTER))
    with PrometheusClient(cluster.prometheus_url, cluster.prometheus_auth_header, option("TIMEOUT_SECONDS")) as client:
        try:
            if batched:
                figures = collect_figures(client, builder, policy, at)
            else:
                figures = {}
                for key in {ModelKey(row.namespace, row.model_name) for row in rows}:
                    figures.update(collect_figures(client, builder, policy, at, only=key))
        except PrometheusError as error:
            refresh.queries = client.requests_made
            return _failed(refresh, f"{error}; the last report is kept")
        refresh.queries = client.requests_made
    observations = [observe(row, figures.get(ModelKey(row.namespace, row.model_name)), policy, at) for row in rows]
    with transaction.atomic():
        refresh.ok = True
        refresh.models_seen = len(rows)
        refresh.models_with_data = sum(1 for o in observations if o.peak_bytes is not None)
        refresh.finished_at = timezone.now()
        refresh.save()
        Observation.objects.filter(model__cluster=cluster, is_latest=True).update(is_latest=False)
        for observation in observations:
            observation.refresh = refresh
        Observation.objects.bulk_create(observations, batch_size=500)
        for row, observation in zip(rows, observations, strict=True):
            kept = {k: v for k, v in (row.status or {}).items() if k not in RIGHTSIZING_STATUS_FIELDS}
            row.status = {**kept, **status_fields(observation)}
            row.project()
        InferenceModel.objects.bulk_update(
            rows, ["status", "observed_peak_bytes", "utilization_percent"], batch_size=500
        )
    errors = _write_back_all(rows, observations)
    if errors:
        refresh.error = "status write-back failed for " + "; ".join(errors)
        refresh.save(update_fields=["error"])
    return refresh


def _write_back_all(rows: list[InferenceModel], observations: list[Observation]) -> list[str]:
    """Write status to the cluster where the portal is the controller; one failure does not stop the rest."""
    errors: list[str] = []
    managed = [
        (row, observation)
        for row, observation in zip(rows, observations, strict=True)
        if row.cluster.manages("InferenceModel")
    ]
    if not managed:
        return errors
    gateway = ClusterGateway(managed[0][0].cluster)  # one client for the cluster's whole refresh
    try:
        for row, observation in managed:
            try:
                write_back(gateway, row, observation)
            except GatewayError as error:
                errors.append(f"{row}: {error}")
    finally:
        gateway.close()
    return errors


def _failed(refresh: Refresh, message: str) -> Refresh:
    logger.warning("right-sizing refresh of %s failed: %s", refresh.cluster, message)
    refresh.ok = False
    refresh.error = message
    refresh.finished_at = timezone.now()
    refresh.save()
    return refresh


def refresh_clusters(name: str | None = None, cluster_ids: set[int] | None = None) -> list[Refresh]:
    """Refresh the named cluster, or every cluster with a Prometheus URL; only ``cluster_ids`` when given."""
    clusters = Cluster.objects.filter(name=name) if name else Cluster.objects.exclude(prometheus_url="")
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=cluster_ids)
    return [refresh_cluster(cluster) for cluster in clusters]
