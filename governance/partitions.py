"""Monthly partitions of the usage ledger (PostgreSQL) and its retention.

The ledger's table is partitioned by range of ``started_at``, one partition per UTC calendar
month (migration 0002). A partition must exist before rows of its month arrive:
:func:`maintain` (a daily Celery task, and the migration) creates this month's and the next
``AHEAD`` ones, and the writer creates a missing one itself if a row finds none. Retention drops
whole partitions older than ``USAGE_LEDGER_RETENTION_MONTHS``: no DELETE, no bloat. On SQLite
(the embedded demo) the table is a plain one and retention deletes the old rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import connection

TABLE = "governance_requestrecord"
AHEAD = 2  # months created in advance


def month_start(moment: datetime, shift: int = 0) -> datetime:
    """The first instant (UTC) of ``moment``'s month, ``shift`` months later (or earlier)."""
    index = moment.year * 12 + moment.month - 1 + shift
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def partition_name(start: datetime) -> str:
    return f"{TABLE}_y{start.year:04d}m{start.month:02d}"


def create_partition_sql(start: datetime) -> str:
    end = month_start(start, 1)
    return (f"CREATE TABLE IF NOT EXISTS {partition_name(start)} PARTITION OF {TABLE} "
            f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')")


def ensure_partitions(cursor: Any, moments: Iterable[datetime]) -> None:
    """Create the partitions of these moments' months (a psycopg or Django cursor)."""
    for start in sorted({month_start(moment.astimezone(UTC)) for moment in moments}):
        cursor.execute(create_partition_sql(start))


def existing_partitions(cursor: Any) -> list[str]:
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY c.relname", [TABLE]
    )
    return [row[0] for row in cursor.fetchall()]


def maintain(now: datetime, retention_months: int) -> list[str]:
    """Create this month's and the next partitions; drop (or, on SQLite, delete) months past retention.

    Keeps the current month and the ``retention_months - 1`` before it. Returns what was dropped.
    """
    oldest_kept = month_start(now, -(retention_months - 1))
    if connection.vendor != "postgresql":
        from governance.models import RequestRecord

        deleted, _ = RequestRecord.objects.filter(started_at__lt=oldest_kept).delete()
        return [f"{deleted} rows"] if deleted else []
    dropped = []
    with connection.cursor() as cursor:
        ensure_partitions(cursor, [month_start(now, shift) for shift in range(AHEAD + 1)])
        for name in existing_partitions(cursor):
            year, month = int(name[-7:-3]), int(name[-2:])
            if datetime(year, month, 1, tzinfo=UTC) < oldest_kept:
                cursor.execute(f"DROP TABLE {name}")
                dropped.append(name)
    return dropped
