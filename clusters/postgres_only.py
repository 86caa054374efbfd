"""A migration operation for PostgreSQL-only SQL (index kinds SQLite lacks: GIN trigram, hash, partial;
storage parameters).

The embedded default (``make run``) runs on SQLite, where these indexes do not exist and are not
needed (a demo's few rows); PostgreSQL, the production database, gets them. The statements stay
out of the models' ``Meta.indexes`` because SQLite would be asked to create them too.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

# Characters of a text column that a B-tree index covers: 4 bytes each at most, under 2,704 bytes.
LONGEST_INDEXED_TEXT = 600


class PostgreSQLOnly(migrations.RunSQL):
    """``RunSQL`` that does nothing on any other database."""

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


def search_and_list_indexes(table: str, searched: list[str], hashed: list[str]) -> PostgreSQLOnly:
    """The indexes a mirrored kind's lists need on PostgreSQL, as one reversible operation.

    - ``(name, namespace, id)``: ``ordering=name`` (the catalog's and the API's), read in index
      order, and deep offsets answered from the index alone (see clusters.web.api.pagination);
    - a trigram GIN index per ``searched`` column on ``UPPER(column)``, the expression Django's
      ``icontains`` compares, so ``q=`` (a substring search over those columns) is no sequential scan;
    - a hash index per ``hashed`` column: exact filters on text columns that may hold more than a
      B-tree entry can (2,704 bytes; see the ``projected_columns_hold_what_the_crd_allows`` migrations).
    """
    index = f"{table}_name_ns_id"
    statements = [(f"CREATE INDEX {index} ON {table} (name, namespace, id)", f"DROP INDEX {index}")]
    statements += [
        (
            f"CREATE INDEX {table}_{column}_trgm ON {table} USING gin (UPPER({column}::text) gin_trgm_ops)",
            f"DROP INDEX {table}_{column}_trgm",
        )
        for column in searched
    ]
    statements += [
        (f"CREATE INDEX {table}_{column}_hash ON {table} USING hash ({column})", f"DROP INDEX {table}_{column}_hash")
        for column in hashed
    ]
    return PostgreSQLOnly(
        sql=[forward for forward, _ in statements], reverse_sql=[backward for _, backward in reversed(statements)]
    )


SORT_TIE_BREAKERS = "namespace, name, id"  # models_app.catalog.TIE_BREAKERS (the kind is constant per table)


def sort_indexes(table: str, columns: tuple[str, ...]) -> PostgreSQLOnly:
    """``(column, namespace, name, id)`` for each column: the catalog's sort by that column with its
    tie-breakers, read in index order either way from any position (models_app.catalog.CatalogRows).
    ``namespace`` alone is ``(namespace, name, id)``, which serves the kind's sort too."""
    return _indexes(table, {
        f"{column}_sort": f"({column}, {SORT_TIE_BREAKERS})" if column != "namespace" else "(namespace, name, id)"
        for column in columns
    })  # fmt: skip


def _indexes(table: str, indexes: dict[str, str]) -> PostgreSQLOnly:
    """``CREATE INDEX {table}_{suffix} ON {table} {definition}`` for each ``suffix: definition`` (its
    columns in parentheses, a partial index's ``WHERE`` after them), as one reversible operation."""
    return PostgreSQLOnly(
        sql=[f"CREATE INDEX {table}_{suffix} ON {table} {definition}" for suffix, definition in indexes.items()],
        reverse_sql=[f"DROP INDEX {table}_{suffix}" for suffix in reversed(indexes)],
    )


# The longest value of a text column its sort index holds (:func:`text_sort_indexes`): with the
# tie-breakers (a namespace of 63 and a name of 253 ASCII characters, an id) the entry stays under a
# B-tree's 2,704 bytes at 4 bytes a character. The pool's sort index (models_app 0012) holds
# ``LONGEST_INDEXED_TEXT``: a pool is a label value, at most 63 characters.
SORTED_TEXT = 500
SORTED_TEXT_BOUNDS = {"node_pool": LONGEST_INDEXED_TEXT}


def sorted_text_bound(column: str) -> int:
    """The longest value of ``column`` its sort index holds (the partial indexes' predicate)."""
    return SORTED_TEXT_BOUNDS.get(column, SORTED_TEXT)


def text_sort_indexes(table: str, columns: tuple[str, ...]) -> PostgreSQLOnly:
    """:func:`sort_indexes` for text columns, which may hold more than a B-tree entry can: for each,
    ``(column, namespace, name, id)`` over the rows whose value is at most ``SORTED_TEXT``
    characters, and ``(id)`` over the (rare) longer ones, so a sort reads the first in order where
    the second finds none (clusters.web.api.pagination.ids_by_text_column); and statistics on the
    values' length, so the planner knows nearly every row is short."""
    indexes = _indexes(table, {
        suffix: definition
        for column in columns
        for suffix, definition in (
            (f"{column}_short_sort", f"({column}, {SORT_TIE_BREAKERS}) WHERE length({column}) <= {SORTED_TEXT}"),
            (f"{column}_long_sort", f"(id) WHERE length({column}) > {SORTED_TEXT}"),
        )
    })  # fmt: skip
    statistics = {f"{table}_{column}_length": f"ON (length({column})) FROM {table}" for column in columns}
    return PostgreSQLOnly(
        sql=[*indexes.sql, *(f"CREATE STATISTICS {name} {definition}" for name, definition in statistics.items())],
        reverse_sql=[*(f"DROP STATISTICS {name}" for name in reversed(statistics)), *indexes.reverse_sql],
    )


def cluster_order_indexes(table: str, columns: tuple[str, ...]) -> PostgreSQLOnly:
    """``(column, cluster_id, namespace, name, id)`` for each column a list filters on (``cluster``
    itself: ``(cluster_id, namespace, name, id)``; ``namespace``: ``(namespace, cluster_id, name,
    id)``): a filtered list in the default cluster order
    (clusters.web.api.pagination.ids_in_cluster_order) counts its rows per cluster and steps to its
    page in the index alone, as migration models_app 0013 does for the pool; the unique
    ``(cluster_id, namespace, name)`` index holds no id, so every row stepped over was read from
    the table."""
    def ordered(column: str) -> str:
        leading = () if column == "cluster" else (column,)
        return ", ".join(dict.fromkeys((*leading, "cluster_id", "namespace", "name", "id")))

    return _indexes(table, {f"{column}_cluster_order": f"({ordered(column)})" for column in columns})


def short_pool_index(table: str, suffix: str, columns: str) -> PostgreSQLOnly:
    """``{table}_{suffix}`` on ``columns`` over the rows whose pool a B-tree entry can hold
    (``length(node_pool) <= LONGEST_INDEXED_TEXT``): queries repeat that predicate to use it."""
    index = f"{table}_{suffix}"
    return PostgreSQLOnly(
        sql=f"CREATE INDEX {index} ON {table} ({columns}) WHERE length(node_pool) <= {LONGEST_INDEXED_TEXT}",
        reverse_sql=f"DROP INDEX {index}",
    )


def distinct_choice_indexes(table: str, column: str, longest: int = LONGEST_INDEXED_TEXT) -> PostgreSQLOnly:
    """B-tree indexes that list a text column's distinct values by walking the index (a loose scan).

    A B-tree cannot hold values over 2,704 bytes, so the index covers values of at most ``longest``
    characters (4 bytes each at most) and a second, partial index finds the (rare) longer ones.
    """
    short, long = f"{table}_{column}_short", f"{table}_{column}_long"
    return PostgreSQLOnly(
        sql=[
            f"CREATE INDEX {short} ON {table} ({column}) WHERE length({column}) <= {longest}",
            f"CREATE INDEX {long} ON {table} (id) WHERE length({column}) > {longest}",
        ],
        reverse_sql=[f"DROP INDEX {long}", f"DROP INDEX {short}"],
    )


def _pool_memory_index_sql(table: str, memory_order: str, longest: int, include: str = "") -> str:
    return (
        f"CREATE INDEX {table}_pool_memory ON {table} (cluster_id, node_pool, memory_bytes{memory_order})"
        f"{f' INCLUDE ({include})' if include else ''} WHERE length(node_pool) <= {longest}"
    )


def pool_memory_index_undeclared_last(table: str, longest: int = LONGEST_INDEXED_TEXT) -> PostgreSQLOnly:
    """Rebuild :func:`pool_memory_index` ordered ``memory_bytes DESC NULLS LAST``.

    Models that declare no memory (NULL) hold budget too, for their GPUs; listed biggest first
    they come last, so ``ORDER BY memory_bytes DESC NULLS LAST`` reads this index forwards. (The
    ascending index read backwards gives NULLS FIRST, which would rank them as the biggest.)
    """
    drop = f"DROP INDEX {table}_pool_memory"
    return PostgreSQLOnly(
        sql=[drop, _pool_memory_index_sql(table, " DESC NULLS LAST", longest)],
        reverse_sql=[drop, _pool_memory_index_sql(table, "", longest)],
    )


def pool_memory_index_with_last_requests(table: str, longest: int = LONGEST_INDEXED_TEXT) -> PostgreSQLOnly:
    """Rebuild :func:`pool_memory_index_undeclared_last` carrying each row's id and last request
    (``INCLUDE (id, last_active_at)``), so a pool's last requests are read from the index alone.

    A what-if reads the last request of every model of the pools it suggests changes in, afresh
    each time (``scheduler.holdings.with_last_requests``): 2,000 rows of a 10,000-model cluster's
    pool, each on a heap page of its own (the mirror tables leave half of each page free), were
    2,000 page visits, about 3 ms of PostgreSQL's CPU a what-if. The index holds them in a few
    pages. Rows on pages changed since the last vacuum are still read from the table.

    The cost: an update that moves ``last_active_at`` is no longer HOT (it inserts into every
    index of the table: 0.2 -> 0.8 ms of PostgreSQL's time each, measured on 2,000 updates). The
    column moves only when the custom resource's last-request annotation does (a wake, a request
    path that stamps the resource); the portal's gateway stamps the Deployment, which is not
    mirrored. The watcher's status reports, the common update, stay HOT. The entries grow by 16
    bytes; no index is added.
    """
    drop = f"DROP INDEX {table}_pool_memory"
    return PostgreSQLOnly(
        sql=[drop, _pool_memory_index_sql(table, " DESC NULLS LAST", longest, "id, last_active_at")],
        reverse_sql=[drop, _pool_memory_index_sql(table, " DESC NULLS LAST", longest)],
    )


def pool_memory_index(table: str, longest: int = LONGEST_INDEXED_TEXT) -> PostgreSQLOnly:
    """A B-tree over (cluster_id, node_pool, memory_bytes): a pool's biggest models, read in order.

    Planning lists the biggest holders of every pool (``scheduler.holdings.biggest_per_pool``):
    with this index each pool's ``ORDER BY memory_bytes DESC LIMIT n`` stops after n rows instead
    of filtering the whole table. Partial like :func:`distinct_choice_indexes` (a B-tree entry
    cannot hold a longer pool name); queries repeat ``length(node_pool) <= longest`` to use it.
    Statistics on that expression tell the planner that nearly every row passes it: without
    them it guessed a third, and preferred scanning a whole pool of every cluster.
    """
    index, statistics = f"{table}_pool_memory", f"{table}_pool_length"
    return PostgreSQLOnly(
        sql=[
            _pool_memory_index_sql(table, "", longest),
            f"CREATE STATISTICS {statistics} ON (length(node_pool)) FROM {table}",
        ],
        reverse_sql=[f"DROP STATISTICS {statistics}", f"DROP INDEX {index}"],
    )


def room_for_updates(table: str, fillfactor: int) -> PostgreSQLOnly:
    """Fill each heap page of a mirror table only to ``fillfactor`` percent, so its rows' updates are HOT.

    A mirror row is rewritten far more often than it is created: every status change the watcher
    sees, every object a resync finds changed. Those updates almost never change an indexed
    column (name, pool, engine, memory...), so PostgreSQL can write them as heap-only tuples,
    which insert into none of the table's indexes (InferenceModel has 18), but only when the new
    version fits in the old one's page. Filled to the brim by inserts, pages never had room, and
    each update inserted into every index: a resync of 10,000 changed objects spent 0.55-0.7 s in
    its UPDATEs, 0.27 s with half of each page free (every update HOT; bench/bench_sync.py). The
    heap takes about twice the space (a row is ~2 KB there), and indexes stop growing with every
    update. Pages already full when this is set fill to it as their rows move on update.
    """
    return PostgreSQLOnly(
        sql=f"ALTER TABLE {table} SET (fillfactor = {fillfactor})",
        reverse_sql=f"ALTER TABLE {table} RESET (fillfactor)",
    )


# A statement-level AFTER trigger per write, with the statement's rows as transition tables.
STATEMENT_TRIGGERS = {
    "insert": "AFTER INSERT ON {t} REFERENCING NEW TABLE AS new_rows",
    "update": "AFTER UPDATE ON {t} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "delete": "AFTER DELETE ON {t} REFERENCING OLD TABLE AS old_rows",
    "truncate": "AFTER TRUNCATE ON {t}",
}


def statement_triggers(table: str, name: str, insert: str, update: str, delete: str, truncate: str) -> list[str]:
    """The statements that (re)create the function ``{table}_{name}()`` and the triggers
    ``{table}_{name}_{event}`` for every event of :data:`STATEMENT_TRIGGERS`, each running it once
    per statement: what keeps a table derived from ``table`` (pool totals, holdings generations)
    current on every write path, the bulk ones included, whoever writes. ``insert``, ``update``,
    ``delete`` and ``truncate`` are the function's SQL for each event, each ending with ``;``; they
    read ``new_rows`` / ``old_rows``."""
    function = f"{table}_{name}"
    statements = [
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP = 'INSERT' THEN {insert} ELSIF TG_OP = 'UPDATE' THEN {update} "
        f"ELSIF TG_OP = 'DELETE' THEN {delete} ELSE {truncate} END IF; RETURN NULL; END $$"
    ]
    for event, clause in STATEMENT_TRIGGERS.items():
        trigger = f"{function}_{event}"
        statements += [
            f"DROP TRIGGER IF EXISTS {trigger} ON {table}",
            f"CREATE TRIGGER {trigger} {clause.format(t=table)} FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        ]
    return statements
