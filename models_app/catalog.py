"""The model catalog across serving kinds: each kind's own FilterSet, one restriction, one SQL UNION.

Each kind keeps its filters (``feature`` exists only for KubeAI; a kind without a requested filter
drops out rather than ignoring it); the union is sorted and paginated by the database.

At 100,000 models a plain ``UNION ALL ... ORDER BY ... LIMIT 25`` sorts every row (PostgreSQL
does not push the limit into the branches), so :class:`CatalogRows` asks each kind for its own
first ``offset + 25`` rows in order (an index scan on ``(name, namespace)``), merges those, and
counts per kind. The filter choices read distinct values with the kinds' default ordering
cleared: otherwise ``SELECT DISTINCT`` also selects the ordering's columns and returns every row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.db.models import CharField, F, PositiveSmallIntegerField, QuerySet, Value
from django.db.models.functions import Cast

from accounts.public import VIEW, restrict
from clusters.postgres_only import LONGEST_INDEXED_TEXT
from clusters.web.api.ordering import ordering_error
from models_app.filtersets import InferenceModelFilterSet, KubeAIModelFilterSet, ModelServiceFilterSet
from models_app.models import InferenceModel, KubeAIModel, ModelService

FILTERSETS = {
    "InferenceModel": (InferenceModel, InferenceModelFilterSet),
    "Model": (KubeAIModel, KubeAIModelFilterSet),
    "ModelService": (ModelService, ModelServiceFilterSet),
}
SORTABLE = (
    "name", "kind", "cluster_name", "namespace", "node_pool", "engine", "ready", "phase", "replicas", "memory_bytes",
    "gpu_count", "accelerator", "utilization", "sync_state",
)  # fmt: skip
# The columns shown, each sorted by its key: 11 fit a 1400 px window without scrolling, so the
# kind sits under the name, cluster with namespace, phase with readiness and the accelerator
# with the GPU count (each still sortable by its own key through ``?ordering=``).
COLUMN_LABELS = [
    ("name", "Name"), ("namespace", "Cluster · namespace"), ("node_pool", "Pool"), ("engine", "Engine"),
    ("ready", "Ready · phase"), ("replicas", "Replicas"), ("memory_bytes", "Memory"), ("gpu_count", "GPUs"),
    ("utilization", "Utilization"), ("sync_state", "Sync state"),
]  # fmt: skip
COLUMNS = [
    "id", "kind", "page", "cluster_name", "namespace", "name", "model_name", "engine", "node_pool",
    "memory_bytes", "replicas", "ready", "sync_state", "utilization", "phase", "gpu_count", "accelerator",
]  # fmt: skip


class CatalogError(ValueError):
    """A bad catalog parameter, worded as field + value + rule."""


class CatalogRows:
    """The catalog's rows as a Paginator reads them: ``count()`` and slices, each answered per kind.

    A slice ``[start:stop]`` takes each kind's first ``stop`` rows in the page's order (so the
    database reads at most ``stop`` rows of each, by index), merges them in one ``UNION ALL`` and
    keeps ``[start:stop]`` of the merge: the same rows as sorting the whole union. SQLite cannot
    limit a branch of a compound query; there the whole union is sorted (the embedded demo's size).
    """

    def __init__(self, parts: list[QuerySet], order: list[str]) -> None:
        self.parts, self.order = parts, order

    def count(self) -> int:
        return sum(part.count() for part in self.parts)

    def __getitem__(self, window: slice) -> list[dict[str, Any]]:
        if not isinstance(window, slice) or window.stop is None:
            raise TypeError("the catalog is read by pages: slice it as [start:stop]")
        if window.stop <= (window.start or 0):
            # nothing to read (the Paginator's [0:0] when no row matches): a QuerySet sliced to
            # nothing is empty, and a union of it returns the other, already sliced, branch
            return []
        if len(self.parts) < 2:
            return list(self.parts[0].order_by(*self.order)[window]) if self.parts else []
        parts = self.parts
        if connection.features.supports_slicing_ordering_in_compound:
            parts = [part.order_by(*self.order)[: window.stop] for part in parts]
        return list(parts[0].union(*parts[1:], all=True).order_by(*self.order)[window])


def catalog(params: Mapping[str, str], user: Any) -> CatalogRows:
    """Rows (dicts of COLUMNS) of every serving kind the user may see, filtered and sorted."""
    kinds = [params["kind"]] if params.get("kind") else list(FILTERSETS)
    unknown = [kind for kind in kinds if kind not in FILTERSETS]
    if unknown:
        raise CatalogError(f"kind: {unknown[0]!r} must be one of {', '.join(FILTERSETS)}")
    ordering = params.get("ordering") or "name"
    if ordering.lstrip("-") not in SORTABLE:
        raise CatalogError(ordering_error(ordering, list(SORTABLE)))
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
    key = ordering.lstrip("-")
    return CatalogRows(parts, [f"-{key}" if ordering.startswith("-") else key, "namespace", "name"])


def filter_choices(user: Any) -> dict[str, list[str]]:
    """Values offered in the catalog's selects: the pools and engines of models the user can see.

    Engines are matched case-insensitively (``engine`` filters with ``iexact``), so ``VLLM`` and
    ``vLLM`` are one choice, shown in its mixed-case spelling where one exists; stored values stay
    as written.
    """
    pools: set[str] = set()
    engines: set[str] = set()
    for model, _ in FILTERSETS.values():
        rows = restrict(model.objects.order_by(), user, VIEW)  # no ordering columns in the DISTINCT
        if rows.query.where or connection.vendor != "postgresql":
            # some namespaces only: the user's rows, found by the (cluster, namespace, name) index
            for pool, engine in rows.values_list("node_pool", "engine").distinct():
                pools.add(pool)
                engines.add(engine)
        else:
            pools.update(_walk_index(model, "node_pool", LONGEST_INDEXED_TEXT))
            engines.update(_walk_index(model, "engine"))
    return {"pools": sorted(pools - {""}), "engines": _one_spelling_each(engines - {""})}


def _one_spelling_each(engines: set[str]) -> list[str]:
    """One choice per engine whatever its case: the mixed-case spelling (vLLM) over the shouted one."""
    spellings: dict[str, str] = {}
    for engine in sorted(engines, key=lambda value: (value.isupper(), value)):
        spellings.setdefault(engine.lower(), engine)
    return sorted(spellings.values(), key=str.lower)


def _walk_index(model: type, column: str, longest: int | None = None) -> list[str]:
    """Distinct non-empty values of ``column`` over the whole table, one index descent per value.

    A loose index scan (PostgreSQL has no skip scan): each step asks the B-tree for the next
    value above the last, so 5 pools cost 6 descents, not a pass over 100,000 rows. A column
    whose index covers values of at most ``longest`` characters (see clusters.postgres_only) adds
    the longer values, found by their own partial index.
    """
    table, name = connection.ops.quote_name(model._meta.db_table), connection.ops.quote_name(column)
    bound = f" AND length({name}) <= {longest}" if longest else ""
    longer = f" UNION SELECT {name} FROM {table} WHERE length({name}) > {longest}" if longest else ""
    sql = (
        f"WITH RECURSIVE walk(value) AS ("
        f"SELECT MIN({name}) FROM {table} WHERE {name} > ''{bound} "
        f"UNION ALL SELECT (SELECT MIN({name}) FROM {table} WHERE {name} > walk.value{bound}) "
        f"FROM walk WHERE walk.value IS NOT NULL"
        f") SELECT value FROM walk WHERE value IS NOT NULL{longer}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [value for (value,) in cursor.fetchall()]
