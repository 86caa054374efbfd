"""A plan's cached holdings (scheduler.holdings_cache) equal a fresh load_holdings after every kind of
write, and are reused, the very same tuple, while nothing a Holding is made of changed.

The write paths are the pool totals' (tests/scheduler/test_pool_totals.py): ORM saves and deletes,
queryset updates, rows marked deleted in the cluster, the bulk resync's COPY and ``UPDATE ...
FROM``, ``bulk_create``, a cluster's cascade delete, TRUNCATE, for every serving kind; and a change
of the cluster's managed kinds, which decides whether an unreported model runs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, SyncState
from clusters.postgres_only import LONGEST_INDEXED_TEXT
from clusters.sync.bulk import copy_new, staged_update
from models_app.models import InferenceModel, KubeAIModel, ModelService
from scheduler.holdings import _pool_last_requests_sql, load_holdings, serving_models, with_last_requests
from scheduler.holdings_cache import cluster_holdings
from scheduler.models import HoldingsGeneration
from tests.scheduler.conftest import make_model
from tests.scheduler.test_pool_totals import bulk_rows, kubeai, service
from tests.support.database import vacuum_analyze

pytestmark = pytest.mark.django_db(transaction=True)


def generation(cluster: Cluster) -> int | None:
    return HoldingsGeneration.objects.filter(cluster_id=cluster.pk).values_list("generation", flat=True).first()


def assert_current(cluster: Cluster) -> None:
    """The cached holdings are a fresh read's but for the last request, which with_last_requests
    reads afresh (one query, whatever the kinds), and a second plan reuses them without reading
    the rows."""
    cached = cluster_holdings(cluster.pk).holdings
    fresh = load_holdings(cluster.pk)
    with CaptureQueriesContext(connection) as queries:
        current = with_last_requests(list(cached))
    assert current == fresh
    assert len(queries) == (1 if cached else 0)
    # a holding whose last request has not moved is shared as it is, not copied
    pairs = zip(current, cached, strict=True)
    assert all((new is old) == (new.last_request_at == old.last_request_at) for new, old in pairs)
    assert [replace(h, last_request_at=None) for h in cached] == [replace(h, last_request_at=None) for h in fresh]
    assert cluster_holdings(cluster.pk).holdings is cached


@pytest.fixture
def other(db) -> Cluster:
    return Cluster.objects.create(name="other", server_url="https://10.0.0.9:6443")


def test_every_kind_through_the_orm(cluster, other):
    assert_current(cluster)
    running = make_model(cluster, "running", "40Gi", peak="30Gi", replicas=1, gpu="1")
    stopped = make_model(cluster, "stopped", "48Gi", replicas=0)
    ai = kubeai(cluster, "qwen", "gpu", 1)
    svc = service(cluster, "svc", "gpu", 2)
    assert_current(cluster)
    kinds = {holding.kind for holding in cluster_holdings(cluster.pk).holdings}
    assert kinds == {model.kube.kind for model in serving_models()}
    running.spec["memory"] = "60Gi"
    running.save()
    assert_current(cluster)
    stopped.status = {"replicas": 1}
    stopped.save()
    assert_current(cluster)
    running.annotations = {"inference.eh-ops.io/last-request-time": "2026-11-26T10:00:00+00:00"}
    running.save()  # last_active_at: what idleness is computed from
    assert_current(cluster)
    svc.spec["decode"]["nodeSelector"] = {"inference-pool": "cpu"}
    svc.spec["decode"]["replicas"] = 3
    svc.save()
    ai.status = {"replicas": {"all": 0}}
    ai.save()
    assert_current(cluster)
    make_model(other, "elsewhere", "4Gi")
    assert_current(other)
    for row in (running, ai, svc):
        row.delete()
    assert_current(cluster)
    assert [holding.name for holding in cluster_holdings(cluster.pk).holdings] == ["stopped"]


def test_queryset_writes_and_deleted_in_cluster(cluster):
    for index in range(6):
        make_model(cluster, f"m{index}", f"{index + 1}Gi", replicas=index % 2)
    assert_current(cluster)
    InferenceModel.objects.filter(name__in=["m0", "m1"]).update(sync_state=SyncState.DELETED_IN_CLUSTER)
    assert_current(cluster)
    InferenceModel.objects.filter(name="m2").update(running_replicas=3, node_pool="elsewhere")
    assert_current(cluster)
    InferenceModel.objects.filter(name="m3").update(status={"recommendation": "reduce memory from 4Gi to 2Gi"})
    assert_current(cluster)
    InferenceModel.objects.filter(name__in=["m3", "m4"]).delete()
    InferenceModel.objects.filter(name="m0").update(sync_state=SyncState.SYNCED)
    assert_current(cluster)


def test_bulk_ingest_paths_cascades_and_truncate(cluster, other):
    rows = bulk_rows(cluster, 30)
    assert_current(cluster)
    with transaction.atomic():
        copy_new(InferenceModel, rows, len(rows))
    assert_current(cluster)
    for row in rows[:10]:
        row.spec["memory"] = "33Gi"
        row.status = {"replicas": 1}
        row.project()
    with transaction.atomic():
        staged_update(InferenceModel, rows[:10], ["cluster", "namespace", "name"],
                      ["spec", "status", *InferenceModel.projected_fields()])  # fmt: skip
    assert_current(cluster)
    make_model(other, "kept", "2Gi")
    assert_current(other)
    InferenceModel.objects.bulk_create(
        [InferenceModel(cluster=other, namespace="x", name=f"b{i}", sync_state=SyncState.SYNCED, spec=rows[i].spec,
                        status=rows[i].status, **{f: getattr(rows[i], f) for f in InferenceModel.projected_fields()})
         for i in range(5)]
    )  # fmt: skip
    assert_current(other)
    service(other, "svc", "pool-1", 1)
    kubeai(other, "qwen", "pool-1", 1)
    assert_current(other)
    other_id, before = other.pk, generation(other)
    other.delete()  # cascades to its models
    assert cluster_holdings(other_id).holdings == ()
    assert generation(Cluster(pk=other_id)) not in (None, before)
    assert_current(cluster)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {InferenceModel._meta.db_table} CASCADE")
    assert_current(cluster)
    assert cluster_holdings(cluster.pk).holdings == ()


def test_the_managed_kinds_decide_what_an_unreported_model_holds(cluster):
    make_model(cluster, "unreported", "8Gi", replicas=None)
    assert_current(cluster)
    assert cluster_holdings(cluster.pk).holdings[0].running
    cluster.managed_kinds = ["InferenceModel"]
    cluster.save()
    assert_current(cluster)
    assert not cluster_holdings(cluster.pk).holdings[0].running


def test_only_what_a_holding_reads_moves_the_generation(cluster, other):
    model = make_model(cluster, "m", "8Gi", utilizationPercent=10)
    elsewhere = make_model(other, "n", "8Gi")
    before = generation(cluster)
    assert before is not None
    # what the status reports besides replicas and the recommendation: utilization, conditions, phase
    model.status = {**model.status, "utilizationPercent": 90, "conditions": [{"type": "Ready", "status": "True"}]}
    model.save()
    InferenceModel.objects.filter(pk=model.pk).update(sync_state=SyncState.PENDING_APPLY, last_error="retrying")
    KubeAIModel.objects.filter(cluster=cluster).update(last_error="none there")
    elsewhere.spec["memory"] = "9Gi"
    elsewhere.save()
    assert generation(cluster) == before
    assert InferenceModel.objects.get(pk=model.pk).utilization_percent == 90  # the write happened
    # nor the last request, which the gateway stamps every few seconds on a model in use
    InferenceModel.objects.filter(pk=model.pk).update(last_active_at=datetime(2026, 11, 26, 10, 0, tzinfo=UTC))
    assert generation(cluster) == before
    InferenceModel.objects.filter(pk=model.pk).update(memory_bytes=1)
    last = generation(cluster)
    assert last != before
    ModelService.objects.filter(cluster=cluster).delete()  # no row: nothing changed
    assert generation(cluster) == last


def test_the_version_moves_with_the_holdings_and_only_with_them(cluster):
    model = make_model(cluster, "m", "8Gi")
    first = cluster_holdings(cluster.pk)
    InferenceModel.objects.filter(pk=model.pk).update(last_active_at=datetime(2026, 11, 26, 10, 0, tzinfo=UTC))
    assert cluster_holdings(cluster.pk).version == first.version  # the last request is read afresh by a plan
    InferenceModel.objects.filter(pk=model.pk).update(memory_bytes=1)
    moved = cluster_holdings(cluster.pk)
    assert moved.version != first.version
    HoldingsGeneration.objects.filter(cluster_id=cluster.pk).delete()  # no generation: read, versioned by content
    by_content = cluster_holdings(cluster.pk)
    assert by_content.holdings == moved.holdings and by_content.version not in (first.version, moved.version)
    assert cluster_holdings(cluster.pk).version == by_content.version
    InferenceModel.objects.filter(pk=model.pk).update(memory_bytes=2)
    assert cluster_holdings(cluster.pk).version not in (first.version, moved.version, by_content.version)


def test_last_requests_are_read_afresh_at_every_read(cluster, other):
    """Last requests stamped after the holdings were kept (no generation moves) are what each read
    sees, for every kind and pool, a pool name too long for the (cluster, pool, memory) index
    included, in one query: what a process keeps of the read is its SQL, never its values."""
    long_pool = "p" * (LONGEST_INDEXED_TEXT + 1)
    models = [make_model(cluster, f"m-{pool[:3]}", "8Gi", pool=pool) for pool in ("gpu", "cpu", long_pool)]
    models += [kubeai(cluster, "qwen", "gpu", 1), service(cluster, "svc", "gpu", 1), make_model(other, "n", "8Gi")]
    kept = [holding for holding in cluster_holdings(cluster.pk).holdings if holding.running]
    assert {(holding.kind, holding.pool) for holding in kept} == {
        ("InferenceModel", "gpu"), ("InferenceModel", "cpu"), ("InferenceModel", long_pool),
        ("Model", "gpu-l4"), ("ModelService", "gpu"),
    }  # fmt: skip
    for hour in (10, 11):
        for row in models:
            type(row).objects.filter(pk=row.pk).update(
                last_active_at=datetime(2026, 11, 26, hour, row.pk % 60, tzinfo=UTC)
            )
        with CaptureQueriesContext(connection) as queries:
            current = with_last_requests(kept)
        assert len(queries) == 1
        assert [holding.last_request_at.hour for holding in current] == [hour] * len(kept)
        assert current == [holding for holding in load_holdings(cluster.pk) if holding.running]
        assert [holding for holding in cluster_holdings(cluster.pk).holdings if holding.running] == kept


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plans")
def test_a_pools_last_requests_are_read_from_the_index_alone(cluster):
    """Each kind's pool is read by an index-only scan of its (cluster, pool, memory) index, which
    carries the id and the last request (models_app migration 0014): a row's heap page is visited
    only where it changed since the last vacuum (2,000 pages of a 10,000-model cluster's pool before)."""
    rows = [make_model(cluster, f"m-{index}", "8Gi", pool="gpu") for index in range(20)]
    rows += [kubeai(cluster, "qwen", "gpu-l4", 1), service(cluster, "svc", "gpu", 1)]
    for model in serving_models():
        vacuum_analyze(model._meta.db_table)  # an index-only read's visibility map
    pools = {(type(row).kube.kind, row.node_pool) for row in rows}
    assert len(pools) == 3
    for part, (kind, pool) in enumerate(sorted(pools)):
        sql, params = _pool_last_requests_sql(part, kind, cluster.pk, pool)
        table = next(model for model in serving_models() if model.kube.kind == kind)._meta.db_table
        with transaction.atomic(), connection.cursor() as cursor:
            for method in ("seqscan", "bitmapscan"):  # what the index allows, which a few rows here would not show
                cursor.execute(f"SET LOCAL enable_{method} = off")
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            plan = cursor.fetchone()[0]
        top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
        assert (top["Node Type"], top["Index Name"], top["Heap Fetches"]) == (
            "Index Only Scan", f"{table}_pool_memory", 0), top  # fmt: skip
