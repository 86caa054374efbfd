"""The usage ledger's writer: rows queued by the request path, copied to the database in batches.

A request only appends a tuple to a bounded in-memory queue (:meth:`LedgerWriter.add`): no
database work on the request path. A background task takes up to ``batch`` rows every
``interval`` seconds (at once when a batch is full) and writes them in one thread of its own:
on PostgreSQL with ``COPY ... FROM STDIN`` (psycopg 3's ``cursor.copy``) on a connection kept
for it, elsewhere (SQLite, the embedded demo) with one ``bulk_create``.

**When the database is unreachable** the rows stay queued and the write is retried (waiting
longer each time, up to ``MAX_BACKOFF``); requests go on. Once ``capacity`` rows wait, each new
row is dropped and counted (``inference_portal_usage_ledger_lost_rows_total``): a loss is never
silent.

**No row stops the others.** A row is fitted to the table before it is copied (:func:`clamp`: a
name longer than its column cut, a count beyond its integer column's range held at the bound;
counted, ``..._clamped_rows_total``). A batch the database still refuses for its data (a
``DataError`` or ``IntegrityError``: not a connection failure, which is retried) is split in two
and each half written on its own, down to single rows, so k bad rows among n cost about
``k log2 n`` attempts; a row refused alone is **set aside** (:class:`~governance.models.SetAsideRecord`,
in the admin, ``..._set_aside_rows_total``) and never retried, and the rest of its batch is written.

**No row lost uncounted.** Each row is appended to this process's spool file before it is queued
(:mod:`governance.spool`), and how far the spool is written is recorded in the transaction that
writes its rows: rows a process did not write (it was killed, or stopped with the database away)
are written by the next process that finds its spool, exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from itertools import islice
from pathlib import Path
from typing import Any

import dj_database_url
import orjson
import psycopg
from django.conf import settings
from django.db import DatabaseError, connection, models, transaction
from django.db.backends.base.operations import BaseDatabaseOperations

from governance import metrics
from governance.models import LEDGER_COLUMNS, LedgerSpool, RequestRecord, SetAsideRecord
from governance.partitions import ensure_partitions
from governance.rollups import LedgerRollup, write_ledger_rollup_here
from governance.spool import ROTATE_BYTES, Orphan, Spool, orphans, spool_dir

logger = logging.getLogger(__name__)
Row = tuple[Any, ...]
Mark = tuple[str, int] | None  # (spool file, its bytes written once the row is): None for a row not spooled
MAX_BACKOFF = 10.0
ORPHAN_SECONDS = 30.0  # how often a writer looks for the spools of dead processes
COPY_SQL = f"COPY {RequestRecord._meta.db_table} ({', '.join(LEDGER_COLUMNS)}) FROM STDIN"
MARK_SQL = (f"INSERT INTO {LedgerSpool._meta.db_table} (name, written_bytes, updated_at) VALUES (%s, %s, now()) "
            "ON CONFLICT (name) DO UPDATE SET written_bytes = EXCLUDED.written_bytes, updated_at = now()")
SET_ASIDE_SQL = f"INSERT INTO {SetAsideRecord._meta.db_table} (set_aside_at, values, error) VALUES (now(), %s, %s)"
# Refusals of a row's data, not of the connection: retrying the same rows would fail forever.
POISON = (psycopg.DataError, psycopg.IntegrityError)


def _fit(field: models.Field) -> Callable[[Any], Any]:
    """What makes a value fit ``field``'s column: text cut to its length (without NUL, which
    PostgreSQL text cannot hold), an integer held within its type's range (Django's own table of
    ranges)."""
    if isinstance(field, models.CharField):
        length = field.max_length

        def text(value: Any) -> Any:
            value = str(value).replace("\x00", "")
            return value[:length]
        return text
    if isinstance(field, models.IntegerField):
        low, high = BaseDatabaseOperations.integer_field_ranges[field.get_internal_type()]
        return lambda value: value if value is None else min(max(int(value), low), high)
    return lambda value: value


FITS = tuple(_fit(RequestRecord._meta.get_field(name)) for name in LEDGER_COLUMNS)


def clamp(row: Row) -> Row:
    """``row`` with each value fitted to its column (the same tuple when all fit). A value that
    cannot be fitted (not a number where a number goes) is left for the database to refuse, which
    sets the row aside."""
    fitted = tuple(_fitted(fit, value) for fit, value in zip(FITS, row, strict=True))
    return row if fitted == row else fitted


def _fitted(fit: Callable[[Any], Any], value: Any) -> Any:
    try:
        return fit(value)
    except (TypeError, ValueError, OverflowError):
        return value


def _last_mark(marks: list[Mark]) -> Mark:
    return next((mark for mark in reversed(marks) if mark is not None), None)


class PostgresSink:
    """COPY on one connection of its own, opened on first use and after a failure."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.connection: psycopg.Connection | None = None
        self.done = 0  # rows of the last write() written or set aside, from its first: kept on a failure

    def write(self, rows: list[Row], marks: list[Mark]) -> int:
        """Write ``rows`` (their spool ``marks`` recorded with them); a row refused even alone is set
        aside. Raises on a failure of the connection, with :attr:`done` rows of the front done."""
        self.done = 0
        self._connect()
        fitted = [clamp(row) for row in rows]
        clamped = sum(1 for row, fit in zip(rows, fitted, strict=True) if row is not fit)
        if clamped:
            metrics.LEDGER_CLAMPED.inc(clamped)
            logger.warning("usage ledger: %d request records had values their columns cannot hold, cut to fit",
                           clamped)
        try:
            self._write(fitted, marks)
        except BaseException:
            self.close()
            raise
        return self.done

    def _write(self, rows: list[Row], marks: list[Mark]) -> None:
        """The rows, or, refused for their data, each half on its own, down to a row set aside."""
        try:
            self._copy(rows, _last_mark(marks))
        except POISON as error:
            self.connection.rollback()
            if len(rows) == 1:
                self._set_aside(rows[0], marks[0], error)
                return
            half = len(rows) // 2
            self._write(rows[:half], marks[:half])
            self._write(rows[half:], marks[half:])
            return
        self.done += len(rows)

    def _copy(self, rows: list[Row], mark: Mark) -> None:
        try:
            self._copy_once(rows, mark)
        except psycopg.errors.CheckViolation:  # no partition for a row's month: create it, then again
            self.connection.rollback()
            with self.connection.cursor() as cursor:
                ensure_partitions(cursor, [row[0] for row in rows])
            self.connection.commit()
            self._copy_once(rows, mark)

    def _copy_once(self, rows: list[Row], mark: Mark) -> None:
        """The rows, their rollups (:mod:`governance.rollups`) and the spool's mark: one transaction."""
        with self.connection.cursor() as cursor:
            with cursor.copy(COPY_SQL) as copy:
                for row in rows:
                    copy.write_row(row)
            LedgerRollup().add_ledger_rows(rows).write(cursor)
            if mark is not None:
                cursor.execute(MARK_SQL, mark)
        self.connection.commit()

    def _set_aside(self, row: Row, mark: Mark, error: Exception) -> None:
        reason = " ".join(str(error).replace("\x00", "").split())
        logger.error("usage ledger: a request record the database refuses was set aside (%s): %r", reason, row)
        values = orjson.dumps(row, default=str).decode()
        for kept in (values, ascii(row)):  # the values as JSON; as Python's escaped text if even that is refused
            try:
                with self.connection.cursor() as cursor:
                    cursor.execute(SET_ASIDE_SQL, (kept, reason))
                    if mark is not None:
                        cursor.execute(MARK_SQL, mark)
                self.connection.commit()
                break
            except POISON:
                self.connection.rollback()
        else:
            raise psycopg.DataError(f"a request record could not even be set aside: {reason}")
        metrics.LEDGER_SET_ASIDE.inc()
        self.done += 1

    def written_bytes(self, spool: str) -> int:
        """How much of a spool file is in the ledger (0: none of it)."""
        self._connect()
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT written_bytes FROM {LedgerSpool._meta.db_table} WHERE name = %s", [spool])
            found = cursor.fetchone()
        self.connection.commit()
        return found[0] if found else 0

    def forget(self, spool: str) -> None:
        """Drop a removed spool file's mark (a mark without its file is harmless, so this comes after)."""
        self._connect()
        with self.connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {LedgerSpool._meta.db_table} WHERE name = %s", [spool])
        self.connection.commit()

    def _connect(self) -> None:
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(self.conninfo, autocommit=False, connect_timeout=3)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class OrmSink:
    """``bulk_create`` through Django's connection (SQLite, the embedded demo), with the rows'
    rollups in the same transaction."""

    def write(self, rows: list[Row], _marks: list[Mark]) -> int:
        try:
            with transaction.atomic():
                RequestRecord.objects.bulk_create([RequestRecord(**dict(zip(LEDGER_COLUMNS, row, strict=True)))
                                                   for row in rows])
                write_ledger_rollup_here(rows)
        except DatabaseError:
            connection.close()
            raise
        return len(rows)

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


def spool_folder_for(sink: PostgresSink | OrmSink) -> Path | None:
    """Where this sink's spools live (``USAGE_LEDGER_SPOOL_DIR``, a folder per ledger database);
    None on SQLite (the embedded demo's one process writes through the ORM)."""
    return spool_dir(settings.USAGE_LEDGER_SPOOL_DIR, sink.conninfo) if isinstance(sink, PostgresSink) else None


class LedgerWriter:
    """The bounded queue, the spool, and the task that empties them (see the module's docstring)."""

    def __init__(self, sink: PostgresSink | OrmSink, capacity: int, batch: int, interval: float,
                 spool_folder: Path | None = None) -> None:
        self.sink = sink
        self.capacity = capacity
        self.batch = batch
        self.interval = interval
        self.spool_folder = spool_folder
        self.spool: Spool | None = None
        self.queue: deque[Row] = deque()
        self.marks: deque[Mark] = deque()  # beside each queued row: its spool mark
        self.written = 0
        self.lost = 0
        self._orphans_at = 0.0  # when to look for dead processes' spools next
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="usage-ledger")

    def add(self, row: Row) -> None:
        if len(self.queue) >= self.capacity:
            self._lose(1)
            return
        mark = None
        if self.spool is not None:
            try:
                mark = (self.spool.name, self.spool.append(row))
            except (OSError, TypeError) as error:  # a full disk: the row is only in memory, as without a spool
                logger.warning("usage ledger: a request record not spooled: %s", error)
        self.queue.append(row)
        self.marks.append(mark)
        if len(self.queue) >= self.batch:
            self._wake.set()

    def _lose(self, count: int) -> None:
        self.lost += count
        metrics.LEDGER_LOST.inc(count)

    def start(self) -> None:
        if self.spool_folder is not None:
            self.spool = Spool(self.spool_folder)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds); what is left stays in the spool for
        the next process (without a spool: counted as lost)."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._task, timeout)
        if self.queue and self.spool is not None:
            logger.error("usage ledger: %d request records not written at stop, kept in %s for the next gateway",
                         len(self.queue), self.spool.path)
        elif self.queue:
            logger.error("usage ledger: %d request records not written at stop", len(self.queue))
            self._lose(len(self.queue))
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close, not self.queue)
        self.queue.clear()
        self.marks.clear()
        self._thread.shutdown(wait=False)

    def _close(self, all_written: bool) -> None:
        """Close the spool (removed, with its mark, when all its rows are written) and the sink."""
        if self.spool is not None:
            self.spool.close(remove=all_written)
            if all_written and self.spool.size:  # an empty spool never had a mark
                self._forget(self.spool.name)
        self.sink.close()

    async def _run(self) -> None:
        backoff = self.interval
        while True:
            try:  # first of all at start: the rows a dead process left
                if self.spool is not None and not self._stopping and time.monotonic() >= self._orphans_at:
                    self._orphans_at = time.monotonic() + ORPHAN_SECONDS
                    await asyncio.get_running_loop().run_in_executor(self._thread, self._recover)
            except (psycopg.Error, DatabaseError, OSError) as error:
                logger.warning("usage ledger: spools of gone processes not written yet: %s", error)
            metrics.LEDGER_QUEUED.set(len(self.queue))  # true while batches fail too, not only after one is written
            if not self._stopping:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), backoff)
            self._wake.clear()
            try:
                if not self.queue:
                    if self._stopping:
                        return
                    continue
                await self.flush()
            except (psycopg.Error, DatabaseError, OSError) as error:
                metrics.LEDGER_FAILURES.inc()
                backoff = min(MAX_BACKOFF, backoff * 2)
                logger.warning("usage ledger: %d rows wait, the database refused them: %s", len(self.queue), error)
                if self._stopping:
                    return
                continue
            backoff = self.interval
            self._rotate()

    async def flush(self) -> None:
        """Write every queued row, a batch at a time; raises on the first batch that fails (the
        rows it wrote before are taken off the queue)."""
        while self.queue:
            rows, marks = list(islice(self.queue, self.batch)), list(islice(self.marks, self.batch))
            try:
                done = await asyncio.get_running_loop().run_in_executor(self._thread, self.sink.write, rows, marks)
            except BaseException:
                self._taken(getattr(self.sink, "done", 0))
                raise
            self._taken(done)

    def _taken(self, done: int) -> None:
        """The first ``done`` queued rows are in the database (or set aside)."""
        for _ in range(done):  # only the request path appends, at the other end: these are the rows written
            self.queue.popleft()
            self.marks.popleft()
        self.written += done
        metrics.LEDGER_WRITTEN.inc(done)
        metrics.LEDGER_QUEUED.set(len(self.queue))

    def _rotate(self) -> None:
        """A spool whose rows are all written, past ``ROTATE_BYTES``: a new file from now on, the old
        one removed (in the event loop's thread, between two rows: none of its rows is queued)."""
        if self.spool is None or self.queue or self.spool.size < ROTATE_BYTES:
            return
        full, self.spool = self.spool, Spool(self.spool_folder)
        full.close(remove=True)
        self._thread.submit(self._forget, full.name)

    def _forget(self, name: str) -> None:
        with suppress(psycopg.Error, OSError):
            self.sink.forget(name)

    def _recover(self) -> None:
        """Write the rows of dead processes' spools (in the writer's thread); the first failure of
        the database leaves the rest for the next look."""
        for orphan in orphans(self.spool_folder, self.spool.name):
            try:
                self._replay(orphan)
            except BaseException:
                orphan.release()
                raise
            orphan.remove()
            self._forget(orphan.name)

    def _replay(self, orphan: Orphan) -> None:
        rows: list[Row] = []
        marks: list[Mark] = []
        unreadable = recovered = 0
        for row, mark in orphan.rows(self.sink.written_bytes(orphan.name)):
            if row is None:
                unreadable += 1
                continue
            rows.append(row)
            marks.append((orphan.name, mark))
            if len(rows) == self.batch:
                recovered += self.sink.write(rows, marks)
                rows, marks = [], []
        if rows:
            recovered += self.sink.write(rows, marks)
        if unreadable:
            self._lose(unreadable)
        metrics.LEDGER_RECOVERED.inc(recovered)
        logger.warning("usage ledger: %d request records of a gone process written from its spool %s (%d unreadable)",
                       recovered, orphan.name, unreadable)
