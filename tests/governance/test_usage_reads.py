"""Showback read from the rollups equals a GROUP BY over the raw ledger and the raw GPU samples,
for ranges that start and end within a day (hours from UsageHour and the samples, whole days from
UsageDay and GpuDay); past days kept between requests answer what a late write, the backfill or a
new price changed. Real PostgreSQL, rows written by the gateway's writer and the sampler."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from rest_framework.test import APIClient

from governance.ledger import OrmSink
from governance.models import LEDGER_COLUMNS, GpuPrice, GpuSample, RequestRecord, TokenPrice
from governance.partitions import ensure_partitions
from governance.rollups import rebuild
from governance.sampling import record_samples
from governance.showback import KEPT, UsageQuery, showback

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the ledger's partitions")]

START = datetime(2025, 6, 9, tzinfo=UTC)  # long past: these days are kept between reads
TEAMS, MODELS = ("team-a", "team-b"), ("m-0", "m-1", "m-2")


def write_requests(*moments: datetime) -> None:
    """Ledger rows, one per moment, through the gateway's writer (with their rollups)."""
    rows = []
    for index, moment in enumerate(moments):
        values = {"started_at": moment, "team": TEAMS[index % 2], "username": "u", "token_name": "",
                  "model": MODELS[index % 3], "cluster_id": None, "namespace": "", "status": 200,
                  "latency_ms": 5.0, "first_byte_ms": None, "prompt_tokens": index, "completion_tokens": 2 * index,
                  "stream": False}
        rows.append(tuple(values[name] for name in LEDGER_COLUMNS))
    OrmSink().write(rows, [None] * len(rows))


def sample(moment: datetime, index: int) -> None:
    record_samples([GpuSample(sampled_at=moment, period_seconds=600, team=TEAMS[index % 2], model=MODELS[index % 3],
                              cluster_id=1, namespace="", node_pool="pool", gpu_product="NVIDIA-H100",
                              gpus=1 + index % 2, idle=index % 4 == 0)])


@pytest.fixture
def three_days(db) -> None:
    """Rows every 37 minutes and samples every 50 over three days, so every hour has some."""
    with connection.cursor() as cursor:
        ensure_partitions(cursor, [START])
    write_requests(*(START + timedelta(minutes=37 * step) for step in range(3 * 24 * 60 // 37)))
    for step in range(3 * 24 * 60 // 50):
        sample(START + timedelta(minutes=50 * step), step)
    GpuPrice.objects.create(gpu_product="NVIDIA-H100", price_per_gpu_hour=Decimal("2.5"))
    KEPT.clear()


def raw(query: UsageQuery) -> dict[tuple, tuple[int, int, int, int]]:
    """(day or None, team, model) -> requests, prompt tokens, completion tokens, GPU-seconds, summed
    over the raw ledger and the raw samples of the query's hours."""
    day = "(started_at AT TIME ZONE 'UTC')::date" if query.by_day else "NULL::date"
    sampled_day = "(sampled_at AT TIME ZONE 'UTC')::date" if query.by_day else "NULL::date"
    found: dict[tuple, list[int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {day}, team, model, count(*), sum(prompt_tokens), sum(completion_tokens) "
                       f"FROM {RequestRecord._meta.db_table} WHERE started_at >= %s AND started_at < %s "
                       f"GROUP BY 1, 2, 3", [query.since, query.until])
        for key_day, team, model, requests, prompt, completion in cursor.fetchall():
            found.setdefault((key_day, team, model), [0, 0, 0, 0])[:3] = [requests, prompt, completion]
        cursor.execute(f"SELECT {sampled_day}, team, model, sum(gpus * period_seconds) "
                       f"FROM {GpuSample._meta.db_table} WHERE sampled_at >= %s AND sampled_at < %s "
                       f"GROUP BY 1, 2, 3", [query.since, query.until])
        for key_day, team, model, seconds in cursor.fetchall():
            found.setdefault((key_day, team, model), [0, 0, 0, 0])[3] = seconds
    return {key: tuple(sums) for key, sums in found.items()}


def read(query: UsageQuery) -> dict[tuple, tuple[int, int, int, int]]:
    return {(row.day, row.team, row.model): (row.requests, row.prompt_tokens, row.completion_tokens, row.gpu_seconds)
            for row in showback(query).rows}


@pytest.mark.parametrize("by_day", [False, True])
@pytest.mark.parametrize(("start", "first_hour", "end", "last_hour"), [
    (0, 6, 2, 17),  # a partial day, a whole one, a partial one
    (0, 6, 0, 17),  # within one day
    (0, 22, 1, 1),  # across one midnight, both days in part
    (0, 0, 1, 5),  # a whole day, then part of the next
    (1, 13, 2, 23),  # part of a day, then a whole one
    (0, 0, 2, 23),  # whole days only
])
def test_rollup_reads_equal_the_raw_ledger_for_ranges_within_days(three_days, by_day, start, first_hour, end,
                                                                  last_hour) -> None:
    query = UsageQuery(None, None, START.date() + timedelta(days=start), START.date() + timedelta(days=end), by_day,
                       first_hour, last_hour)
    expected = raw(query)
    assert expected and read(query) == expected
    assert read(query) == expected  # again, from what the first read kept


def test_the_api_reads_hours_and_refuses_what_is_no_hour(three_days, make_user) -> None:
    client = APIClient()
    client.force_authenticate(make_user("root", staff=True, teams=[]))
    answer = client.get("/api/usage/?from=2025-06-09T06:00&to=2025-06-10T17:00&group_by=day&limit=1000").json()
    query = UsageQuery(None, None, date(2025, 6, 9), date(2025, 6, 10), True, 6, 17)
    assert {(date.fromisoformat(row["day"]), row["team"], row["model"]): row["requests"]
            for row in answer["results"]} == {key: sums[0] for key, sums in raw(query).items()}
    for value, field in (("2025-06-09T06:30", "from"), ("2025-06-09T06:00+02:00", "from"), ("06:00", "to")):
        refused = client.get("/api/usage/", {"from": "2025-06-01", "to": "2025-06-30", field: value})
        assert refused.status_code == 400 and value in refused.json()[field][0], refused.content
    backwards = client.get("/api/usage/?from=2025-06-09T06:00&to=2025-06-09T05:00")
    assert backwards.status_code == 400 and "before" in backwards.json()["to"][0]


def test_kept_past_days_answer_a_late_write_a_backfill_and_a_new_price(three_days) -> None:
    month = UsageQuery(frozenset(["team-a"]), None, date(2025, 6, 1), date(2025, 6, 30))
    before = showback(month)
    assert showback(month) is before  # kept: nothing changed
    write_requests(START + timedelta(days=1, hours=3))  # a late row (a replayed spool): team-a's
    after = showback(month)
    assert after.totals.requests == before.totals.requests + 1
    sample(START + timedelta(hours=2), 0)  # a late sample, team-a's: 600 GPU-seconds
    assert showback(month).totals.gpu_seconds == after.totals.gpu_seconds + 600
    rebuilt = showback(month)
    rebuild()
    assert showback(month) is not rebuilt and showback(month).totals == rebuilt.totals
    TokenPrice.objects.create(model="m-0", price_per_million_tokens=Decimal("1000"))
    assert rebuilt.totals.token_cost == 0 and showback(month).totals.token_cost > 0


def test_today_is_read_afresh_beside_kept_past_days(db) -> None:
    today = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        ensure_partitions(cursor, [today - timedelta(days=2), today])
    write_requests(today - timedelta(days=2))
    query = UsageQuery(None, None, today.date() - timedelta(days=3), today.date())
    assert sum(row.requests for row in showback(query).rows) == 1
    write_requests(today, today)  # today's rows move no version: they are read on each request
    assert sum(row.requests for row in showback(query).rows) == 3
