"""A cluster's holdings kept per process between plans, reused only while PostgreSQL says that
nothing they are made of changed.

**Why.** Every what-if plan starts from every serving model of its cluster
(:func:`scheduler.holdings.load_holdings`): at 12,000 models a cluster, reading them through the
ORM into Holdings was ~150 ms of each plan's CPU, half of it, for rows that change far less
often than people plan.

**The generation.** ``scheduler_holdingsgeneration`` holds a value per cluster, moved to a fresh
value of a sequence by statement-level AFTER triggers with transition tables on every serving
kind's table (INSERT, UPDATE, DELETE, and TRUNCATE, which moves every cluster's): every write
path counts, whoever writes (the portal's saves, the watcher, the bulk resync's COPY and
``UPDATE ... FROM``, a cluster's cascade delete), as for :mod:`scheduler.pool_totals`, whose
triggers sit beside these. A statement moves the generation of the clusters whose rows, as
``load_holdings`` reads them (:func:`scheduler.holdings.read_columns`, ``pods``, ``status``'s
recommendation; rows deleted in the cluster left out), differ before and after it: a status
report that changes only utilization or conditions writes nothing, so the watcher's common
update costs one comparison of its transition tables. The last request is not watched: the
gateway stamps it every few seconds on each model in use, so watching it would move a busy
cluster's generation several times a second and no plan would reuse anything. Kept holdings
carry the last request as they were read; a plan's idle suggestions read it afresh
(:func:`scheduler.holdings.with_last_requests`). The row of a cluster a statement moves
stays locked until the writer commits: writers of one cluster's models wait for each other there,
as they already do on the pool totals' rows.

A value comes from a sequence, so none is ever seen twice, even after a rollback: holdings kept
under a value are those of exactly one state of the rows. A cluster without a row (no write
since :func:`install`, which gives every cluster one, or the table emptied) is never cached.

**Use.** A plan reads its cluster's generation and managed kinds (one query: the managed kinds
decide whether a model with no reported replicas runs) and reuses the holdings kept under the
same pair. After a load the pair is read again, and the holdings are kept only when it did not
move meanwhile, so they are never a mix of two states. The pair is also the holdings' version
(:class:`ClusterHoldings`): a plan's paging cursors carry it, so the plan's own "has anything
changed" costs no walk of the 12,000 holdings. Holdings are rows, not anything
computed from now: idleness is worked out from ``last_request_at`` and ``cooldown`` by each plan.
They are shared between requests and threads, so they are frozen, in a tuple. At most
:data:`scheduler.per_cluster.KEPT_CLUSTERS` clusters are kept per process, the least recently
planned dropped first.

Elsewhere than PostgreSQL (SQLite, the embedded ``make run`` demo) there is no generation: each
plan reads the rows, and their version is a digest of what was read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import Any, NamedTuple, TypeVar

from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from clusters.models import Cluster, KubeObject
from clusters.postgres_only import statement_triggers
from scheduler.holdings import (
    RECOMMENDATION,
    Holding,
    holder_rank,
    load_holdings,
    not_deleted_sql,
    read_columns,
    serving_models,
)
from scheduler.models import HoldingsGeneration
from scheduler.per_cluster import PerCluster

T = TypeVar("T")

TABLE = HoldingsGeneration._meta.db_table
SEQUENCE = "scheduler_holdings_generation_seq"  # created by migration 0007


class _Key(NamedTuple):
    """What cached holdings depend on besides the code: the rows' generation, the managed kinds."""

    generation: int | None
    managed_kinds: tuple[str, ...]

    @property
    def version(self) -> str:
        return f"generation {self.generation}, managed {' '.join(self.managed_kinds)}"


@dataclass(frozen=True)
class ClusterHoldings:
    """A cluster's holdings and their version: equal versions, equal holdings but for their last
    requests (which no generation watches). The version is the generation and managed kinds they
    were read under, else (no generation, or it moved during the read) a digest of the holdings.

    The running ones, all and by pool, and their pods, are worked out once for every plan that
    reuses them (each plan picked them out of the 12,000 again, and built a pool's pods anew for
    its suggestions)."""

    holdings: tuple[Holding, ...]
    version: str

    @cached_property
    def running(self) -> tuple[Holding, ...]:
        return tuple(holding for holding in self.holdings if holding.running)

    @cached_property
    def by_namespace(self) -> dict[tuple[int, str], tuple[Holding, ...]]:
        """Every holding by (cluster id, namespace): a team member's figures ask who may see each
        namespace once, not each of the 12,000 holdings."""
        found: dict[tuple[int, str], list[Holding]] = {}
        for holding in self.holdings:
            found.setdefault((holding.cluster_id, holding.namespace), []).append(holding)
        return {key: tuple(holdings) for key, holdings in found.items()}

    @cached_property
    def running_names(self) -> frozenset[str]:
        return frozenset(holding.name for holding in self.running)

    @cached_property
    def running_by_pool(self) -> dict[str, tuple[Holding, ...]]:
        by_pool: dict[str, list[Holding]] = {}
        for holding in self.running:
            by_pool.setdefault(holding.pool, []).append(holding)
        return {pool: tuple(holdings) for pool, holdings in by_pool.items()}

    @cached_property
    def running_ranked(self) -> dict[tuple[str, str], tuple[Holding, ...]]:
        """Each (pool, kind)'s running models, ranked as holder lists rank them (:func:`holder_rank`)."""
        ranked: dict[tuple[str, str], list[Holding]] = {}
        for holding in sorted(self.running, key=holder_rank):
            ranked.setdefault((holding.pool, holding.kind), []).append(holding)
        return {key: tuple(holdings) for key, holdings in ranked.items()}

    def biggest_running(self, per_pool: int | None,
                        visible: Callable[[int, str], bool] | None = None) -> Iterator[Holding]:
        """The ``per_pool`` biggest running models of each pool and kind (None: all), the same
        holders as ``load_holdings(cluster, running_only=True, per_pool=per_pool)`` reads in SQL;
        with ``visible`` (a team member's ``(cluster_id, namespace)`` predicate), the biggest of
        those it leaves, as ``load_holdings`` reads them under the member's restriction."""
        for holdings in self.running_ranked.values():
            if visible is not None:
                holdings = tuple(islice((h for h in holdings if visible(h.cluster_id, h.namespace)), per_pool))
            yield from holdings[:per_pool]

    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What a concern works out of these holdings once for every plan that reuses them (the running
    pods as placement items: :func:`scheduler.planning.inputs.running_pods`), kept here so it goes
    when they do. Filled through :meth:`derive`: the shared records never import the concerns
    above them (docs/architecture.md)."""

    def derive(self, name: str, build: Callable[[ClusterHoldings], T]) -> T:
        """``build(self)``, worked out on the first call for ``name`` and kept with the holdings.
        Two threads may both build it once; either answer is the same, the last one stays."""
        if name not in self.derived:
            self.derived[name] = build(self)
        return self.derived[name]


_kept: PerCluster[tuple[_Key, ClusterHoldings]] = PerCluster()


def cluster_holdings(cluster_id: int) -> ClusterHoldings:
    """``load_holdings(cluster_id)``: every serving model of the cluster, from this process's
    cache while the cluster's generation and managed kinds are those they were read under (the
    last request as it was read: see the module's docstring)."""
    if connection.vendor != "postgresql":
        return _by_content(tuple(load_holdings(cluster_id)))
    key = _key(cluster_id)
    kept = _kept.get(cluster_id)
    if kept is not None and kept[0] == key:
        return kept[1]
    holdings = tuple(load_holdings(cluster_id))
    if key is not None and key.generation is not None and _key(cluster_id) == key:
        read = ClusterHoldings(holdings, key.version)
        _kept.put(cluster_id, (key, read))
        return read
    return _by_content(holdings)


def managed_kinds_and_kept(cluster_id: int) -> tuple[tuple[str, ...], ClusterHoldings | None] | None:
    """The cluster's managed kinds, and its holdings as :func:`cluster_holdings` gives them where
    this process keeps them for the cluster's current generation (else None, reading nothing
    more), from one read of its generation and managed kinds: a what-if's pool accounts read
    both (they read every cluster's managed kinds besides). None where there is no such
    cluster, or elsewhere than PostgreSQL (no generation: the caller reads the managed kinds)."""
    if connection.vendor != "postgresql":
        return None
    key = _key(cluster_id)
    if key is None:
        return None
    kept = _kept.get(cluster_id)
    return key.managed_kinds, kept[1] if kept is not None and kept[0] == key else None


def _by_content(holdings: tuple[Holding, ...]) -> ClusterHoldings:
    """Holdings versioned by what they hold (every field, the last request too: a version that
    moves more often than needed only makes a cursor start again)."""
    return ClusterHoldings(holdings, hashlib.blake2b(repr(holdings).encode(), digest_size=16).hexdigest())


def _key(cluster_id: int) -> _Key | None:
    """The cluster's generation (None: it has no row) and managed kinds; None: no such cluster.

    Plain SQL, as every plan and the pool accounts under it ask this: Django took a millisecond to
    build and compile the same query through a Subquery, ten times what PostgreSQL takes to run it."""
    clusters = Cluster._meta.db_table
    managed = Cluster._meta.get_field("managed_kinds").column
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT g.generation, c.{managed}::text FROM {clusters} c "
            f"LEFT JOIN {TABLE} g ON g.cluster_id = c.id WHERE c.id = %s",
            [cluster_id],
        )
        row = cursor.fetchone()
    return None if row is None else _Key(row[0], tuple(sorted(json.loads(row[1] or "null") or [])))


def _row_sql(model: type[KubeObject]) -> str:
    """A row as ``load_holdings`` reads it but its last request, in SQL over alias ``t``."""
    # the last request is not watched: the gateway moves it every few seconds per model in use
    # (what reads it reads it afresh, scheduler.holdings.with_last_requests)
    watched = [name for name in read_columns(model) if name != "last_active_at"]
    columns = [model._meta.get_field(name).column for name in [*watched, "pods"]]
    status = model._meta.get_field("status").column
    return ", ".join([*(f"t.{column}" for column in columns), f"t.{status} ->> '{RECOMMENDATION}'"])


def _trigger_sql(model: type[KubeObject]) -> list[str]:
    """The function and triggers that move the generation of the clusters ``model``'s writes change."""
    table = model._meta.db_table
    cluster = model._meta.get_field("cluster").column

    def rows(transition: str) -> str:
        return f"SELECT {_row_sql(model)} FROM {transition} t WHERE {not_deleted_sql('t')}"

    def move(changed: str) -> str:
        """Every cluster of the ``changed`` rows gets a fresh value, in cluster order (so two writers
        lock the rows in the same order)."""
        return (
            f"INSERT INTO {TABLE} (cluster_id, generation) SELECT {cluster}, nextval('{SEQUENCE}') "
            f"FROM (SELECT DISTINCT {cluster} FROM ({changed}) AS changed ORDER BY {cluster}) AS clusters "
            f"ON CONFLICT (cluster_id) DO UPDATE SET generation = EXCLUDED.generation;"
        )

    new, old = rows("new_rows"), rows("old_rows")
    return statement_triggers(
        table,
        "holdings_generation",
        insert=move(new),
        update=move(f"({new} EXCEPT ALL {old}) UNION ALL ({old} EXCEPT ALL {new})"),
        delete=move(old),
        truncate=f"UPDATE {TABLE} SET generation = nextval('{SEQUENCE}');",
    )


def install(using: BaseDatabaseWrapper = connection) -> None:
    """(Re)install every serving kind's triggers and move every cluster's generation (PostgreSQL).

    Runs after each ``migrate``; idempotent. Moving every generation gives each cluster its row,
    and drops what processes kept from before (a migration may have changed rows unwatched).
    Nothing is installed where the table is not (migrated back before it).
    """
    if using.vendor != "postgresql" or TABLE not in using.introspection.table_names():
        return
    with transaction.atomic(using=using.alias), using.cursor() as cursor:
        for model in serving_models():
            for statement in _trigger_sql(model):
                cursor.execute(statement)
        cursor.execute(
            f"INSERT INTO {TABLE} (cluster_id, generation) SELECT id, nextval('{SEQUENCE}') "
            f"FROM {Cluster._meta.db_table} ORDER BY id "
            f"ON CONFLICT (cluster_id) DO UPDATE SET generation = EXCLUDED.generation"
        )
