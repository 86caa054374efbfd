"""Timestamps are read with psycopg's compiled loader (clusters.timestamps), and they are the values
Django's own loader reads: the same instants, aware, in ``datetime.timezone.utc``."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader
from psycopg.pq import Format

from clusters.models import Cluster
from clusters.timestamps import CompiledTimestamptzLoader

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's loaders"),
]

VALUES = """SELECT '2026-01-01 10:00:00.123456+05'::timestamptz, '1970-01-01 00:00:00+00'::timestamptz,
    '0001-01-01 00:00:00+00'::timestamptz, '9999-12-31 23:59:59.999999+00'::timestamptz, NULL::timestamptz,
    '2026-03-29 01:30:00-07:30'::timestamptz"""


def _read(sql: str) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()


def test_the_compiled_loader_reads_what_djangos_reads():
    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(connection.connection.adapters.types["timestamptz"].oid,
                                                      Format.TEXT)  # fmt: skip
    assert loader is CompiledTimestamptzLoader
    fast = _read(VALUES)
    register_tzloader(connection.timezone, connection.connection)  # Django's own, on this connection
    try:
        assert _read(VALUES) == fast
    finally:
        connection.connection.adapters.register_loader("timestamptz", CompiledTimestamptzLoader)
    assert fast[0] == datetime.datetime(2026, 1, 1, 5, 0, 0, 123456, tzinfo=datetime.UTC)
    assert all(value.tzinfo is datetime.UTC for value in fast if value is not None)
    cluster = Cluster.objects.create(name="stamped", server_url="https://10.0.0.9:6443")
    assert Cluster.objects.get(pk=cluster.pk).created_at == cluster.created_at  # saved and read back exactly


def test_djangos_cursors_keep_the_compiled_loader():
    """Django compares the loader's zone with the connection's for every cursor and registers its
    own on the cursor when they differ: they must not."""
    with connection.cursor() as cursor:
        oid = cursor.cursor.adapters.types["timestamptz"].oid
        assert cursor.cursor.adapters.get_loader(oid, Format.TEXT) is CompiledTimestamptzLoader
