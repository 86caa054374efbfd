"""Usage rollups kept by the ledger's real writer equal the sums over the raw ledger, whatever
fails: a row set aside, a transaction that fails after its COPY (a lock the rollup cannot get),
a dead gateway's spool replayed from its mark; the backfill rebuilds the same sums and keeps the
rollups of a month whose raw partition retention dropped. GPU-hours accrue from what a team's
models hold. Real PostgreSQL, the writer's own connection."""

from __future__ import annotations

import asyncio
import io
import os
from datetime import UTC, date, datetime, timedelta

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import NamespaceGrant, Team
from governance.ledger import LedgerWriter, PostgresSink, conninfo_of
from governance.models import (
    LEDGER_COLUMNS,
    GpuDay,
    LatencyDay,
    RequestRecord,
    SetAsideRecord,
    UsageDay,
    UsageHour,
)
from governance.partitions import ensure_partitions, maintain
from governance.rollups import latency_bucket, rebuild
from governance.showback import UsageQuery, daily_latency, showback
from governance.spool import Spool
from governance.tasks import sample_gpu_holdings
from tests.scheduler.conftest import make_model, make_pool

AT = datetime(2026, 11, 28, 22, 40, tzinfo=UTC)  # rows span an hour and a day boundary from here

postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="COPY to PostgreSQL")


def ledger_row(index: int, **values: object) -> tuple:
    """A varied row: three teams, four models, minutes apart across midnight, latencies 1..400 ms."""
    base = {"started_at": AT + timedelta(minutes=7 * index), "team": f"team-{index % 3}", "username": "u",
            "token_name": "k", "model": f"m-{index % 4}", "cluster_id": None, "namespace": "ns", "status": 200,
            "latency_ms": 1.0 + (index * 37) % 400, "first_byte_ms": None, "prompt_tokens": index,
            "completion_tokens": 2 * index, "stream": False}
    base.update(values)
    return tuple(base[name] for name in LEDGER_COLUMNS)


def assert_rollups_equal_the_raw_ledger() -> int:
    """Every rollup against a GROUP BY over the raw ledger; returns the number of raw rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT date_trunc('hour', started_at AT TIME ZONE 'UTC'), team, model, count(*), "
                       f"sum(prompt_tokens), sum(completion_tokens) FROM {RequestRecord._meta.db_table} "
                       f"GROUP BY 1, 2, 3")
        raw_hours = {(hour.replace(tzinfo=UTC), team, model): (n, p, c) for hour, team, model, n, p, c in cursor}
    hours = {(row.hour, row.team, row.model): (row.requests, row.prompt_tokens, row.completion_tokens)
             for row in UsageHour.objects.all()}
    assert hours == raw_hours
    raw_days: dict[tuple, list[int]] = {}
    for (hour, team, model), sums in raw_hours.items():
        day = raw_days.setdefault((hour.date(), team, model), [0, 0, 0])
        for position, value in enumerate(sums):
            day[position] += value
    days = {(row.day, row.team, row.model): [row.requests, row.prompt_tokens, row.completion_tokens]
            for row in UsageDay.objects.all()}
    assert days == raw_days
    raw_latency: dict[tuple, int] = {}
    for started_at, team, latency in RequestRecord.objects.values_list("started_at", "team", "latency_ms"):
        key = (started_at.astimezone(UTC).date(), team, latency_bucket(latency))
        raw_latency[key] = raw_latency.get(key, 0) + 1
    assert {(row.day, row.team, row.bucket): row.requests for row in LatencyDay.objects.all()} == raw_latency
    return RequestRecord.objects.count()


@pytest.fixture
def sink(transactional_db):
    with connection.cursor() as cursor:
        ensure_partitions(cursor, [AT, AT + timedelta(days=40)])
    # lock_timeout: a rollup row another transaction holds fails this writer's transaction at once
    opened = PostgresSink(conninfo_of(connection.settings_dict) + " options='-c lock_timeout=200'")
    yield opened
    opened.close()


@postgres_only
def test_rollups_equal_the_raw_ledger_whatever_fails_mid_flush(sink, tmp_path) -> None:
    # 1. a batch with a row the database refuses (set aside: in neither the ledger nor the rollups)
    first = [ledger_row(index) for index in range(40)]
    first[7] = ledger_row(7, status="not a status")
    assert sink.write(first, [None] * 40) == 40
    assert SetAsideRecord.objects.count() == 1
    assert assert_rollups_equal_the_raw_ledger() == 39

    # 2. the writer's flush fails after its COPY, in the transaction (another transaction holds the
    #    day rollups): nothing of the batch stays, rows or rollups; the rows wait and are written once
    writer = LedgerWriter(sink, capacity=1000, batch=25, interval=3600)
    for index in range(40, 100):
        writer.add(ledger_row(index))
    holder = psycopg.connect(conninfo_of(connection.settings_dict), autocommit=False)
    try:
        holder.execute(f"LOCK TABLE {UsageDay._meta.db_table} IN EXCLUSIVE MODE")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            asyncio.run(writer.flush())
        assert len(writer.queue) == 60  # the failed batch's rows still queued
        assert assert_rollups_equal_the_raw_ledger() == 39
    finally:
        holder.rollback()
        holder.close()
    asyncio.run(writer.flush())
    assert not writer.queue
    assert assert_rollups_equal_the_raw_ledger() == 99

    # 3. a dead gateway's spool: its first rows were written (its mark says so) before it died;
    #    the next writer replays the rest once
    dead = Spool(tmp_path)
    spooled = [ledger_row(index) for index in range(100, 130)]
    marks = [dead.append(row) for row in spooled]
    sink.write(spooled[:10], [(dead.name, mark) for mark in marks[:10]])
    os.close(dead.fd)  # the process is gone, its lock with it
    replaying = LedgerWriter(sink, capacity=1000, batch=8, interval=3600, spool_folder=tmp_path)
    replaying.spool = Spool(tmp_path)
    replaying._recover()
    replaying._recover()  # nothing left to replay: no row counted twice
    replaying.spool.close(remove=True)
    assert assert_rollups_equal_the_raw_ledger() == 129

    # 4. the backfill finds the same sums, twice over (idempotent)
    before = sorted(UsageDay.objects.values_list("day", "team", "model", "requests", "prompt_tokens",
                                                 "completion_tokens"))
    out = io.StringIO()
    call_command("backfill_usage_rollups", stdout=out)
    assert "rebuilt from 129 rows" in out.getvalue()
    rebuild()
    assert assert_rollups_equal_the_raw_ledger() == 129
    assert sorted(UsageDay.objects.values_list("day", "team", "model", "requests", "prompt_tokens",
                                               "completion_tokens")) == before


@postgres_only
def test_rollups_outlive_a_dropped_partition_and_the_backfill_keeps_them(sink) -> None:
    old = datetime(2025, 3, 10, 12, tzinfo=UTC)
    with connection.cursor() as cursor:
        ensure_partitions(cursor, [old])
    sink.write([ledger_row(index, started_at=old) for index in range(5)], [None] * 5)
    sink.write([ledger_row(index) for index in range(10)], [None] * 10)
    dropped = maintain(AT, retention_months=13)  # keeps 2025-11 onwards: March 2025's raw rows go
    assert "governance_requestrecord_y2025m03" in dropped
    assert RequestRecord.objects.filter(started_at__lt=AT - timedelta(days=100)).count() == 0
    march = UsageQuery(None, None, date(2025, 3, 1), date(2025, 3, 31))
    assert sum(row.requests for row in showback(march).rows) == 5  # showback of the month still answers
    done = rebuild()
    assert done.first_day == AT.date() and done.ledger_rows == 10
    assert sum(row.requests for row in showback(march).rows) == 5  # the backfill left March alone
    assert sum(row.requests for row in showback(UsageQuery(None, None, AT.date(), AT.date() + timedelta(1))).rows) == 10


@postgres_only
def test_daily_latency_is_read_from_the_histograms_within_five_percent(sink) -> None:
    sink.write([ledger_row(0, latency_ms=float(ms), team="t", started_at=AT - timedelta(hours=1))
                for ms in range(1, 101)], [None] * 100)
    p50, p95 = daily_latency(UsageQuery(frozenset(["t"]), None, AT.date(), AT.date()))[AT.date()]
    assert 50 <= p50 <= 50 * 1.05 and 95 <= p95 <= 95 * 1.05


@pytest.mark.django_db
def test_gpu_hours_accrue_for_a_team_holding_gpus_after_a_sampling_pass(cluster, make_user) -> None:
    """The pass the demo runs itself and beat runs elsewhere: a team's model holding 2 GPUs shows
    GPU-hours on /api/usage/ once a sample is taken, read from the GPU rollup."""
    team = Team.objects.create(name="holders")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace="team-ns")
    make_pool(cluster, "gpu", nodes=["96Gi"], gpus=4)
    make_model(cluster, "busy", "10Gi", namespace="team-ns", gpu="2", last_request=datetime.now(UTC))
    member = make_user("holder", teams=[team])
    client = APIClient()
    client.force_authenticate(member)
    before = client.get("/api/usage/").json()
    assert sum(row["gpu_hours"] for row in before["results"]) == 0 and before["totals"]["gpu_hours"] == 0
    assert sample_gpu_holdings(60) == 2  # the team's model, and the pool's 2 GPUs nobody held
    rows = client.get("/api/usage/").json()["results"]
    assert [(row["team"], row["model"], row["gpu_hours"]) for row in rows] == [("holders", "team-ns/busy",
                                                                                round(2 * 60 / 3600, 4))]
    assert GpuDay.objects.get(team="holders").gpu_seconds == 120
