"""What a list page may cost at 100,000 rows: a bounded count, and distinct values by index.

Shared by the catalog (models_app.catalog), the admin's changelists and filter sidebar
(clusters.web.admin) so every list counts and offers choices the same way.

- :func:`bounded_count`: ``SELECT COUNT(*)`` reads every matching row (30-140 ms at 100,000 rows,
  on every page load). Counting stops at ``COUNT_BOUND`` rows; above it the planner's estimate is
  used and the page says "about".
- :func:`distinct_values`: ``SELECT DISTINCT column`` over the whole table is a full scan (300-400 ms
  at 100,000 rows for the admin's pool filter). A loose index scan asks the B-tree for the next value
  above the last, one descent per value, and reads the table as it is now: nothing to invalidate
  when rows change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import EmptyResultSet
from django.db import connection, connections
from django.db.models import Model, QuerySet

COUNT_BOUND = 10_000


@dataclass(frozen=True)
class Count:
    """Rows of a list; ``estimated`` when more than ``COUNT_BOUND`` matched and the planner guessed the rest."""

    rows: int
    estimated: bool = False

    def __add__(self, other: Count) -> Count:
        return Count(self.rows + other.rows, self.estimated or other.estimated)


def bounded_count(queryset: QuerySet, bound: int | None = None) -> Count:
    """The exact count up to ``bound`` (default ``COUNT_BOUND``) rows, reading at most ``bound + 1``,
    else the planner's estimate.

    An estimate is never below ``bound + 1``: the rows counted are known to be there. Databases other
    than PostgreSQL (the embedded SQLite demo, a few rows) count exactly.
    """
    bound = COUNT_BOUND if bound is None else bound
    queryset = queryset.order_by()
    if connection.vendor != "postgresql":
        return Count(queryset.count())
    counted = _rows_up_to(queryset, bound + 1)
    if counted <= bound:
        return Count(counted)
    return Count(max(bound + 1, planner_rows(queryset)), estimated=True)


def _rows_up_to(queryset: QuerySet, most: int) -> int:
    """``min(rows, most)``, as ``queryset[:most].count()`` counts it, in fewer steps where it can.

    A list past the bound (most are, at 100,000 rows) asks whether a row follows the first
    ``most - 1``: ``OFFSET most - 1 LIMIT 1`` steps over index entries where ``COUNT(*)`` of a
    ``LIMIT most`` subquery passes each of them up through the limit to the aggregate (0.48 against
    0.70 ms of PostgreSQL's time at 10,000, pgbench; and one plain query for the ORM to compile
    instead of an aggregate over a subquery: 0.18 against 0.29 ms of Python). Only when no such row exists are the
    rows counted, in the same statement (``COALESCE`` evaluates its second subquery only then).
    A query whose rows are not its table's rows one for one (DISTINCT, GROUP BY, an aggregate, a
    slice, a union) is counted by Django as before."""
    query = queryset.query
    if (query.distinct or query.is_sliced or query.combinator or query.group_by is not None
            or any(getattr(annotation, "contains_aggregate", False) for annotation in query.annotations.values())):
        return queryset[:most].count()  # fmt: skip
    try:
        sql, params = queryset.values("pk").query.sql_with_params()
    except EmptyResultSet:
        return 0  # a queryset that matches nothing (``none()``, ``pk__in=[]``): Django counts 0 without a query
    most = int(most)
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE((SELECT {most} FROM ({sql} OFFSET {most - 1} LIMIT 1) AS beyond), "
            f"(SELECT COUNT(*) FROM ({sql} LIMIT {most}) AS counted))",
            [*params, *params],
        )
        (counted,) = cursor.fetchone()
    return counted


def bounded_total(querysets: Sequence[QuerySet], bound: int | None = None) -> Count:
    """:func:`bounded_count` of several lists together (the catalog's kinds) in one query: a
    ``UNION ALL`` read to at most ``bound + 1`` rows in all (the first list's rows may be all
    of them: 10,001 index entries read at 100,000 rows, not 10,001 of each list); above ``bound``,
    the planner's estimate of the whole union."""
    bound = COUNT_BOUND if bound is None else bound
    if connection.vendor != "postgresql" or len(querysets) < 2:
        return sum((bounded_count(queryset, bound) for queryset in querysets), Count(0))
    limited = [queryset.order_by().values("pk")[: bound + 1] for queryset in querysets]
    counted = limited[0].union(*limited[1:], all=True)[: bound + 1].count()
    if counted <= bound:
        return Count(counted)
    whole = [queryset.order_by().values("pk") for queryset in querysets]
    return Count(max(bound + 1, planner_rows(whole[0].union(*whole[1:], all=True))), estimated=True)


def planner_rows(queryset: QuerySet) -> int:
    """PostgreSQL's estimate of the rows ``queryset`` returns (``EXPLAIN``, from the table's statistics)."""
    sql, params = queryset.values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return int(plan[0]["Plan"]["Plan Rows"])


def distinct_values(model: type[Model], column: str, longest: int | None = None, blank: bool = False) -> list[str]:
    """Distinct non-empty values of ``column`` over the whole table, one index descent per value;
    with ``blank``, ``""`` first where a row has it (one more descent, not another query).

    Needs a B-tree whose first column is ``column`` on PostgreSQL (elsewhere a plain ``DISTINCT``).
    A column whose index covers values of at most ``longest`` characters (see
    clusters.postgres_only.distinct_choice_indexes) adds the longer values, found by their own
    partial index.
    """
    return distinct_values_of([(model, column, longest)], blank)[0]


def distinct_values_of(columns: Sequence[tuple[type[Model], str, int | None]], blank: bool = False) -> list[list[str]]:
    """:func:`distinct_values` of each (model, column, longest) in one round trip: a page offering
    several such choices (the catalog: pools and engines of three kinds) waits for one query, not six."""
    if connection.vendor != "postgresql":
        rows = [(model._default_manager.order_by(), column) for model, column, _ in columns]
        return [sorted(set((found if blank else found.exclude(**{column: ""})).values_list(column, flat=True)))
                for found, column in rows]  # fmt: skip
    walks = [f"SELECT {number} AS n, value FROM ({_walk(*column, blank)}) AS walk{number}"
             for number, column in enumerate(columns)]  # fmt: skip
    found: list[list[str]] = [[] for _ in columns]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(walks))
        for number, value in cursor.fetchall():
            found[number].append(value)
    return [sorted(values) for values in found]


def _walk(model: type[Model], column: str, longest: int | None, blank: bool) -> str:
    """The loose index scan of ``column``'s distinct non-empty values (``""`` too with ``blank``: it
    sorts before every other value) and, past ``longest``, the longer ones from their partial index."""
    table, name = connection.ops.quote_name(model._meta.db_table), connection.ops.quote_name(column)
    bound = f" AND length({name}) <= {longest}" if longest else ""
    longer = f" UNION SELECT {name} FROM {table} WHERE length({name}) > {longest}" if longest else ""
    return (
        f"WITH RECURSIVE walk(value) AS ("
        f"SELECT MIN({name}) FROM {table} WHERE {name} {'>=' if blank else '>'} ''{bound} "
        f"UNION ALL SELECT (SELECT MIN({name}) FROM {table} WHERE {name} > walk.value{bound}) "
        f"FROM walk WHERE walk.value IS NOT NULL"
        f") SELECT value FROM walk WHERE value IS NOT NULL{longer}"
    )
