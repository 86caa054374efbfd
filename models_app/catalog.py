"""The model catalog across serving kinds: each kind's own FilterSet, one restriction, one SQL UNION.

Each kind keeps its filters (``feature`` exists only for KubeAI; a kind without a requested filter
drops out rather than ignoring it); the union is sorted and paginated by the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import CharField, F, PositiveSmallIntegerField, QuerySet, Value
from django.db.models.functions import Cast

from accounts.access import VIEW, restrict
from models_app.filtersets import InferenceModelFilterSet, KubeAIModelFilterSet, ModelServiceFilterSet
from models_app.models import InferenceModel, KubeAIModel, ModelService

FILTERSETS = {
    "InferenceModel": (InferenceModel, InferenceModelFilterSet),
    "Model": (KubeAIModel, KubeAIModelFilterSet),
    "ModelService": (ModelService, ModelServiceFilterSet),
}
COLUMN_LABELS = [
    ("name", "Name"), ("kind", "Kind"), ("cluster_name", "Cluster"), ("namespace", "Namespace"), ("node_pool", "Pool"),
    ("engine", "Engine"), ("ready", "Ready"), ("phase", "Phase"), ("replicas", "Replicas"), ("memory_bytes", "Memory"),
    ("gpu_count", "GPUs"), ("accelerator", "Accelerator"), ("utilization", "Utilization"), ("sync_state", "Sync state"),
]  # fmt: skip
SORTABLE = tuple(key for key, _ in COLUMN_LABELS)
COLUMNS = [
    "id", "kind", "page", "cluster_name", "namespace", "name", "model_name", "engine", "node_pool",
    "memory_bytes", "replicas", "ready", "sync_state", "utilization", "phase", "gpu_count", "accelerator",
]  # fmt: skip


class CatalogError(ValueError):
    """A bad catalog parameter, worded as field + value + rule."""


def catalog(params: Mapping[str, str], user: Any) -> QuerySet:
    """Rows (dicts of COLUMNS) of every serving kind the user may see, filtered and sorted."""
    kinds = [params["kind"]] if params.get("kind") else list(FILTERSETS)
    unknown = [kind for kind in kinds if kind not in FILTERSETS]
    if unknown:
        raise CatalogError(f"kind: {unknown[0]!r} must be one of {', '.join(FILTERSETS)}")
    ordering = params.get("ordering") or "name"
    if ordering.lstrip("-") not in SORTABLE:
        raise CatalogError(f"ordering: {ordering!r} must be one of {', '.join(SORTABLE)} (optionally prefixed with -)")
    parts = []
    known = {name for _, filterset_class in FILTERSETS.values() for name in filterset_class.base_filters}
    given = {key for key, value in params.items() if value not in ("", None) and key in known}
    for kind in kinds:
        model, filterset_class = FILTERSETS[kind]
        if given - set(filterset_class.base_filters):
            continue  # a filter this kind does not have (e.g. feature): it cannot match
        filterset = filterset_class(params, queryset=restrict(model.objects.all(), user, VIEW))
        if not filterset.is_valid():
            field, errors = next(iter(filterset.errors.items()))
            raise CatalogError(f"{field}: {params.get(field)!r} {errors[0]}")
        # a typed NULL: PostgreSQL refuses a UNION of smallint and an untyped (text) NULL
        no_utilization = Cast(Value(None), output_field=PositiveSmallIntegerField())
        utilization = F("utilization_percent") if model is InferenceModel else no_utilization
        parts.append(
            filterset.qs.order_by()
            .annotate(
                kind=Value(kind, output_field=CharField()),
                page=Value(model._meta.model_name, output_field=CharField()),
                cluster_name=F("cluster__name"),
                utilization=utilization,
            )
            .values(*COLUMNS)
        )
    if not parts:
        return InferenceModel.objects.none().values("id")
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    key = ordering.lstrip("-")
    return rows.order_by(f"-{key}" if ordering.startswith("-") else key, "namespace", "name")


def filter_choices(user: Any) -> dict[str, list[str]]:
    """Values offered in the catalog's selects: the pools and engines of models the user can see."""
    pools, engines = set(), set()
    for model, _ in FILTERSETS.values():
        rows = restrict(model.objects.all(), user, VIEW)
        pools.update(rows.exclude(node_pool="").values_list("node_pool", flat=True).distinct())
        engines.update(rows.exclude(engine="").values_list("engine", flat=True).distinct())
    return {"pools": sorted(pools), "engines": sorted(engines)}
