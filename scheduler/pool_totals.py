"""Pool totals kept as rows change, so no page sums 100,000 models per request.

``scheduler_pooltotal`` holds, per serving kind, cluster, pool and run state, how many models
there are and the sums of their declared memory, GPUs, observed peaks and right-sizing advice.
The run state is the part of :func:`scheduler.holdings.running_condition` a row alone decides:

- ``reported``: the cluster reported replicas (``running_replicas > 0``): the model runs;
- ``desired``: nothing reported yet but replicas are desired: it runs unless the portal is the
  kind's controller in that cluster (read at query time, so a change of ``managed_kinds`` needs
  no recount);
- ``stopped``: anything else (listed on pages, holds nothing).

Rows deleted in the cluster are not counted, as :func:`scheduler.holdings.holding_rows` says.

**Who keeps it current: PostgreSQL.** Each serving kind's table gets statement-level AFTER
triggers with transition tables (INSERT, UPDATE, DELETE) and a TRUNCATE trigger, so every write
path counts, whoever writes: the portal's saves and deletes, the watcher, the bulk resync's COPY,
``INSERT ... ON CONFLICT`` and ``UPDATE ... FROM`` (``clusters/sync/bulk.py`` sends no Django
signal), a cluster's cascade delete, the benchmarks' COPY. One statement's changes are grouped
first (a resync of 10,000 rows is one upsert per pool and state, not 10,000), in key order so
two writers take the rows' locks in the same order; an update that changes no counted column
(a status or ``last_active_at`` change, the watcher's common case) cancels out and writes nothing.
A total that reaches zero models is deleted. The triggers are (re)installed and every total
recounted from the tables after each ``migrate`` (Django's ``post_migrate``, connected in
:mod:`scheduler.apps`), so a kind registered later, or a column a migration changed, is covered.

Elsewhere (SQLite, the embedded ``make run`` demo with a few rows) there is no table to read: the
same grouped query runs over the models' tables at read time. Both paths use the one SQL
projection below (:func:`_projection`), so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from clusters.models import KubeObject, SyncState
from clusters.postgres_only import statement_triggers
from scheduler.holdings import RECOMMENDATION, has_peak, not_deleted_sql, serving_models
from scheduler.models import PoolTotal

TABLE = PoolTotal._meta.db_table
REPORTED, DESIRED, STOPPED = PoolTotal.State.REPORTED, PoolTotal.State.DESIRED, PoolTotal.State.STOPPED
_SUMS = ("model_count", "memory_bytes", "gpus", "observed_peak_bytes", "advised")


def _projection(model: type[KubeObject], vendor: str, alias: str = "t") -> str:
    """One row's (cluster, pool, state, memory, GPUs, peak, advised) as SQL over ``alias``."""
    advised = (
        f"({alias}.status ? '{RECOMMENDATION}')::int"
        if vendor == "postgresql"
        else f"(json_extract({alias}.status, '$.{RECOMMENDATION}') IS NOT NULL)"
    )
    peak = f"COALESCE({alias}.observed_peak_bytes, 0)" if has_peak(model) else "0"
    return (
        f"{alias}.cluster_id AS cluster_id, {alias}.node_pool AS node_pool, "
        f"CASE WHEN {alias}.running_replicas > 0 THEN '{REPORTED.value}' "
        f"WHEN {alias}.running_replicas IS NULL AND {alias}.replicas > 0 THEN '{DESIRED.value}' "
        f"ELSE '{STOPPED.value}' END AS state, "
        f"COALESCE({alias}.memory_bytes, 0) AS memory_bytes, COALESCE({alias}.gpu_count, 0) AS gpus, "
        f"{peak} AS observed_peak_bytes, {advised} AS advised"
    )


def _grouped_sql(model: type[KubeObject], vendor: str, where: str = "") -> str:
    """The totals of ``model``'s rows (narrowed by ``where``), grouped by cluster, pool and state."""
    table = model._meta.db_table
    return (
        f"SELECT cluster_id, node_pool, state, COUNT(*), SUM(memory_bytes), SUM(gpus), "
        f"SUM(observed_peak_bytes), SUM(advised) "
        f"FROM (SELECT {_projection(model, vendor)} FROM {table} t WHERE {not_deleted_sql('t')}{where}) AS rows "
        f"GROUP BY cluster_id, node_pool, state"
    )


def _trigger_sql(model: type[KubeObject]) -> list[str]:
    """The function and triggers that keep ``model``'s totals current (PostgreSQL)."""
    table, kind = model._meta.db_table, model.kube.kind
    row = _projection(model, "postgresql")

    def delta(sources: list[tuple[int, str]]) -> str:
        changes = " UNION ALL ".join(
            f"SELECT {sign} AS sign, {row} FROM {name} t WHERE {not_deleted_sql('t')}" for sign, name in sources
        )
        sums = ", ".join(
            f"SUM(sign * {column})" for column in ("1", "memory_bytes", "gpus", "observed_peak_bytes", "advised")
        )
        return (
            f"INSERT INTO {TABLE} AS total (kind, cluster_id, node_pool, state, {', '.join(_SUMS)}) "
            f"SELECT '{kind}', cluster_id, node_pool, state, {sums} FROM ({changes}) AS changes "
            f"GROUP BY cluster_id, node_pool, state "
            f"HAVING SUM(sign) <> 0 OR SUM(sign * memory_bytes) <> 0 OR SUM(sign * gpus) <> 0 "
            f"OR SUM(sign * observed_peak_bytes) <> 0 OR SUM(sign * advised) <> 0 "
            f"ORDER BY cluster_id, node_pool, state "
            f"ON CONFLICT (kind, cluster_id, state, md5(node_pool)) DO UPDATE SET "
            + ", ".join(f"{column} = total.{column} + EXCLUDED.{column}" for column in _SUMS)
            + f"; DELETE FROM {TABLE} WHERE kind = '{kind}' AND model_count = 0;"
        )

    return statement_triggers(
        table,
        "pool_totals",
        insert=delta([(1, "new_rows")]),
        update=delta([(1, "new_rows"), (-1, "old_rows")]),
        delete=delta([(-1, "old_rows")]),
        truncate=f"DELETE FROM {TABLE} WHERE kind = '{kind}';",
    )


def install(using: BaseDatabaseWrapper = connection) -> None:
    """(Re)install every serving kind's triggers and recount its totals from its table (PostgreSQL).

    Runs after each ``migrate``; idempotent. The recount is one grouped scan per kind.
    """
    if using.vendor != "postgresql":
        return
    with transaction.atomic(using=using.alias), using.cursor() as cursor:
        for model in serving_models():
            for statement in _trigger_sql(model):
                cursor.execute(statement)
        recount(using)


def recount(using: BaseDatabaseWrapper = connection) -> None:
    """Every total recounted from the tables, under a lock that holds writers off meanwhile.

    The triggers make this unnecessary in normal operation; it is the repair (and what
    :func:`install` and the tests compare against).
    """
    with transaction.atomic(using=using.alias), using.cursor() as cursor:
        models = serving_models()
        tables = ", ".join(model._meta.db_table for model in models)
        cursor.execute(f"LOCK TABLE {tables}, {TABLE} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(f"DELETE FROM {TABLE}")
        for model in models:
            cursor.execute(
                f"INSERT INTO {TABLE} (kind, cluster_id, node_pool, state, {', '.join(_SUMS)}) "
                f"SELECT %s, * FROM ({_grouped_sql(model, using.vendor)}) AS grouped",
                [model.kube.kind],
            )


def _in_clusters(cluster_ids: Iterable[int] | None, vendor: str) -> tuple[str, list[Any]]:
    if cluster_ids is None:
        return "", []
    ids = sorted(cluster_ids)
    if not ids:
        return " AND FALSE", []
    return f" AND t.cluster_id IN ({', '.join(['%s'] * len(ids))})", ids


def rows_by_sync_state(
    models: Sequence[type[KubeObject]], using: BaseDatabaseWrapper = connection
) -> dict[type[KubeObject], dict[str, int]]:
    """Every row of each serving kind of ``models`` counted by sync state, without a pass over its
    synced rows, in one statement; a kind without kept totals (not PostgreSQL, not a serving kind)
    is left out: count its rows there.

    Nearly every row is synced, and a ``GROUP BY sync_state`` reads them all (11 ms of the
    dashboard's SQL at 100,000 models, on every load). The other states are few: they are counted
    from the sync-state index, one range below ``Synced`` and one above, and the synced rows are
    the kept totals' models (every row not deleted in the cluster) less those. One statement, so
    one snapshot: the totals and the ranges agree whatever is written meanwhile.
    """
    kept = [model for model in models if model in serving_models()] if using.vendor == "postgresql" else []
    if not kept:
        return {}
    synced, deleted = SyncState.SYNCED.value, SyncState.DELETED_IN_CLUSTER.value
    branches, params = [], []
    for number, model in enumerate(kept):
        table = using.ops.quote_name(model._meta.db_table)
        branches += [
            f"SELECT {number}, sync_state, COUNT(*) FROM {table} WHERE sync_state < %s GROUP BY sync_state",
            f"SELECT {number}, sync_state, COUNT(*) FROM {table} WHERE sync_state > %s GROUP BY sync_state",
            f"SELECT {number}, NULL, COALESCE(SUM(model_count), 0)::bigint FROM {TABLE} WHERE kind = %s",
        ]
        params += [synced, synced, model.kube.kind]
    counted: list[dict[str | None, int]] = [{} for _ in kept]
    with using.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(branches), params)
        for number, state, rows in cursor.fetchall():
            counted[number][state] = rows
    result: dict[type[KubeObject], dict[str, int]] = {}
    for model, by_state in zip(kept, counted, strict=True):
        total = by_state.pop(None)
        by_state[synced] = total - sum(rows for state, rows in by_state.items() if state != deleted)
        result[model] = {state: rows for state, rows in by_state.items() if rows}
    return result


def pool_totals(cluster_ids: Iterable[int] | None = None, using: BaseDatabaseWrapper = connection) -> list[PoolTotal]:
    """Every total of the ``cluster_ids`` (None: all): on PostgreSQL read from the kept table (a
    few rows per pool), elsewhere grouped from the models' tables."""
    where, params = _in_clusters(cluster_ids, using.vendor)
    with using.cursor() as cursor:
        if using.vendor == "postgresql":
            cursor.execute(
                f"SELECT kind, cluster_id, node_pool, state, {', '.join(_SUMS)} FROM {TABLE} t WHERE TRUE{where}",
                params,
            )
            rows = cursor.fetchall()
        else:
            rows = []
            for model in serving_models():
                cursor.execute(_grouped_sql(model, using.vendor, where), params)
                rows += [(model.kube.kind, *row) for row in cursor.fetchall()]
    # positionally, in the model's field order (no id: these are read, never saved): Django's
    # keyword path took 16 us a row, a tenth of the dashboard's pool usage
    return [PoolTotal(None, kind, cluster_id, pool, state, *(int(value or 0) for value in sums))
            for kind, cluster_id, pool, state, *sums in rows]  # fmt: skip
