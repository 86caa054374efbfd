"""The model catalog across serving kinds: each kind's own FilterSet, one restriction, one SQL UNION.

Each kind keeps its filters (``feature`` exists only for KubeAI; a kind without a requested filter
drops out rather than ignoring it); the union is sorted and paginated by the database.

At 100,000 models a plain ``UNION ALL ... ORDER BY ... LIMIT 25`` sorts every row (PostgreSQL
does not push the limit into the branches), so :class:`CatalogRows` asks each kind for the keys of
its own first ``offset + 25`` rows in order (an index-only scan), merges those, reads the page's
rows by id, and counts per kind up to a bound. The filter choices walk the pool and engine indexes
(clusters.web.list_costs.distinct_values) instead of a ``SELECT DISTINCT`` over every row.
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
from clusters.web.list_costs import Count, bounded_count, distinct_values
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
TIE_BREAKERS = ("namespace", "name", "id", "page")  # with the sort key: a total order over every kind
COLUMNS = [
    "id", "kind", "page", "cluster_name", "namespace", "name", "model_name", "engine", "node_pool",
    "memory_bytes", "replicas", "ready", "sync_state", "utilization", "phase", "gpu_count", "accelerator",
]  # fmt: skip


class CatalogError(ValueError):
    """A bad catalog parameter, worded as field + value + rule."""


class CatalogRows:
    """The catalog's rows as a Paginator reads them: ``count()`` and slices, each answered per kind.

    A slice ``[start:stop]`` is read in two steps (a "deferred join"). First the page's keys: each
    kind's first ``stop`` rows in the page's order, only the sort key and the tie-breakers
    (namespace, name, kind, id), which an index on ``(key, namespace, name, id)`` answers without
    reading the table (migration models_app 0010); those are merged in one ``UNION ALL``
    and ``[start:stop]`` of the merge kept. Then the page's 25 rows, by id. Reading whole rows
    for every skipped one (the former plan) cost 600-800 ms at page 3,600 of 100,000 rows.

    Ties are broken by namespace, name, id and kind in the direction of the sort, so the order is
    total (no row repeats or goes missing between pages) and one index serves both directions.
    SQLite cannot limit a branch of a compound query; there the whole union is sorted (the
    embedded demo's size). ``count()`` is bounded (clusters.web.list_costs): ``estimated`` says
    when it is the planner's guess.
    """

    def __init__(self, parts: dict[str, QuerySet], order: list[str]) -> None:
        self.parts, self.order = parts, order
        self.estimated = False

    def count(self) -> int:
        total = sum((bounded_count(part) for part in self.parts.values()), Count(0))
        self.estimated = total.estimated
        return total.rows

    def __getitem__(self, window: slice) -> list[dict[str, Any]]:
        if not isinstance(window, slice) or window.stop is None:
            raise TypeError("the catalog is read by pages: slice it as [start:stop]")
        if window.stop <= (window.start or 0) or not self.parts:
            # nothing to read (the Paginator's [0:0] when no row matches): a QuerySet sliced to
            # nothing is empty, and a union of it returns the other, already sliced, branch
            return []
        parts = list(self.parts.values())
        if not connection.features.supports_slicing_ordering_in_compound:
            parts = [part.annotate(cluster_name=F("cluster__name")).values(*COLUMNS) for part in parts]
            if len(parts) == 1:
                return list(parts[0].order_by(*self.order)[window])
            return list(parts[0].union(*parts[1:], all=True).order_by(*self.order)[window])
        page_keys = [(row["page"], row["id"]) for row in self.keys(window.stop)[window]]
        if not page_keys:
            return []  # past the last row (an estimated count may offer a page that is not there)
        # one query whatever the kinds on the page: each kind's rows of the page by id, in a UNION ALL
        fetches = [
            part.filter(id__in=[pk for name, pk in page_keys if name == page_name])
            .annotate(cluster_name=F("cluster__name"))
            .values(*COLUMNS)
            for page_name, part in self.parts.items()
        ]
        found = fetches[0] if len(fetches) == 1 else fetches[0].union(*fetches[1:], all=True)
        rows = {(row["page"], row["id"]): row for row in found}
        return [rows[key] for key in page_keys if key in rows]

    def keys(self, stop: int) -> QuerySet:
        """The sort keys of the first ``stop`` rows of every kind, merged in the page's order."""
        key_columns = [term.lstrip("-") for term in self.order]
        # the cluster's name only where the page is sorted by it: its join keeps the keys out of the index
        joined = {"cluster_name": F("cluster__name")} if "cluster_name" in key_columns else {}
        keys = [
            part.annotate(**joined).order_by(*self.order).values(*key_columns)[:stop] for part in self.parts.values()
        ]
        return keys[0] if len(keys) == 1 else keys[0].union(*keys[1:], all=True).order_by(*self.order)


def catalog(params: Mapping[str, str], user: Any) -> CatalogRows:
    """Rows (dicts of COLUMNS) of every serving kind the user may see, filtered and sorted."""
    kinds = [params["kind"]] if params.get("kind") else list(FILTERSETS)
    unknown = [kind for kind in kinds if kind not in FILTERSETS]
    if unknown:
        raise CatalogError(f"kind: {unknown[0]!r} must be one of {', '.join(FILTERSETS)}")
    ordering = params.get("ordering") or "name"
    if ordering.lstrip("-") not in SORTABLE:
        raise CatalogError(ordering_error(ordering, list(SORTABLE)))
    parts: dict[str, QuerySet] = {}
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
        parts[model._meta.model_name] = filterset.qs.order_by().annotate(
            kind=Value(kind, output_field=CharField()),
            page=Value(model._meta.model_name, output_field=CharField()),
            utilization=utilization,
        )
    sign = "-" if ordering.startswith("-") else ""
    return CatalogRows(parts, [f"{sign}{key}" for key in (ordering.lstrip("-"), *TIE_BREAKERS)])


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
            pools.update(distinct_values(model, "node_pool", LONGEST_INDEXED_TEXT))
            engines.update(distinct_values(model, "engine"))
    return {"pools": sorted(pools - {""}), "engines": _one_spelling_each(engines - {""})}


def _one_spelling_each(engines: set[str]) -> list[str]:
    """One choice per engine whatever its case: the mixed-case spelling (vLLM) over the shouted one."""
    spellings: dict[str, str] = {}
    for engine in sorted(engines, key=lambda value: (value.isupper(), value)):
        spellings.setdefault(engine.lower(), engine)
    return sorted(spellings.values(), key=str.lower)
