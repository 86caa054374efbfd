"""Monthly partitions of the ledger and its retention (PostgreSQL), time given by the test."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from governance.models import RequestRecord
from governance.partitions import existing_partitions, maintain

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'postgresql'", reason="partitions are PostgreSQL's")]


def record(at: datetime) -> RequestRecord:
    return RequestRecord.objects.create(started_at=at, team="t", username="u", model="m", status=200, latency_ms=1)


def partitions() -> list[str]:
    with connection.cursor() as cursor:
        return [name[-8:] for name in existing_partitions(cursor)]


def test_next_months_are_created_and_months_past_retention_dropped() -> None:
    maintain(datetime(2031, 1, 15, tzinfo=UTC), retention_months=3)
    assert {"y2031m01", "y2031m02", "y2031m03"} <= set(partitions())
    record(datetime(2031, 1, 31, 23, 59, tzinfo=UTC))
    record(datetime(2031, 3, 1, tzinfo=UTC))

    dropped = maintain(datetime(2031, 4, 2, tzinfo=UTC), retention_months=3)  # keeps February to April

    assert "governance_requestrecord_y2031m01" in dropped
    assert "y2031m01" not in partitions() and {"y2031m02", "y2031m05", "y2031m06"} <= set(partitions())
    assert list(RequestRecord.objects.filter(started_at__year=2031).values_list("started_at__month", flat=True)) == [3]


def test_the_writer_creates_the_partition_a_row_finds_missing() -> None:
    from governance.ledger import PostgresSink, conninfo_of

    sink = PostgresSink(conninfo_of(connection.settings_dict))
    at = datetime(2035, 7, 4, 12, tzinfo=UTC)
    try:
        sink.write([(at, "t", "u", "k", "m", None, "", 200, 1.0, None, 1, 2, False)], [None])
    finally:
        sink.close()
    assert "y2035m07" in partitions()
    assert RequestRecord.objects.get(started_at=at).completion_tokens == 2
