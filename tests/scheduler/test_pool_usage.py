"""The SQL totals (scheduler.admission.usage) agree with the full books (admission.accounting) in every case."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, SyncState
from models_app.models import ModelService
from scheduler.admission.accounting import pool_accounts
from scheduler.admission.usage import pool_usage
from scheduler.models import MemoryReservation
from tests.scheduler.conftest import GI, make_model, make_pool


def _totals(accounts) -> list[tuple]:
    return [
        (a.cluster_name, a.pool, a.budget_bytes, a.allocated_bytes, a.reserved_bytes, a.observed_bytes, a.gpus_used)
        for a in accounts
    ]


@pytest.fixture
def mixed(cluster, gpu_pool) -> Cluster:
    """Every case the running rule distinguishes, in a mirrored and a portal-controlled cluster."""
    controlled = Cluster.objects.create(
        name="managed", server_url="https://10.0.0.2:6443", managed_kinds=["InferenceModel"]
    )
    managed_pool = make_pool(controlled, "gpu", budget="50Gi")
    for target in (cluster, controlled):
        make_model(target, "running", "40Gi", peak="30Gi", replicas=1)
        make_model(target, "stopped", "48Gi", peak="30Gi", replicas=0)
        make_model(target, "unknown", "4Gi", replicas=None)  # mirrored: spec.maxReplicas; controlled: not yet
        make_model(target, "float", "6Gi", replicas=2.0)  # not an integer: as unknown
        make_model(target, "flag", "7Gi", replicas=True)  # a boolean is no count
        make_model(target, "text", "9Gi", replicas="3")
        make_model(target, "elsewhere", "16Gi", pool="cpu", peak="2Gi")  # a pool without a NodePool row
        gone = make_model(target, "gone", "30Gi")
        type(gone).objects.filter(pk=gone.pk).update(sync_state=SyncState.DELETED_IN_CLUSTER)
    service = ModelService(cluster=cluster, namespace="default", name="svc", sync_state=SyncState.SYNCED, spec={
        "model": {"name": "q"}, "accelerator": {"type": "nvidia"},
        "decode": {"replicas": 2, "resources": {"requests": {"memory": "8Gi"}},
                   "nodeSelector": {"inference-pool": "gpu"}},
    })  # fmt: skip
    service.save()
    for pool, name, amount in [(gpu_pool, "running", 50), (gpu_pool, "starting", 20), (managed_pool, "unknown", 10)]:
        MemoryReservation.objects.create(
            pool=pool, kind="InferenceModel", namespace="default", name=name, memory_bytes=amount * GI
        )
    return controlled


def test_sql_totals_match_the_books(mixed):
    assert _totals(pool_usage()) == _totals(pool_accounts())
    gpu = next(a for a in pool_usage() if (a.cluster_name, a.pool) == ("prod", "gpu"))
    # running 40 + unknown 4 (desired 1) + float 6 + flag 7 + text 9 + the service's 2 x 8Gi
    assert gpu.allocated_bytes == (40 + 4 + 6 + 7 + 9 + 16) * GI
    assert gpu.reserved_bytes == (50 - 40 + 20) * GI
    assert gpu.gpus_used == 2  # the service's two pods, one nvidia GPU each


def test_only_the_given_clusters(mixed):
    only = pool_usage({mixed.pk})
    assert {a.cluster_name for a in only} == {"managed"}
    assert _totals(only) == [t for t in _totals(pool_accounts()) if t[0] == "managed"]
