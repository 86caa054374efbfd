"""Refreshing a cluster's right-sizing: batched queries -> policies -> history, status, write-back.

Every serving kind (those declaring ``pod_label`` and ``pod_resources()``, clusters/serving.py) is
judged in the same pass. A constant number of Prometheus requests per cluster whatever the number
of models (memory peak, sample count, GPU framebuffer, GPU size, KV cache, OOM kills, CPU p95) and
a constant number of SQL statements: one SELECT per kind, one UPDATE retiring the previous
observations, one COPY of the new ones (clusters.sync.bulk), one UPDATE per kind whose status carries
right-sizing fields (InferenceModel's CRD) from a JSON document, and no per-row lookups (SQLite,
the embedded default, uses the ORM's bulk statements instead, a few per 500 rows). When Prometheus
cannot answer, the refresh is recorded as failed with the reason and nothing else changes: the last
report stays as it was.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from clusters.kube.client import ClusterGateway, GatewayError
from clusters.models import Cluster, KubeObject, SyncState
from clusters.sync import bulk
from scheduler.calculator.presets import published_weights_bytes
from scheduler.rightsizing.conf import MetricsConvention, default_policy, format_duration, option, serving_kinds
from scheduler.rightsizing.cpu_policy import cpu_verdict
from scheduler.rightsizing.gpu_policy import gpu_verdict
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import Policy, evaluate
from scheduler.rightsizing.prometheus import PrometheusClient, PrometheusError, Sample
from scheduler.rightsizing.queries import ModelKey, QueryBuilder
from scheduler.rightsizing.writeback import RIGHTSIZING_STATUS_FIELDS, status_fields, write_back

logger = logging.getLogger(__name__)
MIB = 1024**2


@dataclass
class Figures:
    """What Prometheus says about one model over the window (None: no series)."""

    peak_bytes: int | None = None
    samples: int = 0
    gpu_memory_peak_bytes: int | None = None
    gpu_memory_size_bytes: int | None = None  # one GPU
    kv_cache_peak_ratio: float | None = None
    oom_killed: bool = False
    cpu_p95_millicores: int | None = None


def _by_model(samples: list[Sample]) -> dict[ModelKey, float]:
    return {ModelKey(s.labels.get("namespace", ""), s.labels.get("model", "")): s.value for s in samples}


def collect_figures(
    client: PrometheusClient, builder: QueryBuilder, policy: Policy, at: datetime, only: ModelKey | None = None
) -> dict[ModelKey, Figures]:
    """Run the figure queries (for every model, or for ``only``) and join them by model."""
    peaks = _by_model(client.query(builder.memory_peak(policy.percentile, only), at))
    counts = _by_model(client.query(builder.memory_samples(only), at))
    gpus = _by_model(client.query(builder.gpu_memory_peak(only), at))
    sizes = _by_model(client.query(builder.gpu_memory_size(only), at))
    kv = _by_model(client.query(builder.kv_cache_peak(only), at))
    ooms = _by_model(client.query(builder.oom_killed(only), at))
    cpus = _by_model(client.query(builder.cpu_percentile(only), at))
    figures: dict[ModelKey, Figures] = {}
    for key in {*peaks, *counts, *gpus, *sizes, *kv, *ooms, *cpus}:
        figures[key] = Figures(
            peak_bytes=round(peaks[key]) if key in peaks else None,
            samples=round(counts.get(key, 0)),
            gpu_memory_peak_bytes=round(gpus[key] * MIB) if key in gpus else None,
            gpu_memory_size_bytes=round(sizes[key] * MIB) if key in sizes else None,
            kv_cache_peak_ratio=kv.get(key),
            oom_killed=ooms.get(key, 0) > 0,
            cpu_p95_millicores=math.ceil(cpus[key] * 1000) if key in cpus else None,
        )
    return figures


def observe(obj: KubeObject, figures: Figures | None, policy: Policy, at: datetime) -> Observation:
    """One Observation (unsaved) of any serving object; too few samples give no memory number at all."""
    figures = figures or Figures()
    pod = obj.pod_resources()
    observation = Observation.of(
        obj,
        observed_at=at,
        samples=figures.samples,
        declared_bytes=pod.memory_bytes,
        oom_killed=figures.oom_killed,
        gpus_per_pod=pod.gpus or None,
        gpu_memory_peak_bytes=figures.gpu_memory_peak_bytes,
        gpu_capacity_bytes=pod.gpus * figures.gpu_memory_size_bytes
        if pod.gpus and figures.gpu_memory_size_bytes
        else None,
        kv_cache_peak_ratio=figures.kv_cache_peak_ratio,
        cpu_request_millicores=pod.cpu_millicores,
        cpu_p95_millicores=figures.cpu_p95_millicores,
    )
    window = format_duration(policy.window_seconds)
    cpu = cpu_verdict(pod.cpu_millicores, figures.cpu_p95_millicores, window)
    observation.recommended_cpu_millicores, observation.cpu_recommendation = (
        cpu.recommended_millicores,
        cpu.recommendation,
    )
    gpu = gpu_verdict(
        pod.gpus,
        figures.gpu_memory_peak_bytes,
        figures.gpu_memory_size_bytes,
        figures.kv_cache_peak_ratio,
        published_weights_bytes(pod.served_model),
        float(option("GPU_MEMORY_UTILIZATION")),
    )
    observation.gpu_recommendation = gpu.recommendation
    if figures.peak_bytes is None or figures.samples < policy.min_samples:
        observation.recommendation = (
            f"Not enough data: {figures.samples} memory samples in the last {window} "
            f"(at least {policy.min_samples} needed)"
        )
        return observation
    observation.peak_bytes = figures.peak_bytes
    if not pod.memory_bytes:
        observation.recommendation = "No declared memory to compare with"
        return observation
    verdict = evaluate(pod.memory_bytes, figures.peak_bytes, policy, oom_killed=figures.oom_killed)
    observation.ratio = verdict.ratio
    observation.utilization_percent = verdict.utilization_percent
    observation.recommended_bytes = verdict.recommended_bytes
    observation.freed_bytes = verdict.freed_bytes
    observation.recommendation = verdict.recommendation
    observation.overprovisioned = verdict.overprovisioned
    return observation


def _serving_objects(cluster: Cluster) -> list[KubeObject]:
    """Every serving object of the cluster still in it: one SELECT per kind, no related rows."""
    objects: list[KubeObject] = []
    for kind in serving_kinds():
        rows = kind.objects.filter(cluster=cluster).exclude(sync_state=SyncState.DELETED_IN_CLUSTER).order_by()
        objects.extend(rows)
    return objects


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
    objects = _serving_objects(cluster)
    keys = [ModelKey(obj.namespace, obj.pod_resources().label_value) for obj in objects]
    with PrometheusClient(cluster.prometheus_url, cluster.prometheus_auth_header, option("TIMEOUT_SECONDS")) as client:
        try:
            if batched:
                figures = collect_figures(client, builder, policy, at)
            else:
                figures = {}
                for key in set(keys):
                    figures.update(collect_figures(client, builder, policy, at, only=key))
        except PrometheusError as error:
            refresh.queries = client.requests_made
            return _failed(refresh, f"{error}; the last report is kept")
        refresh.queries = client.requests_made
    observations = [observe(obj, figures.get(key), policy, at) for obj, key in zip(objects, keys, strict=True)]
    with transaction.atomic():
        refresh.ok = True
        refresh.models_seen = len(objects)
        refresh.models_with_data = sum(1 for o in observations if o.peak_bytes is not None)
        refresh.finished_at = timezone.now()
        refresh.save()
        Observation.objects.filter(cluster=cluster, is_latest=True).update(is_latest=False)
        for observation in observations:
            observation.refresh = refresh
        bulk.insert(Observation, observations)
        statused = with_status(objects, observations)
        store_status(statused)
    errors = _write_back_all(cluster, statused)
    if errors:
        refresh.error = "status write-back failed for " + "; ".join(errors)
        refresh.save(update_fields=["error"])
    return refresh


def with_status(objects: list[KubeObject], observations: list[Observation]) -> list[tuple[KubeObject, Observation]]:
    """The (object, observation) pairs whose kind's CRD carries right-sizing status fields."""
    return [
        (obj, observation)
        for obj, observation in zip(objects, observations, strict=True)
        if getattr(obj, "rightsizing_status", False)
    ]


def store_status(pairs: list[tuple[KubeObject, Observation]]) -> None:
    """Each kind's right-sizing status and projected columns in one UPDATE per kind (a JSON document
    joined by id): linear in rows, unlike ``bulk_update``'s CASE per row, and one parameter."""
    by_kind: dict[type[KubeObject], list[tuple[KubeObject, Observation]]] = {}
    for obj, observation in pairs:
        by_kind.setdefault(type(obj), []).append((obj, observation))
    for kind_pairs in by_kind.values():
        _store_kind_status(kind_pairs)


def _store_kind_status(pairs: list[tuple[KubeObject, Observation]]) -> None:
    rows = []
    for obj, observation in pairs:
        kept = {k: v for k, v in (obj.status or {}).items() if k not in RIGHTSIZING_STATUS_FIELDS}
        obj.status = {**kept, **status_fields(observation)}
        obj.project()
        rows.append(
            {"id": obj.pk, "status": obj.status, "peak": obj.observed_peak_bytes, "util": obj.utilization_percent}
        )
    model = type(pairs[0][0])
    if connection.vendor != "postgresql":
        model.objects.bulk_update(
            [obj for obj, _ in pairs], ["status", "observed_peak_bytes", "utilization_percent"], batch_size=500
        )
        return
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS t SET status = v.status, observed_peak_bytes = v.peak, utilization_percent = v.util "
            "FROM jsonb_to_recordset(%s::jsonb) AS v(id bigint, status jsonb, peak bigint, util smallint) "
            "WHERE t.id = v.id",
            [json.dumps(rows)],
        )


def _write_back_all(cluster: Cluster, pairs: list[tuple[KubeObject, Observation]]) -> list[str]:
    """Write status to the cluster where the portal is the controller; one failure does not stop the rest."""
    errors: list[str] = []
    pairs = [(obj, observation) for obj, observation in pairs if cluster.manages(obj.kube.kind)]
    if not pairs:
        return errors
    gateway = ClusterGateway(cluster)  # one client for the cluster's whole refresh
    try:
        for obj, observation in pairs:
            obj.cluster = cluster  # the gateway and messages need it; no query per row
            try:
                write_back(gateway, obj, observation)
            except GatewayError as error:
                errors.append(f"{obj}: {error}")
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
