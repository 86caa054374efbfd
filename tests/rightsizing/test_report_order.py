"""The report's default order (biggest saving first, unknown savings last) is read from an index
on PostgreSQL: the dashboard's top savings and the page's first page stop after a page of rows
instead of sorting every object's latest observation (82 ms at 100,000 objects)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from clusters.models import Cluster
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.report import build_report

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plans"),
]


def node_types(plan: dict[str, Any]) -> list[str]:
    return [plan["Node Type"], *(kind for child in plan.get("Plans", []) for kind in node_types(child))]


def test_the_biggest_savings_are_read_in_index_order() -> None:
    cluster = Cluster.objects.create(name="c", auth_method=Cluster.AuthMethod.SNAPSHOT)
    refresh = Refresh.objects.create(cluster=cluster, started_at=timezone.now(), window_seconds=3600)
    Observation.objects.bulk_create(
        Observation(
            refresh=refresh, cluster=cluster, object_id=index, name=f"m-{index}", observed_at=refresh.started_at,
            freed_bytes=None if index % 7 == 0 else (index * 7919) % 1000 - 300,
        )
        for index in range(3_000)
    )
    top = build_report(Observation.objects.all(), ordering="-freed_bytes")[:8]
    sql, params = top.query.sql_with_params()
    with connection.cursor() as cursor:
        # statistics of these rows, not of whatever an earlier test left; a few thousand rows are
        # cheap to scan whole: whether the index is read in order is what is asked
        cursor.execute(f"ANALYZE {Observation._meta.db_table}")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    plan = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    assert "Sort" not in node_types(plan)  # an Incremental Sort only orders ties of one saving
    freed = [row.freed_bytes for row in top]
    assert freed == sorted(freed, reverse=True) and None not in freed and len(freed) == 8
