"""Per-pool accounting with running, scaled-to-zero, reserved and unknown-replica models."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from clusters.postgres_only import LONGEST_INDEXED_TEXT
from models_app.models import InferenceModel
from scheduler.admission.accounting import pool_accounts
from scheduler.holdings import Holding
from scheduler.models import MemoryReservation
from tests.scheduler.conftest import GI, NOW, make_model, make_pool


def test_accounting_mixes_running_and_scaled_to_zero(cluster, gpu_pool):
    make_model(cluster, "llama-70b", "40Gi", peak="30Gi", replicas=1)
    make_model(cluster, "mistral", "8Gi", peak="7Gi", replicas=1)
    make_model(cluster, "codellama", "48Gi", peak="30Gi", replicas=0)  # scaled to zero: holds nothing
    make_model(cluster, "fresh", "4Gi", replicas=None)  # status unknown: spec.maxReplicas (1) counts
    make_model(cluster, "elsewhere", "16Gi", pool="cpu")  # a pool without a NodePool row

    accounts = {a.pool: a for a in pool_accounts(cluster.pk)}

    gpu = accounts["gpu"]
    assert gpu.budget_bytes == 100 * GI
    assert gpu.allocated_bytes == (40 + 8 + 4) * GI
    assert gpu.observed_bytes == (30 + 7) * GI
    assert gpu.free_bytes == (100 - 52) * GI
    assert [h.name for h in gpu.holders] == ["llama-70b", "mistral", "fresh"]  # biggest first
    # right-sizing's verdicts: ceil(peak x 1.04) in Gi -> 30Gi -> 32Gi (saves 8Gi), 7Gi -> 8Gi (saves 0)
    assert gpu.rightsizing_savings_bytes == 8 * GI
    cpu = accounts["cpu"]
    assert (cpu.budget_bytes, cpu.free_bytes, cpu.allocated_bytes) == (None, None, 16 * GI)


def test_reservations_count_once_beside_running_models(cluster, gpu_pool):
    make_model(cluster, "running", "10Gi")
    MemoryReservation.objects.create(pool=gpu_pool, kind="InferenceModel", namespace="default", name="running",
                                     memory_bytes=10 * GI)  # fmt: skip
    MemoryReservation.objects.create(pool=gpu_pool, kind="InferenceModel", namespace="default", name="starting",
                                     memory_bytes=20 * GI)  # fmt: skip

    (gpu,) = pool_accounts(cluster.pk)

    assert (gpu.allocated_bytes, gpu.reserved_bytes, gpu.free_bytes) == (10 * GI, 20 * GI, 70 * GI)


def test_recommender_plugs_in_as_mapping_or_callable(cluster, gpu_pool):
    big = make_model(cluster, "big", "80Gi", peak="75Gi")
    key = ("InferenceModel", cluster.pk, "default", "big")

    assert pool_accounts(cluster.pk)[0].rightsizing_savings_bytes == 2 * GI  # 75Gi x 1.04 -> 78Gi
    assert pool_accounts(cluster.pk, recommender={key: 60 * GI})[0].rightsizing_savings_bytes == 20 * GI
    halve = lambda holding: holding.memory_bytes // 2  # noqa: E731
    assert pool_accounts(cluster.pk, recommender=halve)[0].rightsizing_savings_bytes == 40 * GI
    # a newer recommendation in the status is what counts
    InferenceModel.objects.filter(pk=big.pk).update(
        status={"replicas": 1, "recommendation": "Consider reducing memory from 80Gi to 70Gi (observed peak 75Gi)"}
    )
    assert pool_accounts(cluster.pk)[0].rightsizing_savings_bytes == 10 * GI


def test_a_model_right_sizing_has_not_judged_saves_nothing(cluster, gpu_pool):
    make_model(cluster, "unjudged", "80Gi", peak="75Gi", recommendation="")
    assert pool_accounts(cluster.pk)[0].rightsizing_savings_bytes == 0


def test_idle_means_running_with_last_request_older_than_cooldown(cluster):
    def holding(**kwargs) -> Holding:
        base = dict(kind="InferenceModel", id=1, cluster_id=cluster.pk, namespace="d", name="m", pool="p",
                    memory_bytes=GI, replicas=1, cooldown=timedelta(minutes=15))  # fmt: skip
        return Holding(**{**base, **kwargs})

    assert holding(last_request_at=NOW - timedelta(minutes=20)).idle_since(NOW) == NOW - timedelta(minutes=5)
    assert holding(last_request_at=NOW - timedelta(minutes=10)).idle_since(NOW) is None
    assert holding(last_request_at=NOW - timedelta(hours=2), replicas=0).idle_since(NOW) is None
    assert holding(last_request_at=None).idle_since(NOW) is None


def test_deleted_in_cluster_and_other_clusters_hold_nothing(cluster, gpu_pool):
    from clusters.models import Cluster, SyncState

    gone = make_model(cluster, "gone", "50Gi")
    InferenceModel.objects.filter(pk=gone.pk).update(sync_state=SyncState.DELETED_IN_CLUSTER)
    other = Cluster.objects.create(name="other", server_url="https://other:6443")
    make_pool(other, "gpu", budget="10Gi")
    make_model(other, "theirs", "9Gi")

    (gpu,) = pool_accounts(cluster.pk)
    assert gpu.allocated_bytes == 0
    assert [(a.cluster_name, a.allocated_bytes) for a in pool_accounts()] == [("other", 9 * GI), ("prod", 0)]


def test_default_savings_in_sql_match_the_python_policy(cluster, gpu_pool):
    from scheduler.savings import default_recommended_bytes

    for index, (memory, peak) in enumerate([("80Gi", "75Gi"), ("10Gi", "9500Mi"), ("7Gi", "6Gi"), ("33Gi", "1Gi"),
                                            ("40Gi", "38462Mi"), ("3Gi", "3Gi"), ("64Gi", "61.5Gi")]):  # fmt: skip
        make_model(cluster, f"m{index}", memory, peak=peak)
    in_sql = pool_accounts(cluster.pk)[0].rightsizing_savings_bytes
    in_python = pool_accounts(cluster.pk, recommender=default_recommended_bytes)[0].rightsizing_savings_bytes
    assert in_sql == in_python > 0


def test_biggest_holders_per_pool_whatever_the_pool_name_length(cluster, gpu_pool):
    """``per_pool`` keeps each pool's biggest running models; a pool name longer than the
    (cluster, pool, memory) index covers is found without it, with the same answer."""
    long_pool = "p" * (LONGEST_INDEXED_TEXT + 100)
    for pool in ("gpu", long_pool):
        for size in (8, 40, 16, 24):
            make_model(cluster, f"run-{size}-{len(pool)}", f"{size}Gi", pool=pool, replicas=1)
        for size in (4, 48, 12):
            make_model(cluster, f"stop-{size}-{len(pool)}", f"{size}Gi", pool=pool, replicas=0)

    shown = {a.pool: a for a in pool_accounts(cluster.pk, per_pool=2)}
    whole = {a.pool: a for a in pool_accounts(cluster.pk)}

    for pool in ("gpu", long_pool):
        assert [h.memory_bytes // GI for h in shown[pool].holders] == [40, 24]
        assert shown[pool].holders == whole[pool].holders[:2]
        assert (shown[pool].holders_total, shown[pool].allocated_bytes) == (4, (8 + 40 + 16 + 24) * GI)


def test_a_pool_of_stopped_models_only_is_listed_holding_nothing(cluster, gpu_pool):
    make_model(cluster, "running", "8Gi", replicas=1)
    make_model(cluster, "parked", "16Gi", pool="parking", replicas=0)

    for per_pool in (5, None):
        accounts = {a.pool: a for a in pool_accounts(cluster.pk, per_pool=per_pool)}
        assert (accounts["parking"].allocated_bytes, accounts["parking"].holders) == (0, [])
        assert [h.name for h in accounts["gpu"].holders] == ["running"]


def test_a_pool_only_models_name_carries_its_clusters_name_read_once(cluster, gpu_pool):
    """A pool without a NodePool row is named after its cluster: from the cluster's NodePool rows
    when it has some (no query for every cluster's name), else read from the clusters."""
    bare = Cluster.objects.create(name="bare", server_url="https://10.0.0.9:6443")
    make_model(cluster, "elsewhere", "16Gi", pool="cpu")
    make_model(bare, "alone", "8Gi", pool="cpu")
    names_read = f'SELECT "{Cluster._meta.db_table}"."id" AS "id", "{Cluster._meta.db_table}"."name" AS "name"'
    with CaptureQueriesContext(connection) as queries:
        accounts = pool_accounts(cluster.pk)
    assert [(a.cluster_name, a.pool, a.budget_bytes) for a in accounts] == [("prod", "cpu", None),
                                                                            ("prod", "gpu", 100 * GI)]
    assert not [q for q in queries.captured_queries if q["sql"].startswith(names_read)]
    assert [(a.cluster_name, a.pool) for a in pool_accounts(bare.pk)] == [("bare", "cpu")]
    assert [(a.cluster_name, a.pool) for a in pool_accounts()] == [("bare", "cpu"), ("prod", "cpu"), ("prod", "gpu")]
