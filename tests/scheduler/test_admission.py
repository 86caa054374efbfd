"""Admission: fits or not, holders and idle candidates, dependencies, caps, and the race on PostgreSQL."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test import override_settings

from scheduler.admission.accounting import pool_accounts
from scheduler.admission.admit import Demand, admit, release
from scheduler.models import MemoryReservation, NodePool
from tests.scheduler.conftest import GI, NOW, make_model, make_pool


def demand(cluster, name: str, gi: int, pool: str = "gpu", dependencies=()) -> Demand:
    return Demand(cluster.pk, pool, "InferenceModel", "default", name, gi * GI, list(dependencies))


def test_admit_reserves_and_release_frees(cluster, gpu_pool):
    make_model(cluster, "running", "60Gi")

    decision = admit(demand(cluster, "new", 30), now=NOW)

    assert decision.fits and decision.requested_bytes == 30 * GI and decision.available_bytes == 40 * GI
    assert decision.admitted == ["InferenceModel default/new"]
    assert pool_accounts(cluster.pk)[0].free_bytes == 10 * GI
    second = admit(demand(cluster, "another", 20), now=NOW)
    assert not second.fits and second.available_bytes == 10 * GI
    assert admit(demand(cluster, "new", 30), now=NOW).fits  # admitting again never counts itself

    assert release(cluster.pk, "InferenceModel", "default", "new") == 1
    assert admit(demand(cluster, "another", 20), now=NOW).fits


def test_refusal_names_requested_available_holders_and_oldest_idle_first(cluster, gpu_pool):
    make_model(cluster, "busy", "50Gi", last_request=NOW - timedelta(minutes=1))
    make_model(cluster, "idle-recent", "20Gi", last_request=NOW - timedelta(minutes=30))
    make_model(cluster, "idle-oldest", "10Gi", last_request=NOW - timedelta(hours=5))
    make_model(cluster, "no-traffic-info", "15Gi")

    decision = admit(demand(cluster, "big", 25), now=NOW)

    assert not decision.fits and decision.reason == "InsufficientMemory"
    assert (decision.requested_bytes, decision.available_bytes) == (25 * GI, 5 * GI)
    assert [h.name for h in decision.holders] == ["busy", "idle-recent", "no-traffic-info", "idle-oldest"]
    assert [h.name for h in decision.idle_candidates] == ["idle-oldest", "idle-recent"]  # 10Gi short of 20Gi
    assert decision.message == (
        "insufficient memory in pool gpu for InferenceModel default/big: requested 25Gi, available 5Gi of 100Gi; "
        "held by default/busy (50Gi), default/idle-recent (20Gi), default/no-traffic-info (15Gi), "
        "default/idle-oldest (10Gi); scaling idle default/idle-oldest, default/idle-recent to zero would make room"
    )
    assert not MemoryReservation.objects.exists()


def test_dependencies_are_admitted_together_or_not_at_all(cluster, gpu_pool):
    make_pool(cluster, "cpu", budget="4Gi")
    make_model(cluster, "tokenizer-running", "2Gi", pool="cpu")
    tokenizer = demand(cluster, "tokenizer", 3, pool="cpu")
    model = demand(cluster, "codellama", 48, dependencies=[tokenizer])

    refused = admit(model, now=NOW)
    assert not refused.fits and refused.pool == "cpu" and "InferenceModel default/tokenizer" in refused.message
    assert not MemoryReservation.objects.exists()

    NodePool.objects.filter(name="cpu").update(budget_bytes=8 * GI)
    admitted = admit(model, now=NOW)
    assert admitted.fits and admitted.pool == "gpu"
    assert sorted(admitted.admitted) == ["InferenceModel default/codellama", "InferenceModel default/tokenizer"]
    assert MemoryReservation.objects.count() == 2


def test_running_dependency_needs_no_new_memory_and_cycles_are_named(cluster, gpu_pool):
    make_model(cluster, "tokenizer", "60Gi")
    assert admit(demand(cluster, "model", 40, dependencies=[demand(cluster, "tokenizer", 60)]), now=NOW).fits

    a = demand(cluster, "a", 1)
    b = demand(cluster, "b", 1, dependencies=[a])
    a.dependencies.append(b)
    with pytest.raises(ValueError, match="dependency cycle: a -> b -> a"):
        admit(a, now=NOW)


@override_settings(MAX_MODEL_MEMORY="96Gi")
def test_global_cap_refuses_before_any_budget(cluster):
    make_pool(cluster, "huge", budget="1Ti")
    decision = admit(demand(cluster, "giant", 97, pool="huge"), now=NOW)
    assert not decision.fits
    assert decision.message == (
        "InferenceModel default/giant declares 97Gi, over the per-model cap MAX_MODEL_MEMORY=96Gi"
    )
    with override_settings(MAX_MODEL_MEMORY=""):
        assert admit(demand(cluster, "giant", 97, pool="huge"), now=NOW).fits


def test_pool_without_budget_admits_under_the_cap(cluster):
    decision = admit(demand(cluster, "m", 10, pool="unknown"), now=NOW)
    assert decision.fits and decision.budget_bytes is None and "has no budget" in decision.message


def _lock_waiters() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks need PostgreSQL (CI runs it there)")
def test_two_racing_admissions_for_the_last_memory_only_one_wins(transactional_db, cluster):
    """Both admissions start while a third transaction holds the pool row, so both have read nothing
    yet when it lets go; without the row lock they would both see 40Gi free and both be admitted."""
    pool = make_pool(cluster, "gpu", budget="100Gi")
    make_model(cluster, "running", "60Gi")
    results: dict[str, bool] = {}

    def race(name: str) -> None:
        try:
            results[name] = admit(demand(cluster, name, 30), now=NOW).fits
        finally:
            connections.close_all()

    gate = connections.create_connection("default")
    gate.set_autocommit(False)
    with gate.cursor() as cursor:
        cursor.execute("SELECT id FROM scheduler_nodepool WHERE id = %s FOR UPDATE", [pool.pk])
    threads = [threading.Thread(target=race, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while _lock_waiters() < 2:
        assert time.monotonic() < deadline, "both admissions should wait on the pool row lock"
        time.sleep(0.02)
    gate.commit()
    gate.close()
    for thread in threads:
        thread.join(timeout=10)

    assert sorted(results.values()) == [False, True]
    assert MemoryReservation.objects.filter(pool=pool).count() == 1
