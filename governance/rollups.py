"""Usage rollups: the ledger and the GPU samples summed per team, model and hour or day, kept as
they are written, so that showback, the usage pages, ``/api/usage/``, budgets and the CSV read a
few thousand rows instead of re-aggregating millions of raw ones.

**Exactly once.** A batch of ledger rows is rolled up in the transaction that writes it
(:mod:`governance.ledger`: the COPY, the rollups' upserts and the spool's mark commit together or
not at all). A batch that fails anywhere, a connection lost mid-flush included, rolls back whole
and is written again later, rollups with it; a row set aside is in neither the ledger nor the
rollups; a spool replayed after a gateway died resumes after the last row committed, so each row
is added once. GPU samples and their :class:`~governance.models.GpuDay` commit together too
(:func:`governance.sampling.record_samples`).

**Retention.** The rollups are tables of their own: dropping a month of raw ledger
(:mod:`governance.partitions`) leaves that month's rollups, so showback of old months still
answers; only the raw rows (audits, exports of single requests) are gone.

**Backfill.** :func:`rebuild` recomputes the rollups of the days the raw ledger still holds from
the raw rows (``manage.py backfill_usage_rollups``, once after upgrading): idempotent, and days
before the oldest raw row (dropped partitions) keep their rollups.

Latency is kept as a histogram per day and team (:class:`~governance.models.LatencyDay`), buckets
5% wide on a log scale: the p50 and p95 shown are the bucket's upper bound, at most 5% above
the exact nearest-rank value.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from operator import itemgetter
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Min

from governance.models import (
    LEDGER_COLUMNS,
    GpuDay,
    GpuSample,
    LatencyDay,
    RequestRecord,
    UsageDay,
    UsageHour,
    UsageVersion,
)

LATENCY_STEP = 1.05  # each latency bucket is 5% wider than the one before
_LOG_STEP = math.log(LATENCY_STEP)
MIN_LATENCY_MS, MAX_LATENCY_MS = 0.01, 1e9  # latencies outside are counted in the end buckets
# What a rollup reads of a ledger row: started_at, team, model, latency_ms, prompt and completion tokens.
ROLLED_COLUMNS = ("started_at", "team", "model", "latency_ms", "prompt_tokens", "completion_tokens")
_OF_LEDGER_ROW = itemgetter(*(LEDGER_COLUMNS.index(name) for name in ROLLED_COLUMNS))
Adapt = Callable[[Any], Any]


def latency_bucket(latency_ms: float) -> int:
    """The bucket of a latency: bucket ``b`` holds (1.05^(b-1), 1.05^b] ms."""
    if not latency_ms > MIN_LATENCY_MS:  # NaN too
        latency_ms = MIN_LATENCY_MS
    return math.ceil(math.log(min(latency_ms, MAX_LATENCY_MS)) / _LOG_STEP)


def bucket_upper_ms(bucket: int) -> float:
    return LATENCY_STEP ** bucket


def _upsert_sql(table: str, keys: tuple[str, ...], sums: tuple[str, ...]) -> str:
    """Add to a rollup row, creating it when new (PostgreSQL and SQLite say this alike)."""
    columns = (*keys, *sums)
    added = ", ".join(f"{name} = {table}.{name} + EXCLUDED.{name}" for name in sums)
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {added}")


TOKENS = ("requests", "prompt_tokens", "completion_tokens")
HOUR_SQL = _upsert_sql(UsageHour._meta.db_table, ("hour", "team", "model"), TOKENS)
DAY_SQL = _upsert_sql(UsageDay._meta.db_table, ("day", "team", "model"), TOKENS)
LATENCY_SQL = _upsert_sql(LatencyDay._meta.db_table, ("day", "team", "bucket"), ("requests",))
GPU_SQL = _upsert_sql(GpuDay._meta.db_table, ("day", "team", "model", "gpu_product", "idle"), ("gpu_seconds",))
# How long a writer's transaction may take from its rollup to its commit and still never leave a
# past day changed under a version showback keeps: rows of today count as past this long before
# midnight (the writers of the day's last minutes move the version, once per batch).
PAST_MARGIN = "5 minutes"
# A fresh version when the oldest day written is before today (PostgreSQL's clock, as showback's
# reads ask it, so no two hosts' clocks are compared), the row made if a flush emptied the table.
PAST_SQL = (f"INSERT INTO {UsageVersion._meta.db_table} (id, version) SELECT 1, gen_random_uuid() "
            f"WHERE %s::date < ((clock_timestamp() AT TIME ZONE 'UTC') + interval '{PAST_MARGIN}')::date "
            f"ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version")


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _same(value: Any) -> Any:
    return value


@dataclass
class LedgerRollup:
    """Sums of some ledger rows per hour, team and model (days are sums of hours), and their
    latencies per day, team and bucket; :meth:`write` adds them to the tables."""

    hours: defaultdict[tuple[datetime, str, str], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    latency: defaultdict[tuple[date, str, int], int] = field(default_factory=lambda: defaultdict(int))

    def add_ledger_rows(self, rows: Iterable[tuple[Any, ...]]) -> LedgerRollup:
        """Rows in the ledger's column order (``LEDGER_COLUMNS``), as the writer copies them."""
        return self.add(map(_OF_LEDGER_ROW, rows))

    def add(self, rows: Iterable[tuple[Any, ...]]) -> LedgerRollup:
        """Rows of ``ROLLED_COLUMNS``."""
        hours, latency = self.hours, self.latency
        for started_at, team, model, latency_ms, prompt, completion in rows:
            hour = _utc(started_at).replace(minute=0, second=0, microsecond=0)
            sums = hours[(hour, team, model)]
            sums[0] += 1
            sums[1] += prompt or 0
            sums[2] += completion or 0
            latency[(hour.date(), team, latency_bucket(latency_ms))] += 1
        return self

    def days(self) -> dict[tuple[date, str, str], list[int]]:
        days: defaultdict[tuple[date, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
        for (hour, team, model), (requests, prompt, completion) in self.hours.items():
            sums = days[(hour.date(), team, model)]
            sums[0] += requests
            sums[1] += prompt
            sums[2] += completion
        return days

    def write(self, cursor: Any, adapt_time: Adapt = _same, adapt_day: Adapt = _same, postgres: bool = True) -> None:
        """Add the sums to the tables through ``cursor`` (psycopg's or Django's), in the caller's
        transaction, and move the past days' version when a row is of one (``postgres``: the
        version is PostgreSQL's alone, :func:`changed_days_before_today`). Keys go in sorted
        order, so that writers adding to the same rows at once take their locks in one order (no
        deadlock between gateways)."""
        statements = (
            (HOUR_SQL, [(adapt_time(hour), team, model, *sums)
                        for (hour, team, model), sums in sorted(self.hours.items())]),
            (DAY_SQL, [(adapt_day(day), team, model, *sums)
                       for (day, team, model), sums in sorted(self.days().items())]),
            (LATENCY_SQL, [(adapt_day(day), team, bucket, count)
                           for (day, team, bucket), count in sorted(self.latency.items())]),
        )
        for sql, params in statements:
            if params:
                cursor.executemany(sql, params)
        if postgres and self.hours:
            changed_days_before_today(cursor, adapt_day(min(self.hours)[0].date()))


def changed_days_before_today(cursor: Any, oldest: Any) -> None:
    """Move the version of the past days' rollups if ``oldest`` (the oldest day just written to
    them, adapted for ``cursor``) is before today, in the writer's transaction, last before its
    commit: showback keeps sums of past days under the version it read (PostgreSQL only)."""
    cursor.execute(PAST_SQL, [oldest])


def write_gpu_rollup(samples: Iterable[GpuSample]) -> None:
    """Add samples' GPU-seconds to :class:`GpuDay` (the day of ``sampled_at``), in the caller's transaction."""
    seconds: defaultdict[tuple[date, str, str, str, bool], int] = defaultdict(int)
    for sample in samples:
        seconds[(_utc(sample.sampled_at).date(), sample.team, sample.model, sample.gpu_product, sample.idle)] += (
            sample.gpus * sample.period_seconds)
    if seconds:
        with connection.cursor() as cursor:
            cursor.executemany(GPU_SQL, [(connection.ops.adapt_datefield_value(key[0]), *key[1:], value)
                                         for key, value in sorted(seconds.items())])
            if connection.vendor == "postgresql":
                changed_days_before_today(cursor, min(seconds)[0])


def write_ledger_rollup_here(rows: Iterable[tuple[Any, ...]]) -> None:
    """Roll up ledger rows through Django's connection (the ORM sink, SQLite), in the caller's transaction."""
    with connection.cursor() as cursor:
        LedgerRollup().add_ledger_rows(rows).write(cursor, connection.ops.adapt_datetimefield_value,
                                                   connection.ops.adapt_datefield_value,
                                                   postgres=connection.vendor == "postgresql")


@dataclass(frozen=True)
class Rebuilt:
    first_day: date | None
    last_day: date | None
    ledger_rows: int
    gpu_samples: int


def _lock(*models: type) -> None:
    """Hold the gateways' and the sampler's rollup writes until this transaction ends (PostgreSQL:
    a writer already past its COPY waits, and adds its rows after the rebuild: counted once)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for model in models:
                cursor.execute(f"LOCK TABLE {model._meta.db_table} IN SHARE ROW EXCLUSIVE MODE")


def rebuild() -> Rebuilt:
    """Recompute every rollup the raw records still back, in one transaction; idempotent.

    Ledger rollups: the days from the oldest raw row to the newest are deleted and summed again
    from the raw rows, a day at a time; days before the oldest raw row (their partitions dropped
    by retention) keep the rollups they have. GPU rollups: summed again from every sample."""
    with transaction.atomic():
        _lock(UsageHour, UsageDay, LatencyDay, GpuDay)
        span = RequestRecord.objects.aggregate(first=Min("started_at"), last=Max("started_at"))
        rows = 0
        first = last = None
        if span["first"] is not None:
            first, last = _utc(span["first"]).date(), _utc(span["last"]).date()
            since = datetime.combine(first, time(), UTC)
            UsageHour.objects.filter(hour__gte=since).delete()
            UsageDay.objects.filter(day__gte=first).delete()
            LatencyDay.objects.filter(day__gte=first).delete()
            day = first
            while day <= last:
                start = datetime.combine(day, time(), UTC)
                of_day = RequestRecord.objects.order_by().filter(started_at__gte=start,
                                                                 started_at__lt=start + timedelta(days=1))
                rollup = LedgerRollup().add(of_day.values_list(*ROLLED_COLUMNS).iterator(chunk_size=20_000))
                rows += sum(sums[0] for sums in rollup.hours.values())
                with connection.cursor() as cursor:
                    rollup.write(cursor, connection.ops.adapt_datetimefield_value, connection.ops.adapt_datefield_value,
                                 postgres=False)
                day += timedelta(days=1)
        GpuDay.objects.all().delete()
        samples = 0
        chunk: list[GpuSample] = []
        fields = ("sampled_at", "team", "model", "gpu_product", "idle", "gpus", "period_seconds")
        for sample in GpuSample.objects.order_by().only(*fields).iterator(chunk_size=20_000):
            chunk.append(sample)
            if len(chunk) == 20_000:
                write_gpu_rollup(chunk)
                samples, chunk = samples + len(chunk), []
        write_gpu_rollup(chunk)
        samples += len(chunk)
        if connection.vendor == "postgresql":  # every past day may have changed
            with connection.cursor() as cursor:
                changed_days_before_today(cursor, date.min)
    return Rebuilt(first, last, rows, samples)
