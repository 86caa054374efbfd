"""Serving models as the scheduler sees them: plain records read through the kind registry.

``scheduler/`` never imports ``models_app``: every registered kind that projects the columns of
:data:`SERVING_COLUMNS` is a serving model, whatever app declares it. Each kind says in its own
``project()`` how its replicas consume memory, CPU and GPUs (the ``pods`` column of
:class:`scheduler.consumption.PodShape`), when it is idle (``last_active_at`` plus
``cooldown_seconds``) and how many replicas its cluster reports (``running_replicas``), so this
module reads narrow columns only: no spec, status or annotations are decoded here.

What a model holds has one rule, :func:`holding_rows` with :func:`running_condition`, read by
planning, admission, the usage totals and the calculator alike: its declared memory (0 when its
kind declares none, as a ModelService whose pods ask GPUs only, or a KubeAI resource profile
without memory) and its GPUs, which count whether or not memory is declared.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from itertools import chain
from typing import Any

from django.db import connections
from django.db.models import Expression, F, IntegerField, Q, QuerySet, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Collate, Length

from clusters.kinds import all_models
from clusters.models import Cluster, KubeObject, SyncState
from clusters.postgres_only import LONGEST_INDEXED_TEXT
from clusters.validation.quantities import quantity_to_int
from common.gc_tuning import collector_paused
from scheduler.consumption import PodShape, shapes_from_text
from scheduler.idle import idle_since

# "Consider reducing memory from 80Gi to 78Gi (...)": the reference's wording of status.recommendation.
_RECOMMENDATION = re.compile(r"\bto ([0-9]+(?:Ki|Mi|Gi|Ti))\b")
SERVING_COLUMNS = {"memory_bytes", "node_pool", "pods", "running_replicas", "last_active_at", "cooldown_seconds"}
_READ = ["id", "cluster_id", "namespace", "name", "node_pool", "memory_bytes", "replicas", "running_replicas",
         "gpu_count", "last_active_at", "cooldown_seconds", "model_name", "accelerator"]  # fmt: skip
RECOMMENDATION = "recommendation"
"""The one key of ``status`` a Holding reads (:func:`recommended_in_status`)."""

ModelKey = tuple[str, int, str, str]
"""(kind, cluster id, namespace, name): one model, whatever its row id."""
Restrict = Callable[[QuerySet], QuerySet]
"""Narrows a queryset to the rows a user may see (``accounts.access.restrict`` bound to a user)."""
PoolsByState = tuple[set[tuple[int, str]], set[tuple[int, str]]]
"""(cluster id, pool) pairs where a kind has running models, and where it has stopped ones."""


class Identified:
    """``key`` and ``label`` of anything naming one model (holdings, demands, proposals)."""

    __slots__ = ()  # a slotted subclass (Holding) stays without a __dict__

    kind: str
    cluster_id: int
    namespace: str
    name: str

    @property
    def key(self) -> ModelKey:
        return (self.kind, self.cluster_id, self.namespace, self.name)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Holding(Identified):
    """One serving model with what budgets and placement need, detached from the ORM.

    Frozen, as plans share a cluster's holdings between requests and threads
    (:mod:`scheduler.holdings_cache`); slotted, with its pods in a tuple shared by every model
    of the same shape, so the 12,000 a process keeps per cluster are one object each for the
    collector to walk, not three.
    """

    kind: str
    id: int
    cluster_id: int
    namespace: str
    name: str
    pool: str
    memory_bytes: int
    replicas: int
    gpu_count: int = 0
    declares_memory: bool = True
    """False where the row's memory is NULL (``memory_bytes`` then counts 0): holder lists rank
    such a model after one that declares 0 (:func:`holder_rank`)."""
    observed_peak_bytes: int | None = None
    status_recommended_bytes: int | None = None
    last_request_at: datetime | None = None
    cooldown: timedelta | None = None
    model_name: str = ""
    accelerator: str = ""
    pods: tuple[PodShape, ...] = ()

    @property
    def running(self) -> bool:
        return self.replicas > 0

    def idle_since(self, now: datetime) -> datetime | None:
        """When the running model became idle (:func:`scheduler.idle.idle_since`), else None."""
        return idle_since(self.last_request_at, self.cooldown, now) if self.running else None


def serving_models() -> list[type[KubeObject]]:
    """Registered kinds that project the serving columns (what budgets and placement read)."""
    return [model for model in all_models() if {f.name for f in model._meta.get_fields()} >= SERVING_COLUMNS]


def serving_model_for(kind: str) -> type[KubeObject] | None:
    return next((model for model in serving_models() if model.kube.kind == kind), None)


def running_condition(portal_controlled: set[int]) -> Q:
    """Rows that hold budget now, in SQL: replicas the cluster reported, else the desired ones.

    Where the portal is the kind's controller, a model runs only once it reported replicas: until
    then its admission reservation holds its memory, and counting its desired replicas too would
    make two models starting together block each other.
    """
    unreported = Q(running_replicas__isnull=True, replicas__gt=0) & ~Q(cluster_id__in=portal_controlled)
    return Q(running_replicas__gt=0) | unreported


def read_columns(model: type[KubeObject]) -> list[str]:
    """The columns :func:`load_holdings` reads of the kind's rows as they are, besides ``pods``
    (read as text) and the :data:`RECOMMENDATION` key of ``status``: everything a Holding is made
    of, and so what :mod:`scheduler.holdings_cache` watches for changes, but the last request
    (:func:`with_last_requests`)."""
    return [*_READ, *(["observed_peak_bytes"] if has_peak(model) else [])]


def has_peak(model: type[KubeObject]) -> bool:
    """Whether the kind keeps the peak memory observed of its models (``observed_peak_bytes``)."""
    return any(field.name == "observed_peak_bytes" for field in model._meta.get_fields())


def with_last_requests(holdings: list[Holding]) -> list[Holding]:
    """``holdings`` with their last request as their rows have it now (one query, every kind in it).

    A model's last request moves with every request the gateway stamps (every few seconds per
    model in use), so the holdings a process keeps (:mod:`scheduler.holdings_cache`) do not watch
    it: under traffic they would never be reused. What reads it, a plan's idle suggestions, reads
    it afresh for the models it considers.

    The rows are read by their clusters and pools, not by a list of their ids: 8,666 ids of one
    cluster made a statement of as many parameters, 140 ms to build, send and plan. Each (cluster,
    pool) is read through the (cluster, pool, memory) index (:func:`in_pool`): a cluster's rows
    and a pool's rows, intersected, were 14 ms of PostgreSQL's time for 3,000 rows, the index
    half that. A holding whose last request has not moved is returned as it is (a copy of each
    was 70 ms more).
    """
    wanted: dict[str, set[tuple[int, str]]] = {}
    for kind, cluster_id, pool in {(holding.kind, holding.cluster_id, holding.pool) for holding in holdings}:
        wanted.setdefault(kind, set()).add((cluster_id, pool))
    fresh = _last_requests(wanted)
    return [holding if (last := fresh[holding.kind].get(holding.id, holding.last_request_at)) == holding.last_request_at
            else replace(holding, last_request_at=last) for holding in holdings]  # fmt: skip


def _last_requests(wanted: dict[str, set[tuple[int, str]]]) -> dict[str, dict[int, datetime | None]]:
    """The last requests of each kind's rows in its (cluster id, pool) pairs, kind -> row id -> last
    request, in one statement: each pool's query :func:`_pool_last_requests`, all of them joined by
    UNION ALL. On PostgreSQL each pool's SQL is compiled once per process
    (:func:`_pool_last_requests_sql`: Django took 2 ms of each plan to build and compile two
    pools' queries and their union) and the rows fetched at once (Django fetched 3,000 rows a
    hundred at a time, in 30 calls); elsewhere (SQLite, ``make run``) Django's union of the
    querysets, which spells a compound SELECT as each database wants it."""
    kinds = sorted(wanted)
    fresh: dict[str, dict[int, datetime | None]] = {kind: {} for kind in kinds}
    pools = [
        (part, kind, cluster_id, pool) for part, kind in enumerate(kinds) for cluster_id, pool in sorted(wanted[kind])
    ]
    if not pools:
        return fresh
    rows: Iterable[tuple[int, int, datetime | None]]
    db = serving_model_for(kinds[0]).objects.db
    if connections[db].vendor == "postgresql":
        from psycopg import pq  # PostgreSQL's driver: imported where PostgreSQL is the database

        compiled = [_pool_last_requests_sql(*pool) for pool in pools]
        with connections[db].cursor() as cursor:
            # the rows in binary: PostgreSQL sends each timestamp as 8 bytes instead of formatting it
            # in the session's zone, psycopg reads them without parsing text (3,000 rows: ~1 ms of
            # the two processes' CPU); the same ints and UTC datetimes. This cursor is this read's own.
            cursor.cursor.format = pq.Format.BINARY
            cursor.execute(
                " UNION ALL ".join(f"({sql})" for sql, _ in compiled), [p for _, params in compiled for p in params]
            )
            rows = cursor.fetchall()
    else:
        reads = [_pool_last_requests(*pool) for pool in pools]
        rows = reads[0].union(*reads[1:], all=True)
    for part, pk, last in rows:
        fresh[kinds[part]][pk] = last
    return fresh


def _pool_last_requests(part: int, kind: str, cluster_id: int, pool: str) -> QuerySet:
    """(``part``, row id, last request) of the ``kind``'s rows in one pool."""
    rows = in_pool(serving_model_for(kind).objects.order_by(), cluster_id, pool, len(pool) <= LONGEST_INDEXED_TEXT)
    return rows.values_list(Value(part, output_field=IntegerField()), "pk", "last_active_at")


@lru_cache(maxsize=1024)
def _pool_last_requests_sql(part: int, kind: str, cluster_id: int, pool: str) -> tuple[str, tuple[Any, ...]]:
    """:func:`_pool_last_requests` compiled (SQL and parameters), kept for the pools plans come back
    to: it depends on nothing but its arguments and the code. A few hundred bytes a pool and kind."""
    return _pool_last_requests(part, kind, cluster_id, pool).query.sql_with_params()


def not_deleted_sql(alias: str) -> str:
    """:func:`holding_rows`' rule in SQL over ``alias``: rows deleted in the cluster hold nothing."""
    return f"{alias}.sync_state <> '{SyncState.DELETED_IN_CLUSTER.value}'"


def holding_rows(model: type[KubeObject], cluster_id: int | None, pools: list[str] | None,
                 restrict: Restrict | None) -> QuerySet:  # fmt: skip
    """The kind's rows that hold or could hold budget (all but those deleted in the cluster), narrowed.

    Declared memory is not required: a model that declares none still holds its GPUs and CPU.
    """
    rows = model.objects.exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
    if cluster_id is not None:
        rows = rows.filter(cluster_id=cluster_id)
    if pools is not None:
        rows = rows.filter(node_pool__in=pools)
    return restrict(rows) if restrict is not None else rows


def controlled_pairs(clusters: Iterable[tuple[int, list[str] | None]] | None = None) -> set[tuple[int, str]]:
    """(cluster id, kind) for every kind the portal controls in a cluster (its ``managed_kinds``):
    read from the clusters (few), or from the (id, managed kinds) pairs a caller already has."""
    rows = Cluster.objects.order_by().values_list("pk", "managed_kinds") if clusters is None else clusters
    return {(pk, kind) for pk, kinds in rows for kind in kinds or []}


def load_holdings(
    cluster_id: int | None = None,
    pools: list[str] | None = None,
    running_only: bool = False,
    restrict: Restrict | None = None,
    per_pool: int | None = None,
    pools_of_kind: dict[str, PoolsByState] | None = None,
) -> list[Holding]:
    """Serving models, optionally of one cluster, some pools, visible rows only.

    Rows deleted in the cluster hold nothing. ``memory_bytes`` is the model's whole declared
    footprint as its kind projects it (InferenceModel: one replica, at most one by the CRD;
    ModelService: every role's replicas; 0 when it declares none), so a running model holds
    exactly that, and its ``gpu_count`` GPUs whatever its memory. Visibility and
    "running" are filtered in SQL, and only the columns a Holding needs are read. ``per_pool``
    keeps the biggest that many per pool and state (running, stopped), ranked in SQL, for pages
    that list holders but must not read 100,000 rows to show ten; ``pools_of_kind`` (kind ->
    its (cluster id, pool) pairs among those rows, running and stopped), when the caller knows
    them, spares the scan that would find them and the search of a pool for a state it lacks.
    """
    holdings: list[Holding] = []
    controlled = controlled_pairs()  # once for every kind
    for model in serving_models():
        portal_controlled = {pk for pk, kind in controlled if kind == model.kube.kind}
        rows = holding_rows(model, cluster_id, pools, restrict)
        running = running_condition(portal_controlled)
        if running_only:
            rows = rows.filter(running)
        extra = {"recommendation": KeyTextTransform(RECOMMENDATION, "status"), "pods_text": Cast("pods", TextField())}
        found = rows.values(*read_columns(model), **extra)
        if per_pool is not None:
            pairs = pools_of_kind.get(model.kube.kind, ({}, {})) if pools_of_kind is not None else None
            found = biggest_per_pool(found, running, per_pool, pairs)
        with collector_paused():
            for values in found:
                holding = holding_from_values(model.kube.kind, values, values["cluster_id"] in portal_controlled)
                if holding.running or not running_only:
                    holdings.append(holding)
    return holdings


def _holder_order(vendor: str) -> list[Expression]:
    """:func:`holder_rank` in SQL, the names in code point order whatever the database's collation
    (PostgreSQL's ``C``; SQLite's default, ``BINARY``, compares UTF-8 bytes: the same order)."""
    names = [Collate(F(name), "C") if vendor == "postgresql" else F(name) for name in ("namespace", "name")]
    return [F("memory_bytes").desc(nulls_last=True), *names]


def holder_rank(holding: Holding) -> tuple[bool, int, str, str]:
    """Where a model comes in its pool's holder list: biggest declared memory first, a model that
    declares none (NULL) last, then by namespace and name in code point order, as
    :func:`biggest_per_pool` ranks the rows in SQL (:func:`_holder_order`), so the holders a page
    lists are the same whether they come from SQL or from kept holdings
    (:meth:`scheduler.holdings_cache.ClusterHoldings.biggest_running`)."""
    return (not holding.declares_memory, -holding.memory_bytes, holding.namespace, holding.name)


def biggest_per_pool(
    rows: QuerySet, running: Q, count: int, pairs: PoolsByState | None = None
) -> Iterable[dict[str, Any]]:
    """The ``count`` biggest running and stopped rows of each pool, each pool's list read by an
    ``ORDER BY memory_bytes DESC NULLS LAST LIMIT count`` that walks its (cluster, pool, memory)
    index and stops early, where ranking every row with a window function sorted all 100,000 of
    them. The rows are ranked as :func:`holder_rank` ranks holdings (no memory declared last, ties
    by namespace and name). ``pairs`` are the (cluster
    id, pool) pairs of ``rows`` that have running and stopped models (from the kept totals),
    found here (a scan of the table, both states) unless given: a pool searched for a state it
    has none of walks all of its index for nothing (10,000 running models read to find no
    stopped one).

    On PostgreSQL the pools are one array parameter joined ``LATERAL`` to that one per-pool query
    (:func:`_lateral_per_pool`): a UNION of one query per pool made Django build and PostgreSQL
    plan 140 subqueries for 70 pools, half the planning page's time. Elsewhere (SQLite, ``make
    run``) each pool is its own query.
    """
    if pairs is None:
        every = set(rows.order_by().values_list("cluster_id", "node_pool").distinct())
        pairs = (every, every)
    states = [(running, sorted(pairs[0])), (~running, sorted(pairs[1]))]
    vendor = connections[rows.db].vendor
    ordered = rows.order_by(*_holder_order(vendor))
    if vendor == "postgresql":
        return _lateral_per_pool(ordered, count, states)
    return chain.from_iterable(
        in_pool(ordered, cluster_id, pool, len(pool) <= LONGEST_INDEXED_TEXT).filter(state)[:count]
        for state, state_pairs in states
        for cluster_id, pool in state_pairs
    )


def _lateral_per_pool(
    ordered: QuerySet, count: int, states: list[tuple[Q, list[tuple[int, str]]]]
) -> Iterator[dict[str, Any]]:
    """``ordered[:count]`` of each pool and state, as one statement: the pools are two arrays
    unnested into ``pair`` and each state's per-pool query is compiled once, naming
    ``pair.cluster_id`` and ``pair.pool``. Pools with names too long for the partial index (rare)
    get their own query, which does not repeat its predicate."""
    statements: list[str] = []
    params: list[Any] = []
    for indexed in (True, False):
        groups = [(state, [pair for pair in pairs if (len(pair[1]) <= LONGEST_INDEXED_TEXT) == indexed])
                  for state, pairs in states]  # fmt: skip
        groups = [(state, group) for state, group in groups if group]
        if not groups:
            continue  # (the query is not even built: compiling one is a millisecond)
        per_pool = in_pool(ordered, RawSQL("pair.cluster_id", ()), RawSQL("pair.pool", ()), indexed)
        for state, group in groups:
            sql, state_params = per_pool.filter(state)[:count].query.sql_with_params()
            statements.append(
                "SELECT chosen.* FROM unnest(%s::bigint[], %s::text[]) AS pair(cluster_id, pool)"
                f" CROSS JOIN LATERAL ({sql}) AS chosen"
            )
            params += [[cluster_id for cluster_id, _ in group], [pool for _, pool in group], *state_params]
    if not statements:
        return
    query = ordered.query
    names = [*query.extra_select, *query.values_select, *query.annotation_select]
    with connections[ordered.db].cursor() as cursor:
        cursor.execute(" UNION ALL ".join(statements), params)
        for row in cursor.fetchall():
            yield dict(zip(names, row, strict=True))


def in_pool(rows: QuerySet, cluster_id: int | Expression, pool: str | Expression, indexed: bool) -> QuerySet:
    """``rows`` of one pool, spelled so PostgreSQL can use the (cluster, pool, memory) index.

    That B-tree is partial (``node_pool`` may be longer than a B-tree entry allows; see
    :func:`clusters.postgres_only.pool_memory_index`) and PostgreSQL uses a partial index only when
    the query repeats its predicate: for a pool name within the bound (``indexed``), saying so
    changes no result. A longer name is found through the column's hash index instead.
    """
    rows = rows.filter(cluster_id=cluster_id, node_pool=pool)
    if indexed:
        rows = rows.alias(pool_length=Length("node_pool")).filter(pool_length__lte=LONGEST_INDEXED_TEXT)
    return rows


def recommended_in_status(recommendation: str | None) -> int | None:
    """The target of the cluster's own ``status.recommendation`` ("... from 80Gi to 78Gi ...")."""
    match = _RECOMMENDATION.search(recommendation or "")
    return quantity_to_int(match.group(1)) if match else None


def holding_from_values(kind: str, values: dict[str, Any], portal_controlled: bool = False) -> Holding:
    reported = values["running_replicas"]
    running = reported if reported is not None else (0 if portal_controlled else values["replicas"] or 0)
    cooldown = values["cooldown_seconds"]
    pods = shapes_from_text(values["pods_text"])
    if reported is None and portal_controlled:
        pods = tuple(replace(pod, running=0) for pod in pods)
    return Holding(
        kind=kind,
        id=values["id"],
        cluster_id=values["cluster_id"],
        namespace=values["namespace"],
        name=values["name"],
        pool=values["node_pool"],
        memory_bytes=values["memory_bytes"] or 0,
        replicas=running,
        gpu_count=values["gpu_count"] or 0,
        declares_memory=values["memory_bytes"] is not None,
        observed_peak_bytes=values.get("observed_peak_bytes"),
        status_recommended_bytes=recommended_in_status(values.get("recommendation")),
        last_request_at=values["last_active_at"],
        cooldown=timedelta(seconds=cooldown) if cooldown is not None else None,
        model_name=values.get("model_name") or "",
        accelerator=values.get("accelerator") or "",
        pods=pods,
    )


def dependencies_of(cluster_id: int, namespaces: set[str]) -> dict[tuple[str, str], list[str]]:
    """``spec.dependencies`` of the serving models in some namespaces, by (namespace, name).

    Only the planner's dependency closure needs them, for the namespaces of its proposals: one
    JSON key read in SQL for those rows, not every spec of the cluster.
    """
    result: dict[tuple[str, str], list[str]] = {}
    for model in serving_models():
        rows = model.objects.filter(cluster_id=cluster_id, namespace__in=namespaces).exclude(
            sync_state=SyncState.DELETED_IN_CLUSTER
        )
        for namespace, name, dependencies in rows.values_list("namespace", "name", "spec__dependencies"):
            if isinstance(dependencies, list):
                result[(namespace, name)] = [d for d in dependencies if isinstance(d, str)]
    return result
