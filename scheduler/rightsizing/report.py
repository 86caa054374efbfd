"""The right-sizing report: the newest observation of each serving object, filtered, sorted,
paginated and totalled in SQL.

Each observation carries its object's cluster, namespace, name, pool and its verdict (declared,
recommended and ``freed_bytes``, THE saving), so the report joins no model table: the page at
100,000 objects reads one page of rows, one COUNT and one GROUP BY per pool. Applying a
recommendation re-judges the newest observation against the new declaration at once (apply.py),
so an applied recommendation shows as done without waiting for the next refresh.

The COUNT and the per-pool totals cover every object the filters leave (100,000 latest
observations for staff): :func:`report_figures` caches them under the observations' version
(:class:`scheduler.rightsizing.models.ReportVersion`, moved by PostgreSQL at every write) and the
report's SQL, so they are computed once per refresh and filter, not per request.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.db.models import Case, Count, F, Max, Q, QuerySet, Subquery, Sum, When

from scheduler.rightsizing.models import Observation, Refresh, ReportVersion

FIGURES_CACHE_SECONDS = 3600

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
STATES = ("overprovisioned", "underprovisioned", "no-data", "change", "oom", "gpu")
_STATE_FILTERS = {
    "overprovisioned": Q(overprovisioned=True),
    "underprovisioned": Q(freed_bytes__lt=0),
    "no-data": Q(peak_bytes__isnull=True),
    "change": Q(freed_bytes__lt=0) | Q(freed_bytes__gt=0),
    "oom": Q(oom_killed=True),
    "gpu": ~Q(gpu_recommendation=""),
}
_SORT_COLUMNS = {"cluster": "cluster__name"}


@dataclass
class ReportRow:
    """One object's newest observation, as the exports and the API give it."""

    kind: str
    model_id: int  # the object's id within its kind
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
    oom_killed: bool
    observed_at: datetime
    gpus_per_pod: int | None
    gpu_memory_peak_bytes: int | None
    gpu_capacity_bytes: int | None
    kv_cache_peak_ratio: float | None
    gpu_recommendation: str
    cpu_request_millicores: int | None
    cpu_p95_millicores: int | None
    recommended_cpu_millicores: int | None
    cpu_recommendation: str

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


def row_for(observation: Observation) -> ReportRow:
    fields = {name: getattr(observation, name) for name in ReportRow.__dataclass_fields__ if hasattr(observation, name)}
    return ReportRow(**{**fields, "model_id": observation.object_id, "cluster": observation.cluster.name})


def build_report(
    observations: QuerySet[Observation],
    cluster: str = "",
    namespace: str = "",
    node_pool: str = "",
    q: str = "",
    state: str = "",
    ordering: str = "",
) -> QuerySet[Observation]:
    """The newest observation of each object among ``observations`` (the ones the user may see,
    from ``accounts.access.restrict``), filtered and sorted in SQL (None sorts last)."""
    observations = observations.filter(is_latest=True).select_related("cluster")
    if cluster:
        observations = observations.filter(cluster__name=cluster)
    if namespace:
        observations = observations.filter(namespace=namespace)
    if node_pool:
        observations = observations.filter(node_pool=node_pool)
    if q:
        observations = observations.filter(name__icontains=q)
    if state:
        observations = observations.filter(_STATE_FILTERS[state])
    key = ordering.lstrip("-") or "freed_bytes"
    descending = ordering.startswith("-") if ordering else True
    column = F(_SORT_COLUMNS.get(key, key))
    first = column.desc(nulls_last=True) if descending else column.asc(nulls_last=True)
    return observations.order_by(first, "cluster__name", "namespace", "name", "kind")


def pool_totals(observations: QuerySet[Observation]) -> list[PoolTotal]:
    """Per node pool: declared, recommended, freed (reductions) and needed (increases), biggest saving first.
    One GROUP BY over the filtered report."""
    rows = (
        observations.order_by()
        .values("node_pool")
        .annotate(
            models=Count("id"),
            declared=Sum("declared_bytes", default=0),
            recommended=Sum(
                Case(When(recommended_bytes__isnull=False, then=F("recommended_bytes")), default=F("declared_bytes")),
                default=0,
            ),
            freed=Sum("freed_bytes", filter=Q(freed_bytes__gt=0), default=0),
            needed=Sum("freed_bytes", filter=Q(freed_bytes__lt=0), default=0),
        )
    )
    totals = [
        PoolTotal(
            row["node_pool"], row["models"], row["declared"], row["recommended"] or 0, row["freed"], -row["needed"]
        )
        for row in rows
    ]
    return sorted(totals, key=lambda total: (-total.freed_bytes, total.node_pool))


def report_figures(observations: QuerySet[Observation]) -> tuple[int, list[PoolTotal]]:
    """(objects, pool totals) of a filtered report, cached under the observations' version and the
    report's SQL (which names the user's scope and filters); computed, not cached, without a version."""
    version = ReportVersion.objects.filter(pk=1).values_list("value", flat=True).first()
    if version is None:
        return observations.count(), pool_totals(observations)
    sql, params = observations.query.sql_with_params()
    key = "rightsizing:figures:" + hashlib.blake2b(f"{version}|{sql}|{params!r}".encode(), digest_size=16).hexdigest()
    figures = cache.get(key)
    if figures is None:
        figures = (observations.count(), pool_totals(observations))
        cache.set(key, figures, FIGURES_CACHE_SECONDS)
    return figures


def last_refreshes(cluster_ids: set[int] | None = None) -> list[Refresh]:
    """The newest refresh of each cluster (of ``cluster_ids`` when given), so the page can say when
    data is old or a refresh failed. One query: a refresh's id grows with its start."""
    newest = Refresh.objects.values("cluster_id").annotate(newest=Max("id")).values("newest")
    if cluster_ids is not None:
        newest = newest.filter(cluster_id__in=cluster_ids)
    return list(Refresh.objects.filter(pk__in=Subquery(newest)).select_related("cluster").order_by("cluster__name"))
