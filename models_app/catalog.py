"""The model catalog across serving kinds: each kind's own FilterSet, one restriction, one SQL UNION.

Each kind keeps its filters (``feature`` exists only for KubeAI; a kind without a requested filter
drops out rather than ignoring it); the union is sorted and paged by the database, from a cursor.

At 100,000 models a plain ``UNION ALL ... ORDER BY ... LIMIT 25`` sorts every row (PostgreSQL
does not push the limit into the branches), so :class:`CatalogRows` asks each kind for the keys of
its own next 26 rows past the cursor in order (an index-only scan), merges those, reads the page's
rows by id, and counts per kind up to a bound. The filter choices walk the pool and engine indexes
(clusters.web.list_costs.distinct_values_of, in one query) instead of a ``SELECT DISTINCT`` over
every row.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import (
    BigIntegerField,
    CharField,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    PositiveSmallIntegerField,
    Q,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.fields.tuple_lookups import (
    Tuple,
    TupleGreaterThan,
    TupleGreaterThanOrEqual,
    TupleLessThan,
    TupleLessThanOrEqual,
)
from django.db.models.functions import Cast, Length

from accounts.public import VIEW, is_unrestricted, restrict
from clusters.models import Cluster
from clusters.postgres_only import LONGEST_INDEXED_TEXT
from clusters.web.api.ordering import ordering_error
from clusters.web.list_costs import bounded_total, distinct_values_of
from models_app.filtersets import InferenceModelFilterSet, KubeAIModelFilterSet, ModelServiceFilterSet
from models_app.models import InferenceModel, KubeAIModel, ModelService, UtilizationSortKey
from scheduler.public import rows_by_sync_state

FILTERSETS = {
    "InferenceModel": (InferenceModel, InferenceModelFilterSet),
    "Model": (KubeAIModel, KubeAIModelFilterSet),
    "ModelService": (ModelService, ModelServiceFilterSet),
}
SORTABLE = (
    "name", "kind", "cluster_name", "namespace", "node_pool", "engine", "ready", "phase", "running_replicas",
    "replicas", "memory_bytes", "gpu_count", "accelerator", "utilization", "sync_state",
)  # fmt: skip
# The columns shown, each sorted by its key: 11 fit a 1400 px window without scrolling, so the
# kind sits under the name, cluster with namespace, phase with readiness and the accelerator
# with the GPU count (each still sortable by its own key through ``?ordering=``). "Replicas" is what
# runs, as the cluster reports it (0 at zero), sorted by it; the spec's count (``replicas``: the
# maximum of an InferenceModel) is shown under it as such.
COLUMN_LABELS = [
    ("name", "Name"), ("namespace", "Cluster · namespace"), ("node_pool", "Pool"), ("engine", "Engine"),
    ("ready", "Ready · phase"), ("running_replicas", "Replicas"), ("memory_bytes", "Memory"), ("gpu_count", "GPUs"),
    ("utilization", "Utilization"), ("sync_state", "Sync state"),
]  # fmt: skip
TIE_BREAKERS = ("namespace", "name", "id", "page")  # with the sort key: a total order over every kind
COLUMNS = [
    "id", "kind", "page", "cluster_name", "namespace", "name", "model_name", "engine", "node_pool",
    "memory_bytes", "replicas", "running_replicas", "ready", "sync_state", "utilization", "phase", "gpu_count",
    "accelerator",
]  # fmt: skip


class CatalogError(ValueError):
    """A bad catalog parameter, worded as field + value + rule."""


class Cursor(NamedTuple):
    """A position in one order of the catalog: the row a page starts after (or ends ``before``), by
    its sort key and tie-breakers; ``None`` values with ``last``: the end of the list."""

    ordering: str
    before: bool
    key: tuple[Any, str, str, int, str] | None  # (sort key, namespace, name, id, page)

    @property
    def last(self) -> bool:
        return self.key is None


class CatalogPage(NamedTuple):
    rows: list[dict[str, Any]]
    next: str | None  # the cursor of the page after this one, None on the last
    previous: str | None


LAST = "last"
PAGE_NAMES = {model._meta.model_name for model, _ in FILTERSETS.values()}
KIND_OF_PAGE = {model._meta.model_name: kind for kind, (model, _) in FILTERSETS.items()}
INTEGER_KEYS = {  # -> may be null
    "replicas": True, "running_replicas": True, "memory_bytes": True, "gpu_count": False, "utilization": True,
}  # fmt: skip


def cursor_token(ordering: str, row: Mapping[str, Any], before: bool = False) -> str:
    """The ``cursor`` parameter of the page after ``row`` (or before it) in ``ordering``."""
    key = ordering.lstrip("-")
    position = [ordering, "b" if before else "a", row[key], row["namespace"], row["name"], row["id"], row["page"]]
    return base64.urlsafe_b64encode(json.dumps(position, separators=(",", ":")).encode()).decode().rstrip("=")


def parse_cursor(token: str, ordering: str) -> Cursor:
    """The position a ``cursor`` parameter names in ``ordering``; CatalogError when it is not one
    this catalog gave for that order."""
    if token == LAST:
        return Cursor(ordering, True, None)
    wrong = CatalogError(
        f"cursor: {token[:40]!r} is not a position in this list (follow the page's links; they "
        f"carry the cursor of the same order, {ordering!r})"
    )
    try:
        position = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):
        raise wrong from None
    if not (isinstance(position, list) and len(position) == 7 and position[0] == ordering
            and position[1] in ("a", "b")):  # fmt: skip
        raise wrong
    _, direction, key, namespace, name, pk, page = position
    column = ordering.lstrip("-")
    if column in INTEGER_KEYS:
        fits = (key is None and INTEGER_KEYS[column]) or (type(key) is int and 0 <= key < 2**63)
    else:
        fits = isinstance(key, bool) if column == "ready" else _text(key)
    if not (fits and _text(namespace) and _text(name) and type(pk) is int and 0 < pk < 2**63 and page in PAGE_NAMES):
        raise wrong
    return Cursor(ordering, direction == "b", (key, namespace, name, pk, page))


def _text(value: Any) -> bool:
    """A string PostgreSQL can compare (a NUL character is refused by it, as an error)."""
    return isinstance(value, str) and "\x00" not in value


class CatalogRows:
    """The catalog's rows, read a page at a time from a position (keyset paging).

    A page is read in two steps (a "deferred join"). First its keys: each kind's next ``size + 1``
    rows past the cursor in the page's order, only the sort key and the tie-breakers (namespace,
    name, id, kind), which an index on ``(key, namespace, name, id)`` answers from where the
    cursor points without reading the table (migrations models_app 0010 and 0012; utilization's
    from its narrow table, :meth:`_keys_of`; the pool's in two parts, :meth:`_by_index`); those
    are merged in one ``UNION ALL``. Then the page's rows, by id. A page costs the same at any depth: an offset
    (``?page=3600``) stepped over 90,000 index entries per kind first (100-200 ms at 100,000 rows).

    Ties are broken by namespace, name, id and kind in the direction of the sort, so the order is
    total (no row repeats or goes missing between pages) and one index serves both directions.
    Null keys (memory, replicas, running replicas, utilization) sort as the database sorts them (PostgreSQL: last
    going up, first going down; SQLite the other way), and the cursor's test follows
    (``nulls_order_largest``). ``count()`` is read from the kept totals when nothing narrows the
    rows, else bounded (clusters.web.list_costs): ``estimated`` says when it is the planner's guess.
    """

    def __init__(self, parts: dict[str, QuerySet], ordering: str, restricted: bool = False) -> None:
        self.parts, self.ordering, self.restricted = parts, ordering, restricted
        self.estimated = False

    def count(self) -> int:
        kept = self._kept_count()
        if kept is not None:
            return kept
        total = bounded_total(list(self.parts.values()))
        self.estimated = total.estimated
        return total.rows

    def _kept_count(self) -> int | None:
        """The rows of every kind from the totals PostgreSQL keeps (scheduler's
        ``rows_by_sync_state``, one statement for every kind), exact, when no part is narrowed (no
        filter, a user who sees every namespace); None otherwise. Else above ``COUNT_BOUND`` rows
        the count was an estimate."""
        if any(part.query.where for part in self.parts.values()):
            return None
        kept = rows_by_sync_state([part.model for part in self.parts.values()])
        if len(kept) < len(self.parts):
            return None
        return sum(sum(by_state.values()) for by_state in kept.values())

    def page(self, cursor: Cursor | None, size: int) -> CatalogPage:
        """The ``size`` rows from ``cursor`` (the first page when None) and the cursors around them."""
        backwards = cursor is not None and cursor.before
        found = self._read(cursor, size + 1, backwards)
        more, rows = len(found) > size, found[:size]
        if backwards:
            rows.reverse()
        after = cursor_token(self.ordering, rows[-1]) if rows else None
        before = cursor_token(self.ordering, rows[0], before=True) if rows else None
        if backwards:  # a page before a position (or the last page): what follows it is there
            return CatalogPage(rows, after if cursor.key is not None else None, before if more else None)
        return CatalogPage(rows, after if more else None, before if cursor is not None else None)

    def _read(self, cursor: Cursor | None, limit: int, backwards: bool) -> list[dict[str, Any]]:
        """Up to ``limit`` rows past ``cursor`` in the page's order (reversed when ``backwards``)."""
        descending = self.ordering.startswith("-") != backwards
        order = [f"{'-' if descending else ''}{key}" for key in (self.ordering.lstrip("-"), *TIE_BREAKERS)]
        parts = {name: part for name, part in self.parts.items() if not self._all_before(name, cursor, descending)}
        if not parts:
            return []
        if not connection.features.supports_slicing_ordering_in_compound:
            named = {name: part.annotate(cluster_name=F("cluster__name")) for name, part in parts.items()}
            rows = [piece.values(*COLUMNS) for name, part in named.items()
                    for piece in self._past(part, name, cursor, descending)]  # fmt: skip
            merged = rows[0] if len(rows) == 1 else rows[0].union(*rows[1:], all=True)
            return list(merged.order_by(*order)[:limit])
        if self.ordering.lstrip("-") == "cluster_name":
            page_keys = self._keys_by_cluster(parts, cursor, limit, descending)
        else:
            key_columns = [term.lstrip("-") for term in order]
            pieces = [
                piece
                for name, part in parts.items()
                for whole in self._past(self._keys_of(part, name), name, cursor, descending)
                for piece in self._by_index(whole)
            ]
            keys = [piece.order_by(*self._sorted_by(order)).values(*key_columns)[:limit] for piece in pieces]
            merged = keys[0] if len(keys) == 1 else keys[0].union(*keys[1:], all=True).order_by(*order)
            page_keys = [(row["page"], row["id"]) for row in merged[:limit]]
        if not page_keys:
            return []
        # one query whatever the kinds on the page: each kind's rows of the page by id, in a UNION ALL
        fetches = [
            part.filter(id__in=[pk for name, pk in page_keys if name == page_name])
            .annotate(cluster_name=F("cluster__name"))
            .values(*COLUMNS)
            for page_name, part in parts.items()
        ]
        found = fetches[0] if len(fetches) == 1 else fetches[0].union(*fetches[1:], all=True)
        by_key = {(row["page"], row["id"]): row for row in found}
        return [by_key[key] for key in page_keys if key in by_key]

    def _sorted_by(self, order: list[str]) -> list[Any]:
        """The keys' ORDER BY: ``order``, or, for a user who sees some namespaces only, the same
        order with its sort key as an expression no index matches. PostgreSQL otherwise walks the
        sort key's index and filters each entry by the user's (cluster, namespace) pairs, guessing
        their rows spread evenly along it: a team's ten namespaces sort together, so a descending
        page stepped over 89,000 other teams' entries first (0.7-0.8 s of PostgreSQL at 100,000
        rows, issue 41). With the key hidden it reads the user's rows by the (cluster, namespace,
        name) index and sorts those: a few ms for a team's thousand rows. Same order, nulls
        included (``+ 0``, ``|| ''`` and the boolean's integer keep them null and in place)."""
        if not self.restricted or connection.vendor != "postgresql":
            return list(order)
        first, *rest = order
        column = first.lstrip("-")
        if column in INTEGER_KEYS:
            hidden = ExpressionWrapper(F(column) + 0, output_field=BigIntegerField())
        elif column == "ready":
            hidden = Cast(F(column), output_field=IntegerField())
        else:
            hidden = Func(F(column), template="(%(expressions)s || '')", output_field=TextField())
        return [hidden.desc() if first.startswith("-") else hidden.asc(), *rest]

    def _keys_of(self, part: QuerySet, page_name: str) -> QuerySet:
        """Where one kind's sort keys are read from: its own table, or, sorted by an
        InferenceModel's utilization on PostgreSQL, the narrow table of those keys that triggers
        keep beside it (models_app.models.UtilizationSortKey), narrowed to ``part``'s rows when the
        catalog is filtered (or the user sees some namespaces only)."""
        utilization = self.ordering.lstrip("-") == "utilization" and page_name == InferenceModel._meta.model_name
        if not utilization or connection.vendor != "postgresql" or self.restricted:
            return part  # a team's rows are read by namespace and sorted (:meth:`_sorted_by`), not walked
        return UtilizationSortKey.of(part).annotate(id=F("model_id"), page=Value(page_name, output_field=CharField()))

    def _by_index(self, piece: QuerySet) -> list[QuerySet]:
        """``piece`` in parts that each read one index in order: sorted by pool on PostgreSQL, the
        pools a B-tree entry can hold (the ``length(node_pool) <= 600`` partial index, models_app
        migration 0012) and, apart, the rare longer ones (their own partial index finds them)."""
        if self.ordering.lstrip("-") != "node_pool" or connection.vendor != "postgresql":
            return [piece]
        measured = piece.alias(pool_length=Length("node_pool"))
        return [
            measured.filter(pool_length__lte=LONGEST_INDEXED_TEXT),
            measured.filter(pool_length__gt=LONGEST_INDEXED_TEXT),
        ]

    def _keys_by_cluster(
        self, parts: dict[str, QuerySet], cursor: Cursor | None, limit: int, descending: bool
    ) -> list[tuple[str, int]]:
        """The (page, id) keys of the next ``limit`` rows in cluster-name order, walking the clusters
        by name and each one's rows by its (cluster, namespace, name) index: sorting by a joined
        table's column read and sorted every row (300-600 ms at 100,000 rows), and clusters are few."""
        clusters = list(Cluster.objects.order_by("-name" if descending else "name").values_list("pk", "name"))
        at = cursor.key[0] if cursor is not None and cursor.key is not None else None
        if at is not None:
            clusters = [(pk, name) for pk, name in clusters if (name <= at if descending else name >= at)]
        tail = ["-namespace", "-name", "-id"] if descending else ["namespace", "name", "id"]
        found: list[tuple[tuple[Any, ...], tuple[str, int]]] = []  # (the row's sort key, its page key)
        for page_name, part in parts.items():
            taken = 0
            for cluster_id, cluster_name in clusters:
                rows = part.filter(cluster_id=cluster_id)
                if cluster_name == at:
                    rows = rows.filter(self._beyond(page_name, cursor, descending, ("namespace", "name", "id")))
                keys = rows.order_by(*tail).values_list("namespace", "name", "id")[: limit - taken]
                found += [((cluster_name, *key, page_name), (page_name, key[2])) for key in keys]
                taken += len(keys)
                if taken >= limit:
                    break
        found.sort(key=lambda entry: entry[0], reverse=descending)
        return [key for _, key in found[:limit]]

    def _all_before(self, page_name: str, cursor: Cursor | None, descending: bool) -> bool:
        """Sorted by kind (a constant in each kind's table), whether every row of this kind is before
        the cursor: its kind sorts before the cursor's."""
        if cursor is None or cursor.key is None or self.ordering.lstrip("-") != "kind":
            return False
        kind = KIND_OF_PAGE[page_name]
        return kind > cursor.key[0] if descending else kind < cursor.key[0]

    def _past(self, part: QuerySet, page_name: str, cursor: Cursor | None, descending: bool) -> list[QuerySet]:
        """The rows of one kind (``part``, annotated with the sort key) strictly past ``cursor`` in the
        order read (descending or not), in pieces that each read one range of an index: the rows
        with a key, and those without one where nulls sort past the cursor (an ``OR`` of the two
        made PostgreSQL read the index from its start)."""
        if cursor is None or cursor.key is None:
            return [part]
        column = self.ordering.lstrip("-")
        if column == "kind":  # a constant per kind: past the cursor's kind all are (_all_before), at it by the rest
            if KIND_OF_PAGE[page_name] != cursor.key[0]:
                return [part]
            return [part.filter(self._beyond(page_name, cursor, descending, ("namespace", "name", "id")))]
        nulls_after = descending != connection.features.nulls_order_largest  # where null keys sort
        is_null = Q(**{f"{column}__isnull": True})
        if cursor.key[0] is None:
            past_nulls = part.filter(is_null & self._beyond(page_name, cursor, descending, ("namespace", "name", "id")))
            return [past_nulls] if nulls_after else [past_nulls, part.filter(~is_null)]
        # (key, namespace, name, id) past the cursor's: one row comparison, an index range
        past = part.filter(self._beyond(page_name, cursor, descending, (column, "namespace", "name", "id")))
        return [past, part.filter(is_null)] if nulls_after and INTEGER_KEYS.get(column) else [past]

    @staticmethod
    def _beyond(page_name: str, cursor: Cursor, descending: bool, columns: tuple[str, ...]) -> Q:
        """``columns`` past the cursor's values for them (its last ``len(columns)`` key values but the
        kind) in the order read; an equal tuple is past when this kind sorts after the cursor's (the
        kind is the last tie-breaker)."""
        values, cursor_page = cursor.key[-1 - len(columns) : -1], cursor.key[-1]
        kind_past = page_name < cursor_page if descending else page_name > cursor_page
        if descending:
            comparison = TupleLessThanOrEqual if kind_past else TupleLessThan
        else:
            comparison = TupleGreaterThanOrEqual if kind_past else TupleGreaterThan
        return Q(comparison(Tuple(*(F(column) for column in columns)), values))


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
        rows = restrict(model.objects.all(), user, VIEW)
        if given:  # else the FilterSet is the identity, and building one cost about 1 ms a kind
            filterset = filterset_class(params, queryset=rows)
            if not filterset.is_valid():
                field, errors = next(iter(filterset.errors.items()))
                raise CatalogError(f"{field}: {params.get(field)!r} {errors[0]}")
            rows = filterset.qs
        # a typed NULL: PostgreSQL refuses a UNION of smallint and an untyped (text) NULL
        no_utilization = Cast(Value(None), output_field=PositiveSmallIntegerField())
        utilization = F("utilization_percent") if model is InferenceModel else no_utilization
        parts[model._meta.model_name] = rows.order_by().annotate(
            kind=Value(kind, output_field=CharField()),
            page=Value(model._meta.model_name, output_field=CharField()),
            utilization=utilization,
        )
    return CatalogRows(parts, ordering, restricted=not is_unrestricted(user))


def filter_choices(user: Any) -> dict[str, list[str]]:
    """Values offered in the catalog's selects: the pools and engines of models the user can see.

    Engines are matched case-insensitively (``engine`` filters with ``iexact``), so ``VLLM`` and
    ``vLLM`` are one choice, shown in its mixed-case spelling where one exists; stored values stay
    as written.
    """
    pools: set[str] = set()
    engines: set[str] = set()
    walked: list[tuple[type, str, int | None]] = []
    for model, _ in FILTERSETS.values():
        rows = restrict(model.objects.order_by(), user, VIEW)  # no ordering columns in the DISTINCT
        if rows.query.where or connection.vendor != "postgresql":
            # some namespaces only: the user's rows, found by the (cluster, namespace, name) index
            for pool, engine in rows.values_list("node_pool", "engine").distinct():
                pools.add(pool)
                engines.add(engine)
        else:
            walked += [(model, "node_pool", LONGEST_INDEXED_TEXT), (model, "engine", None)]
    for (_, column, _), values in zip(walked, distinct_values_of(walked) if walked else [], strict=True):
        (pools if column == "node_pool" else engines).update(values)
    return {"pools": sorted(pools - {""}), "engines": _one_spelling_each(engines - {""})}


def _one_spelling_each(engines: set[str]) -> list[str]:
    """One choice per engine whatever its case: the mixed-case spelling (vLLM) over the shouted one."""
    spellings: dict[str, str] = {}
    for engine in sorted(engines, key=lambda value: (value.isupper(), value)):
        spellings.setdefault(engine.lower(), engine)
    return sorted(spellings.values(), key=str.lower)
