"""The usage ledger's writer: rows queued by the request path, copied to the database in batches.

A request only appends a tuple to a bounded in-memory queue (:meth:`LedgerWriter.add`): no
database work on the request path. A background task takes up to ``batch`` rows every
``interval`` seconds (at once when a batch is full) and writes them in one thread of its own:
on PostgreSQL with ``COPY ... FROM STDIN`` (psycopg 3's ``cursor.copy``) on a connection kept
for it, elsewhere (SQLite, the embedded demo) with one ``bulk_create``.

**When the database is unreachable** the rows stay queued and the write is retried (waiting
longer each time, up to ``MAX_BACKOFF``); requests go on. Once ``capacity`` rows wait, each new
row is dropped and counted (``inference_portal_usage_ledger_lost_rows_total``), as are rows
still queued when the gateway stops and cannot write them: a loss is never silent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from itertools import islice
from typing import Any

import dj_database_url
import psycopg
from django.conf import settings
from django.db import DatabaseError, connection

from governance import metrics
from governance.models import LEDGER_COLUMNS, RequestRecord
from governance.partitions import ensure_partitions

logger = logging.getLogger(__name__)
Row = tuple[Any, ...]
MAX_BACKOFF = 10.0
COPY_SQL = f"COPY {RequestRecord._meta.db_table} ({', '.join(LEDGER_COLUMNS)}) FROM STDIN"


class PostgresSink:
    """COPY on one connection of its own, opened on first use and after a failure."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.connection: psycopg.Connection | None = None

    def write(self, rows: list[Row]) -> None:
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(self.conninfo, autocommit=False, connect_timeout=3)
        try:
            self._copy(rows)
        except psycopg.errors.CheckViolation:  # no partition for a row's month: create it, then again
            self.connection.rollback()
            with self.connection.cursor() as cursor:
                ensure_partitions(cursor, [row[0] for row in rows])
            self.connection.commit()
            self._copy(rows)
        except BaseException:
            self.close()
            raise

    def _copy(self, rows: list[Row]) -> None:
        with self.connection.cursor() as cursor, cursor.copy(COPY_SQL) as copy:
            for row in rows:
                copy.write_row(row)
        self.connection.commit()

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class OrmSink:
    """``bulk_create`` through Django's connection (SQLite, the embedded demo)."""

    def write(self, rows: list[Row]) -> None:
        try:
            RequestRecord.objects.bulk_create([RequestRecord(**dict(zip(LEDGER_COLUMNS, row, strict=True)))
                                               for row in rows])
        except DatabaseError:
            connection.close()
            raise

    def close(self) -> None:
        connection.close()


def conninfo_of(settings_dict: dict[str, Any]) -> str:
    """A libpq connection string for one of Django's PostgreSQL databases."""
    return psycopg.conninfo.make_conninfo(
        dbname=settings_dict["NAME"], user=settings_dict.get("USER") or None,
        password=settings_dict.get("PASSWORD") or None, host=settings_dict.get("HOST") or None,
        port=str(settings_dict["PORT"]) if settings_dict.get("PORT") else None,
    )


def default_sink() -> PostgresSink | OrmSink:
    """COPY to ``USAGE_LEDGER_DATABASE_URL``, else to the portal's database when it is PostgreSQL,
    else the ORM."""
    if settings.USAGE_LEDGER_DATABASE_URL:
        return PostgresSink(conninfo_of(dj_database_url.parse(settings.USAGE_LEDGER_DATABASE_URL)))
    if connection.vendor == "postgresql":
        return PostgresSink(conninfo_of(connection.settings_dict))
    return OrmSink()


class LedgerWriter:
    """The bounded queue and the task that empties it (see the module's docstring)."""

    def __init__(self, sink: PostgresSink | OrmSink, capacity: int, batch: int, interval: float) -> None:
        self.sink = sink
        self.capacity = capacity
        self.batch = batch
        self.interval = interval
        self.queue: deque[Row] = deque()
        self.written = 0
        self.lost = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="usage-ledger")

    def add(self, row: Row) -> None:
        if len(self.queue) >= self.capacity:
            self._lose(1)
            return
        self.queue.append(row)
        if len(self.queue) >= self.batch:
            self._wake.set()

    def _lose(self, count: int) -> None:
        self.lost += count
        metrics.LEDGER_LOST.inc(count)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds), count the rest as lost."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._task, timeout)
        if self.queue:
            logger.error("usage ledger: %d request records not written at stop", len(self.queue))
            self._lose(len(self.queue))
            self.queue.clear()
        await asyncio.get_running_loop().run_in_executor(self._thread, self.sink.close)
        self._thread.shutdown(wait=False)

    async def _run(self) -> None:
        backoff = self.interval
        while True:
            if not self._stopping:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), backoff)
            self._wake.clear()
            if not self.queue:
                if self._stopping:
                    return
                continue
            try:
                await self.flush()
            except (psycopg.Error, DatabaseError, OSError) as error:
                metrics.LEDGER_FAILURES.inc()
                backoff = min(MAX_BACKOFF, backoff * 2)
                logger.warning("usage ledger: %d rows wait, the database refused them: %s", len(self.queue), error)
                if self._stopping:
                    return
                continue
            backoff = self.interval

    async def flush(self) -> None:
        """Write every queued row, a batch at a time; raises on the first batch that fails."""
        while self.queue:
            rows = list(islice(self.queue, self.batch))
            await asyncio.get_running_loop().run_in_executor(self._thread, self.sink.write, rows)
            for _ in rows:  # only the request path appends, at the other end: these are the rows written
                self.queue.popleft()
            self.written += len(rows)
            metrics.LEDGER_WRITTEN.inc(len(rows))
            metrics.LEDGER_QUEUED.set(len(self.queue))
