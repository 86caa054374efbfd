"""Several portal installations share a cluster, on the real control plane: each watches it under
its own Lease (named after the installation), and a watcher that waits for a Lease another holder
keeps says so in its log and in the sync-health figures. ``missing_kinds`` follows the watcher's
lists, not only the periodic resync."""

from __future__ import annotations

import threading

import pytest

from clusters.kube.watching import Backoff, WatchSettings
from clusters.models import Cluster, SyncStat
from clusters.sync.leader import LeaseTiming, lease_name
from clusters.sync.resync import resync_cluster
from clusters.sync.watch_supervisor import ClusterSupervisor
from tests.clusters.conftest import RunningWatch, wait_for

FAST = WatchSettings(timeout_range=(2, 3), backoff=lambda: Backoff(initial=0.05, maximum=0.5))
TIMING = LeaseTiming(lease_duration=3, renew_deadline=2, retry_period=0.2)


def test_the_lease_name_carries_the_installation(settings) -> None:
    settings.INSTALLATION_ID = ""
    other = lease_name({**settings.DATABASES["default"], "NAME": "another_portal"})
    assert lease_name() != other and other.startswith("inference-portal-watch-")
    settings.INSTALLATION_ID = "east"
    assert lease_name() == "inference-portal-watch-east"


def lease_waiting(cluster: Cluster) -> float | None:
    return SyncStat.objects.filter(cluster=cluster, counter=SyncStat.Counter.LEASE_WAITING).values_list(
        "value", flat=True).first()


def test_two_installations_both_watch_and_a_second_replica_says_it_waits(live_cluster) -> None:
    stop, lines = threading.Event(), []
    first_stop = threading.Event()

    def supervisor(identity: str, lease: str, until: threading.Event) -> ClusterSupervisor:
        return ClusterSupervisor(live_cluster.pk, until, FAST, TIMING, identity=identity, report=lines.append,
                                 check_every=0.1, lease=lease).start()

    east = supervisor("east-1", "inference-portal-watch-east", first_stop)
    west = supervisor("west-1", "inference-portal-watch-west", stop)
    try:
        wait_for(lambda: east.watching.is_set() and west.watching.is_set(), timeout=20,
                 message="both installations to watch the cluster")
        replica = supervisor("east-2", "inference-portal-watch-east", stop)
        wait_for(lambda: any("waiting for Lease" in line and "held by east-1" in line for line in lines),
                 message="the second replica of east to say it waits")
        assert not replica.watching.is_set()
        wait_for(lambda: lease_waiting(live_cluster) == 1, message="the sync-health figure to say it waits")

        first_stop.set()  # east-1 stops and releases its Lease: its replica takes over
        assert east.join(timeout=30)
        wait_for(replica.watching.is_set, timeout=20, message="east-2 to take over")
        wait_for(lambda: lease_waiting(live_cluster) == 0, message="the waiting figure to clear")
    finally:
        stop.set()
        first_stop.set()
        for each in (east, west):
            each.join(timeout=30)


def test_missing_kinds_follow_the_watchers_lists(live_cluster, kube) -> None:
    """The API server answers 404 for a kind whose CRD is not served: the proxy plays that for KubeAI
    Models (an operator not installed yet, then installed)."""
    if kube.proxy is None:
        pytest.skip("the missing CRD is played by the session's fault proxy")
    kube.proxy.inject("list", "models", status=404, times=None, message="the server could not find the resource")
    running = RunningWatch(live_cluster).start()
    try:
        wait_for(lambda: "Model" in Cluster.objects.get(pk=live_cluster.pk).missing_kinds,
                 message="the watcher to record the missing kind")
        kube.proxy.clear_faults()
        wait_for(lambda: "Model" not in Cluster.objects.get(pk=live_cluster.pk).missing_kinds, timeout=20,
                 message="the watcher to find the kind served")
    finally:
        kube.proxy.clear_faults()
        running.stop()


def test_a_refused_lease_is_logged_counted_and_makes_the_cluster_unhealthy(live_cluster, kube, metrics_client,
                                                                          caplog) -> None:
    """Issue 44, item 4: the cluster refuses the watcher's Lease (403, RBAC): a warning in the log
    naming the Lease and the cluster's message, ``inference_portal_watch_lease_refused{cluster} 1``
    on ``/metrics`` and the cluster unhealthy with the reason, through a resync as well; once the
    Lease is granted the watcher watches and all three clear."""
    if kube.proxy is None:
        pytest.skip("the refusal is played by the session's fault proxy")
    stop, lines = threading.Event(), []
    kube.proxy.inject("*", "leases", status=403, times=None, message='leases.coordination.k8s.io is forbidden: '
                      'User "portal" cannot get resource "leases" in the namespace')  # fmt: skip
    supervisor = ClusterSupervisor(live_cluster.pk, stop, FAST, TIMING, identity="refused-1", report=lines.append,
                                   check_every=0.1, lease="inference-portal-watch-refused").start()  # fmt: skip
    try:
        wait_for(lambda: any("refuses the watch Lease" in line and "forbidden" in line for line in lines),
                 message="the watcher to say its Lease is refused")  # fmt: skip
        assert any("refuses the watch Lease" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
        refused = SyncStat.objects.filter(cluster=live_cluster, counter=SyncStat.Counter.LEASE_REFUSED)
        wait_for(lambda: refused.filter(value=1).exists(), message="the refused figure")
        scraped = metrics_client.get("/metrics").content.decode()
        assert f'inference_portal_watch_lease_refused{{cluster="{live_cluster.name}"}} 1.0' in scraped
        row = Cluster.objects.get(pk=live_cluster.pk)
        assert row.healthy is False and "watch Lease" in row.last_error and "forbidden" in row.last_error
        resync_cluster(row)  # the lists succeed: the cluster stays unhealthy while nothing is watched
        row.refresh_from_db()
        assert row.healthy is False and "forbidden" in row.last_error
        assert not supervisor.watching.is_set()

        kube.proxy.clear_faults()
        wait_for(supervisor.watching.is_set, timeout=20, message="the watcher to take its Lease once granted")
        wait_for(lambda: refused.filter(value=0).exists(), message="the refused figure to clear")
        row.refresh_from_db()
        assert row.healthy is True and row.last_error == ""
    finally:
        kube.proxy.clear_faults()
        stop.set()
        supervisor.join(timeout=30)
