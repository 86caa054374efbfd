"""Bulk reads and writes of many rows on PostgreSQL, as fast as the database allows.

Rows are streamed with COPY: straight into the table when none of them exists yet (a cluster's
first resync), else into a temporary staging table merged with one ``INSERT ... SELECT ... ON
CONFLICT DO UPDATE ... WHERE``. Django's ``bulk_create(update_conflicts=True)`` sends rows as text
arrays that psycopg escapes value by value in Python, which measured 3x slower for 10,000
InferenceModel rows. Rows arrive from an iterator that may reuse one model instance (building
10,000 instances was a third of the time), so each is read the moment it arrives.

Callers use these on PostgreSQL only (``connection.vendor == "postgresql"``).
"""

from __future__ import annotations

import functools
import hashlib
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import orjson
from django.db import connection, models
from django.utils import timezone

from common.gc_tuning import collector_paused


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _columns(model: type[models.Model], names: Sequence[str]) -> list[str]:
    return [_quote(model._meta.get_field(name).column) for name in names]


def copy_new(model: type[models.Model], rows: Iterable[models.Model], count: int) -> list[int]:
    """COPY ``count`` rows that do not exist yet straight into the table (IntegrityError if one
    does); returns their primary keys, in order. The keys are taken from the table's sequence
    first (one query), as COPY cannot return them and finding them afterwards took longer."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [model._meta.db_table, model._meta.pk.column, count],
        )
        pks = [pk for (pk,) in cursor.fetchall()]

    def numbered() -> Iterator[models.Model]:
        for pk, row in zip(pks, rows, strict=True):
            row.pk = pk
            yield row

    _copy_into(model._meta.db_table, [model._meta.pk, *_fields(model)], numbered())
    return pks


def insert(model: type[models.Model], rows: Iterable[models.Model]) -> None:
    """Plain bulk insert (no conflicts possible), e.g. audit entries."""
    _copy_into(model._meta.db_table, _fields(model), rows)


_staging_tables: WeakKeyDictionary[Any, set[str]] = WeakKeyDictionary()  # per database session


def staged_update(
    model: type[models.Model],
    rows: Iterable[models.Model],
    unique: Sequence[str],
    update: Sequence[str],
    only_if: str = "",
    only_if_params: Sequence[Any] = (),
    derived: Mapping[str, str] | None = None,
) -> dict[tuple, int]:
    """Update existing rows keyed by ``unique`` from rows COPied into a staging table, with one
    ``UPDATE ... FROM``. A row is updated only when ``only_if`` (SQL about the stored row, named
    ``t``) holds: PostgreSQL checks it again on the newest version of a row it had to wait for,
    so a row changed meanwhile by someone else is left alone. ``derived`` maps fields of
    ``update`` to SQL about the staged row (``s``) they are set from, so that a value two columns
    share crosses to the server and is parsed once; such SQL may also read the stored row (``t``)
    and the field's own staged value (which is then staged). Returns {unique values: pk} of the rows
    updated."""
    if not connection.in_atomic_block:
        raise RuntimeError("staged_update needs a transaction: its staging table empties at commit")
    plan = _staged_update_plan(model, tuple(unique), tuple(update), only_if, tuple((derived or {}).items()))
    with connection.cursor() as cursor:
        created = _staging_tables.setdefault(connection.connection, set())
        if plan.staging_name not in created:
            # Once per database session; it empties itself at each commit (a watch batch saves the
            # two round trips of creating and truncating it).
            cursor.execute(plan.create_staging)
            _compress_fast(cursor, _quote(plan.staging_name), plan.staged)
            created.add(plan.staging_name)
        _copy_into(plan.staging_name, plan.staged, rows)
        cursor.execute(plan.update, list(only_if_params))
        return {tuple(found): pk for pk, *found in cursor.fetchall()}


@dataclass(frozen=True)
class _StagedUpdatePlan:
    staged: tuple[models.Field, ...]  # the fields COPied into the staging table
    staging_name: str
    create_staging: str
    update: str


@functools.cache
def _staged_update_plan(
    model: type[models.Model],
    unique: tuple[str, ...],
    update: tuple[str, ...],
    only_if: str,
    derived: tuple[tuple[str, str], ...],
) -> _StagedUpdatePlan:
    """The SQL of one shape of :func:`staged_update`, built once: a watch batch of two events spent
    a tenth of its CPU quoting the same names again."""
    derived_sql = dict(derived)
    # A derived field whose SQL reads its own staged value (``s.<column>``) is staged as well.
    fields = [model._meta.get_field(name) for name in dict.fromkeys([*unique, *update])]
    staged = tuple(field for field in fields
                   if field.name not in derived_sql or f"s.{field.column}" in derived_sql[field.name])  # fmt: skip
    table = _quote(model._meta.db_table)
    staging_name = f"bulk_staging_{model._meta.db_table}_{_digest([field.column for field in staged])}"
    key_columns = _columns(model, unique)
    joined = " AND ".join(f"t.{c} = s.{c}" for c in key_columns)
    assignments = ", ".join(
        f"{_quote(model._meta.get_field(name).column)} = {derived_sql.get(name) or f's.{_columns(model, [name])[0]}'}"
        for name in update
    )
    return _StagedUpdatePlan(
        staged,
        staging_name,
        f"CREATE TEMP TABLE IF NOT EXISTS {_quote(staging_name)} ON COMMIT DELETE ROWS AS "
        f"SELECT {_quoted_columns(staged)} FROM {table} WITH NO DATA",
        f"UPDATE {table} t SET {assignments} FROM {_quote(staging_name)} s WHERE {joined}"
        f"{f' AND {only_if}' if only_if else ''} RETURNING t.id, {', '.join(f't.{c}' for c in key_columns)}",
    )


def _digest(columns: Sequence[str]) -> str:
    """Names a staging table by its columns (two callers staging different columns get two tables)."""
    return hashlib.sha256(",".join(columns).encode()).hexdigest()[:8]


def _compress_fast(cursor: Any, staging: str, fields: Sequence[models.Field]) -> None:
    """Large staged values (JSON, text) are compressed with lz4 where the server has it: the staging
    table is read once, right away, so pglz's slow compression there (the default) only cost time;
    the target table keeps its own setting."""
    cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
    (available,) = cursor.fetchone()
    toastable = [field for field in fields if isinstance(field, models.JSONField | models.TextField)]
    if available and toastable:
        cursor.execute(
            f"ALTER TABLE {staging} "
            + ", ".join(f"ALTER COLUMN {_quote(field.column)} SET COMPRESSION lz4" for field in toastable)
        )


def _fields(model: type[models.Model]) -> list[models.Field]:
    return [field for field in model._meta.concrete_fields if not field.primary_key]


def _quoted_columns(fields: Sequence[models.Field]) -> str:
    return ", ".join(_quote(field.column) for field in fields)


@functools.cache
def _copy_statement(table: str, fields: tuple[models.Field, ...]) -> str:
    return f"COPY {_quote(table)} ({_quoted_columns(fields)}) FROM STDIN"


def _copy_into(table: str, fields: Sequence[models.Field], rows: Iterable[models.Model]) -> None:
    """COPY the ``fields`` of rows into ``table``. psycopg's own errors become Django's
    (``DatabaseError``...), as for every other query."""
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(_copy_statement(table, tuple(fields))) as stream,
        collector_paused(),
    ):
        for values in _row_values(fields, rows):
            stream.write_row(values)


def _row_values(fields: Sequence[models.Field], rows: Iterable[models.Model]) -> Iterator[list]:
    """The values COPY writes for each row: JSON as text, auto_now fields stamped with one time.

    All attributes are read by one ``attrgetter`` call (a loop of ``getattr`` and ``pre_save``
    per field was the largest cost of a resync). COPY's text format takes JSON text for jsonb
    columns (orjson, 6x faster than json.dumps here, which itself beats psycopg's Jsonb dumper),
    and a value shared by two columns (a synced row's spec and merge base) is encoded once.
    """
    read = operator.attrgetter(*(field.attname for field in fields))
    json_columns = [i for i, field in enumerate(fields) if isinstance(field, models.JSONField)]
    stamped = [i for i, field in enumerate(fields) if getattr(field, "auto_now", False)]
    stamped_when_empty = [i for i, field in enumerate(fields) if getattr(field, "auto_now_add", False)]
    now = timezone.now()
    for row in rows:
        values = list(read(row))
        for i in stamped:
            values[i] = now
        for i in stamped_when_empty:
            values[i] = values[i] or now
        encoded: dict[int, str] = {}
        for i in json_columns:
            value = values[i]
            if value is not None:
                text = encoded.get(id(value))
                if text is None:
                    text = encoded[id(value)] = orjson.dumps(value).decode()
                values[i] = text
        yield values
