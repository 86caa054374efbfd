"""The sync at scale, on the real control plane and PostgreSQL: an unchanged relist writes nothing,
a resync's and a watch burst's statements do not grow with the objects, watch events arriving
together are applied in order as one batch, quiet watches hold no database connections, and a
steady cluster gets no writes."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.kube.client import ClusterGateway
from clusters.models import AuditEntry, Cluster, SyncState
from clusters.sync.resync import ResyncReport, resync_cluster, resync_namespace
from clusters.sync.watcher import ClusterWatch, KindWatcher, WatchSettings
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for

KIND = InferenceModel.kube
pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's bulk paths")


def write_models(kube, count: int, prefix: str = "m") -> None:
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    for index in range(count):
        manifest["metadata"]["name"] = f"{prefix}-{index}"
        kube.write(manifest)


def resync(cluster: Cluster) -> ResyncReport:
    report = ResyncReport(KIND.kind)
    gateway = ClusterGateway(cluster)
    try:
        resync_namespace(gateway, InferenceModel, cluster.namespaces[0], report)
    finally:
        gateway.close()
    return report


def test_an_unchanged_relist_writes_nothing_not_even_a_row_lock(live_cluster, kube) -> None:
    write_models(kube, 5)
    assert resync(live_cluster).written == 5
    with transaction.atomic():
        report = resync(live_cluster)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id_if_assigned()")
            (transaction_id,) = cursor.fetchone()
    assert (report.listed, report.written) == (5, 0)
    assert transaction_id is None, "the unchanged relist wrote or locked rows (a transaction id was assigned)"


def statements(action) -> int:
    with CaptureQueriesContext(connection) as queries:
        action()
    return len(queries)


def test_a_resync_sends_as_many_statements_for_40_objects_as_for_4(live_cluster, kube) -> None:
    write_models(kube, 4, "few")
    few = statements(lambda: resync(live_cluster))
    write_models(kube, 40, "many")
    many = statements(lambda: resync(live_cluster))
    assert InferenceModel.objects.filter(cluster=live_cluster, sync_state=SyncState.SYNCED).count() == 44
    assert many == few, f"{few} statements for 4 new objects, {many} for 40"
    created = AuditEntry.objects.filter(cluster=live_cluster, action="created")
    assert created.count() == 44 and not created.exclude(changes=[]).exists()

    for index in range(40):
        kube.remove(KIND, f"many-{index}")
    gone = statements(lambda: resync(live_cluster))
    assert InferenceModel.objects.filter(cluster=live_cluster, sync_state=SyncState.DELETED_IN_CLUSTER).count() == 40
    kube.remove(KIND, "few-0")
    one_gone = statements(lambda: resync(live_cluster))
    assert gone == one_gone, f"{one_gone} statements to tombstone 1 object, {gone} for 40"
    assert AuditEntry.objects.filter(cluster=live_cluster, action="deleted").count() == 41


def test_events_arriving_together_are_applied_in_order_in_constant_statements(live_cluster, kube) -> None:
    write_models(kube, 2)
    resync(live_cluster)
    watcher = KindWatcher(live_cluster, InferenceModel, kube.namespace, threading.Event())
    first = kube.read(KIND, "m-0")
    first["spec"]["memory"] = "20Gi"
    changed = kube.write(first)
    changed["spec"]["memory"] = "24Gi"
    changed_again = kube.write(changed)
    old = kube.read(KIND, "m-1")
    kube.remove(KIND, "m-1")
    recreated = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    recreated["metadata"]["name"] = "m-1"
    recreated["spec"]["memory"] = "32Gi"
    new = kube.write(recreated)
    burst = [
        {"type": "MODIFIED", "object": changed},
        {"type": "MODIFIED", "object": changed_again},
        {"type": "DELETED", "object": old},
        {"type": "ADDED", "object": new},
    ]
    watcher.handle_batch(burst)

    m0, m1 = (InferenceModel.objects.get(cluster=live_cluster, name=name) for name in ("m-0", "m-1"))
    assert (m0.spec["memory"], m0.resource_version) == ("24Gi", changed_again["metadata"]["resourceVersion"])
    assert (m1.sync_state, m1.uid, m1.spec["memory"]) == (SyncState.SYNCED, new["metadata"]["uid"], "32Gi")
    assert watcher.resource_version == new["metadata"]["resourceVersion"]

    def burst_of(count: int) -> list[dict]:
        events = []
        for index in range(count):
            current = kube.read(KIND, "m-0")
            current["spec"]["cooldownPeriod"] = f"{index + 100}m"
            events.append({"type": "MODIFIED", "object": kube.write(current)})
        return events

    two, twenty = burst_of(2), burst_of(20)
    assert statements(lambda: watcher.handle_batch(two)) == statements(lambda: watcher.handle_batch(twenty))
    assert InferenceModel.objects.get(cluster=live_cluster, name="m-0").spec["cooldownPeriod"] == "119m"


def test_quiet_watches_of_many_clusters_and_kinds_hold_no_database_connections(transactional_db, kube) -> None:
    clusters = []
    for index in range(4):
        kube.name = f"many-{index}"
        clusters.append(kube.register())
    began = timezone.now()
    stop = threading.Event()
    quick = WatchSettings(timeout_range=(30, 40), idle_close=0.3)
    watches = [ClusterWatch(cluster, stop, quick) for cluster in clusters]
    watchers = [watcher for watch in watches for watcher in watch.watchers]
    assert len(watchers) >= 4 * 5
    for watch in watches:
        watch.start()

    def opened_since() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_start >= %s",
                [began],
            )
            return cursor.fetchone()[0]

    try:
        wait_for(lambda: all(watcher.resource_version for watcher in watchers), timeout=30, message="all to list")
        time.sleep(1.0)
        assert opened_since() <= 1, f"{opened_since()} connections held by {len(watchers)} quiet watches"

        write_models(kube, 1, "event")
        wait_for(lambda: InferenceModel.objects.filter(name="event-0").count() == len(clusters), message="rows")
        time.sleep(1.0)
        assert opened_since() <= 1, "connections stayed open after the events"
    finally:
        stop.set()
        for watch in watches:
            assert watch.join(timeout=15)


def test_a_steady_cluster_gets_no_writes_from_the_watch_resyncs_and_reconciles(transactional_db, kube) -> None:
    kube.name = "steady"
    cluster = kube.register(managed_kinds=["InferenceModel"])
    from scheduler.models import NodePool

    NodePool.objects.create(cluster=cluster, name="gpu-a100", allocatable_bytes=160 * 1024**3)
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    write_models(kube, 3, "mirrored")
    kube.sync()
    wait_for(lambda: (kube.get("apps/v1", "Deployment", "llama-2-7b") or {}).get("status", {}).get("readyReplicas"),
             timeout=30, message="the model's Deployment to be ready")
    kube.sync()
    # the reconciles read owned Deployments through this process's informers, a moment behind the
    # cluster: steady state is once they hold what the cluster has and one more pass has settled
    for name in ("llama-2-7b", "mirrored-0", "mirrored-1", "mirrored-2"):
        kube.informed("apps/v1", "Deployment", name)
    kube.sync()
    stop = threading.Event()
    watch = ClusterWatch(Cluster.objects.get(pk=cluster.pk), stop, WatchSettings(timeout_range=(30, 40)))

    def passes() -> None:
        watch.start()
        wait_for(lambda: all(watcher.resource_version for watcher in watch.watchers), message="watches")
        for _ in range(3):
            kube.sync()
            resync_cluster(cluster)
        time.sleep(1.0)  # the watches' own events, if any, are handled

    try:
        assert kube.writes_during(passes) == []
    finally:
        stop.set()
        watch.join(timeout=15)
