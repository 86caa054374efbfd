"""The bulk ingest's statements on PostgreSQL (no cluster needed: pages are handed to it as a
resync lists them): each page's lookup reads the rows of its own objects only, and the bulk update
stores exactly what the one-by-one path would, audit diff included."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.kinds import all_models
from clusters.models import AuditEntry, Cluster, SyncState
from clusters.sync.ingest import ingest_items
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's bulk paths")


def listed(count: int, generation: int = 1, prefix: str = "m") -> list[dict[str, Any]]:
    """``count`` objects as a cluster lists them; ``generation`` changes spec and annotations."""
    sample = sample_manifest("inferencemodel-mistral-7b.yaml", "team")
    items = []
    for index in range(count):
        item = copy.deepcopy(sample)
        item["metadata"].update(
            name=f"{prefix}-{index}", uid=f"uid-{prefix}-{index}", resourceVersion=f"{generation}{index:06d}",
            labels={"team": "a", "env": "prod"}, annotations={"note": f"generation {generation}"},
        )
        item["spec"]["cooldownPeriod"] = f"{generation * 10}m"
        items.append(item)
    return items


def scanned_rows(plan: dict[str, Any], table: str) -> int:
    """Rows the plan's scans of ``table`` read (produced or removed by a filter), over all their loops."""
    per_loop = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
    own = per_loop * plan["Actual Loops"] if plan.get("Relation Name") == table else 0
    return own + sum(scanned_rows(child, table) for child in plan.get("Plans", []))


def rows_the_lookup_reads(cluster: Cluster, items: list[dict[str, Any]]) -> int:
    """Rows of the mirror table the state lookup of ``items`` (unchanged: the lookup only) reads."""
    with CaptureQueriesContext(connection) as queries:
        ingest_items(InferenceModel, cluster, items, timezone.now())
    (lookup,) = [query["sql"] for query in queries.captured_queries if "unnest(" in query["sql"]]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {lookup}")
        plan = cursor.fetchone()[0]
    plan = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return scanned_rows(plan, InferenceModel._meta.db_table)


def test_a_pages_lookup_reads_only_its_own_objects_rows(cluster) -> None:
    """The state lookup of a page of 5 objects in a cluster of 2,000 rows reads 5 rows, not 2,000
    (a hash join over the cluster's rows for every page made a relist quadratic in its objects)."""
    ingest_items(InferenceModel, cluster, listed(2_000), timezone.now())
    assert rows_the_lookup_reads(cluster, listed(5)) == 5


def test_a_cluster_newer_than_the_statistics_is_looked_up_by_object_too(cluster) -> None:
    """A cluster added after the table was analyzed: the planner believes it has no rows. With an
    index on the cluster alone it walked the cluster's rows once per object, filtering by name
    (a first resync of 10,000 objects beside 100,000 others took 0.7 s per page of 500)."""
    ingest_items(InferenceModel, cluster, listed(2_000), timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {InferenceModel._meta.db_table}")
    newer = Cluster.objects.create(name="newer", server_url="https://10.0.0.2:6443")
    ingest_items(InferenceModel, newer, listed(1_000), timezone.now())
    assert rows_the_lookup_reads(newer, listed(5)) == 5


def test_a_changed_page_is_stored_and_audited_field_by_field(cluster) -> None:
    ingest_items(InferenceModel, cluster, listed(3), timezone.now())
    changed = listed(3, generation=2)
    del changed[1]["metadata"]["labels"]["team"]
    changed[2]["metadata"]["labels"]["tier"] = "gold"
    assert ingest_items(InferenceModel, cluster, changed, timezone.now()) == 3

    rows = {row.name: row for row in InferenceModel.objects.filter(cluster=cluster)}
    for item in changed:
        row = rows[item["metadata"]["name"]]
        assert (row.spec, row.labels, row.annotations) == (
            item["spec"], item["metadata"]["labels"], item["metadata"]["annotations"])
        assert row.base_document() == row.desired_document() and row.sync_state == SyncState.SYNCED
        assert row.cooldown_seconds == 1200 and row.resource_version == item["metadata"]["resourceVersion"]
    changes = {
        entry.name: entry.changes
        for entry in AuditEntry.objects.filter(cluster=cluster, action=AuditEntry.Action.UPDATED)
    }
    common = [
        {"path": "spec.cooldownPeriod", "old": "10m", "new": "20m"},
        {"path": "annotations.note", "old": "generation 1", "new": "generation 2"},
    ]
    assert changes == {
        "m-0": common,
        "m-1": [common[0], {"path": "labels.team", "old": "a", "new": None}, common[1]],
        "m-2": [common[0], {"path": "labels.tier", "old": None, "new": "gold"}, common[1]],
    }


def updates_in_this_transaction(table: str) -> tuple[int, int]:
    """(rows updated, of which HOT: written without touching any index) by this transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated(%s::regclass), pg_stat_get_xact_tuples_hot_updated(%s::regclass)",
            [table, table],
        )
        return cursor.fetchone()


def test_a_relist_of_changed_objects_inserts_into_no_index(cluster) -> None:
    """A relist that finds every object's spec, annotations and status changed (nothing indexed)
    updates its rows in place, as heap-only tuples: mirror tables leave room in their pages for
    that (clusters.postgres_only.room_for_updates). Pages filled to the brim made each update
    insert into all 18 indexes of the table."""
    table = InferenceModel._meta.db_table
    ingest_items(InferenceModel, cluster, listed(500), timezone.now())
    before = updates_in_this_transaction(table)
    assert ingest_items(InferenceModel, cluster, listed(500, generation=2), timezone.now()) == 500
    updated, hot = (now - then for now, then in zip(updates_in_this_transaction(table), before, strict=True))
    assert (updated, hot) == (500, 500)


def test_every_mirror_table_leaves_room_for_updates(db) -> None:
    """A kind registered later gets the same storage (its migration calls room_for_updates)."""
    tables = [model._meta.db_table for model in all_models()]
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s)", [tables])
        options = dict(cursor.fetchall())
    assert options == {table: ["fillfactor=50"] for table in tables}
