"""The right-sizing report: the newest observation of each model against its current declaration.

Rows are recomputed with the policy from the newest observed peak and the model's *current*
declared memory, so a recommendation that was applied shows as done (nothing more to free)
without waiting for the next refresh. Per pool, the total is what right-sizing would free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import Policy, evaluate

SORTABLE = (
    "cluster",
    "namespace",
    "name",
    "node_pool",
    "declared_bytes",
    "peak_bytes",
    "utilization_percent",
    "recommended_bytes",
    "freed_bytes",
    "observed_at",
)
STATES = ("overprovisioned", "underprovisioned", "no-data", "change")


@dataclass
class ReportRow:
    model_id: int
    cluster: str
    namespace: str
    name: str
    model_name: str
    node_pool: str
    declared_bytes: int | None
    peak_bytes: int | None
    samples: int
    utilization_percent: int | None
    ratio: float | None
    recommended_bytes: int | None
    freed_bytes: int | None
    recommendation: str
    overprovisioned: bool
    observed_at: datetime
    gpu_memory_peak_bytes: int | None
    kv_cache_peak_ratio: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PoolTotal:
    node_pool: str
    models: int = 0
    declared_bytes: int = 0
    recommended_bytes: int = 0
    freed_bytes: int = 0  # only reductions count
    needed_bytes: int = 0  # what increases ask for


def row_for(observation: Observation, policy: Policy) -> ReportRow:
    model = observation.model
    declared = model.memory_bytes
    row = ReportRow(
        model_id=model.pk,
        cluster=model.cluster.name,
        namespace=model.namespace,
        name=model.name,
        model_name=model.model_name,
        node_pool=model.node_pool,
        declared_bytes=declared,
        peak_bytes=observation.peak_bytes,
        samples=observation.samples,
        utilization_percent=None,
        ratio=None,
        recommended_bytes=None,
        freed_bytes=None,
        recommendation=observation.recommendation,
        overprovisioned=False,
        observed_at=observation.observed_at,
        gpu_memory_peak_bytes=observation.gpu_memory_peak_bytes,
        kv_cache_peak_ratio=observation.kv_cache_peak_ratio,
    )
    if observation.peak_bytes is not None and declared:
        verdict = evaluate(declared, observation.peak_bytes, policy)
        row.utilization_percent, row.ratio = verdict.utilization_percent, verdict.ratio
        row.recommended_bytes, row.freed_bytes = verdict.recommended_bytes, verdict.freed_bytes
        row.recommendation, row.overprovisioned = verdict.recommendation, verdict.overprovisioned
    return row


def _matches(row: ReportRow, state: str) -> bool:
    return {
        "overprovisioned": row.overprovisioned,
        "underprovisioned": (row.freed_bytes or 0) < 0,
        "no-data": row.peak_bytes is None,
        "change": bool(row.freed_bytes),
    }[state]


def build_report(
    policy: Policy,
    cluster: str = "",
    namespace: str = "",
    node_pool: str = "",
    q: str = "",
    state: str = "",
    ordering: str = "",
    models: QuerySet | None = None,
) -> list[ReportRow]:
    """Rows for the newest observation of each model, filtered and sorted (None sorts last).

    ``models`` narrows the report to those InferenceModels (the pages pass the user's visible ones).
    """
    observations = Observation.objects.filter(is_latest=True).select_related("model", "model__cluster")
    if models is not None:
        observations = observations.filter(model__in=models)
    if cluster:
        observations = observations.filter(model__cluster__name=cluster)
    if namespace:
        observations = observations.filter(model__namespace=namespace)
    if node_pool:
        observations = observations.filter(model__node_pool=node_pool)
    if q:
        observations = observations.filter(model__name__icontains=q)
    rows = [row_for(observation, policy) for observation in observations]
    if state:
        rows = [row for row in rows if _matches(row, state)]
    key = ordering.lstrip("-") or "freed_bytes"
    descending = ordering.startswith("-") if ordering else True
    present = [row for row in rows if getattr(row, key) is not None]
    missing = [row for row in rows if getattr(row, key) is None]
    present.sort(key=lambda row: (getattr(row, key), row.cluster, row.namespace, row.name), reverse=descending)
    missing.sort(key=lambda row: (row.cluster, row.namespace, row.name))
    return present + missing


def pool_totals(rows: list[ReportRow]) -> list[PoolTotal]:
    """Per node pool: declared, recommended, freed (reductions) and needed (increases), biggest saving first."""
    totals: dict[str, PoolTotal] = {}
    for row in rows:
        total = totals.setdefault(row.node_pool, PoolTotal(row.node_pool))
        total.models += 1
        total.declared_bytes += row.declared_bytes or 0
        total.recommended_bytes += (
            row.recommended_bytes if row.recommended_bytes is not None else row.declared_bytes or 0
        )
        if row.freed_bytes and row.freed_bytes > 0:
            total.freed_bytes += row.freed_bytes
        elif row.freed_bytes and row.freed_bytes < 0:
            total.needed_bytes -= row.freed_bytes
    return sorted(totals.values(), key=lambda total: (-total.freed_bytes, total.node_pool))


def last_refreshes(cluster_ids: set[int] | None = None) -> list[Refresh]:
    """The newest refresh of each cluster (of ``cluster_ids`` when given), so the page can say when
    data is old or a refresh failed."""
    newest: dict[int, Refresh] = {}
    refreshes = Refresh.objects.select_related("cluster").order_by("cluster_id", "-started_at", "-id")
    if cluster_ids is not None:
        refreshes = refreshes.filter(cluster_id__in=cluster_ids)
    for refresh in refreshes:
        newest.setdefault(refresh.cluster_id, refresh)
    return list(newest.values())
