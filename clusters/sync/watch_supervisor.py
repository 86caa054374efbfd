"""One supervisor thread per cluster in ``manage.py sync_watch``: it takes part in the cluster's
Lease election (clusters/sync/leader.py), runs the cluster's watches while it leads and stops them as
soon as it does not, and restarts them when the cluster's row changes (namespaces, managed kinds,
credentials), so a running watcher follows what staff change without a restart. A cluster row
that is deleted ends its supervisor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import close_old_connections, connection, transaction

from clusters.kube.client import ClusterGateway
from clusters.models import Cluster
from clusters.sync import stats as sync_stats
from clusters.sync.leader import LEASE_REFUSED, LeaseElector, LeaseTiming, holder_identity, lead_while, lease_namespace
from clusters.sync.watcher import ClusterWatch, WatchSettings

logger = logging.getLogger(__name__)


class ClusterSupervisor:
    """Elect, watch while leading, follow changes of the cluster's row; until ``stop``."""

    def __init__(
        self,
        cluster_id: int,
        stop: threading.Event,
        settings: WatchSettings | None = None,
        timing: LeaseTiming | None = None,
        identity: str | None = None,
        report: Callable[[str], None] = logger.info,
        check_every: float = 1.0,
        gateway_factory: Callable[[Cluster], ClusterGateway] = ClusterGateway,
        lease: str | None = None,
    ) -> None:
        self.cluster_id, self.stop = cluster_id, stop
        self.lease = lease  # the Lease's name; None: this installation's (clusters.sync.leader.lease_name)
        self.settings, self.timing = settings, timing or LeaseTiming()
        self.identity = identity or holder_identity()
        self.report, self.check_every = report, check_every
        self.gateway_factory = gateway_factory  # how this replica reaches the API server
        self.leading = threading.Event()
        self.watching = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"supervise cluster {cluster_id}", daemon=True)

    def start(self) -> ClusterSupervisor:
        self.thread.start()
        return self

    def join(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def _current(self) -> Cluster | None:
        close_old_connections()
        return Cluster.objects.filter(pk=self.cluster_id).first()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                cluster = self._current()
                if cluster is None:
                    return
                self._supervise(cluster)
        finally:
            connection.close()

    def _supervise(self, cluster: Cluster) -> None:
        """Lead and watch this version of the cluster's row until it changes, goes, or ``stop``."""
        gateway = self.gateway_factory(cluster)
        elector = LeaseElector(gateway, lease_namespace(cluster.namespaces), self.identity, self.timing, self.lease)
        election_stop, watch_stop = threading.Event(), threading.Event()
        self.leading.clear()
        election = threading.Thread(target=lead_while, args=(elector, election_stop, self.leading), daemon=True,
                                    name=f"elect {cluster.name}")
        election.start()
        watch: ClusterWatch | None = None
        try:
            waiting_for: str | None = None
            refused: str | None = None
            while not self.stop.wait(min(self.check_every, self.timing.retry_period / 2)):
                waiting_for = self._note_waiting(cluster, elector, waiting_for)
                refused = self._note_refused(cluster, elector, refused)
                if self.leading.is_set() and watch is None:
                    watch_stop = threading.Event()
                    watch = ClusterWatch(cluster, watch_stop, self.settings, self.gateway_factory)
                    watch.start()
                    self.watching.set()
                    self.report(f"watching {cluster.name} ({len(watch.watchers)} watches)")
                elif not self.leading.is_set() and watch is not None:
                    self._stop_watch(cluster, watch, watch_stop, "lost the lease")
                    watch = None
                current = self._current()
                if current is None or current.updated_at != cluster.updated_at:
                    self.report(f"{cluster.name}: {'removed' if current is None else 'changed'}; following it")
                    return
        finally:
            if watch is not None:
                self._stop_watch(cluster, watch, watch_stop, "stopping")
            election_stop.set()
            election.join(timeout=self.timing.retry_period + gateway.timeout)
            elector.release()
            gateway.close()

    def _note_waiting(self, cluster: Cluster, elector: LeaseElector, waiting_for: str | None) -> str | None:
        """Say so (log, sync-health figure) when another holder keeps the Lease, and when that ends:
        a second installation sharing the Lease name would otherwise wait for ever in silence."""
        holder = None if self.leading.is_set() or elector.holder in (None, self.identity) else elector.holder
        if holder != waiting_for:
            if holder:
                self.report(f"{cluster.name}: waiting for Lease {elector.namespace}/{elector.name}, held by {holder}")
            sync_stats.lease_waiting(cluster, bool(holder))
        return holder

    def _note_refused(self, cluster: Cluster, elector: LeaseElector, refused: str | None) -> str | None:
        """Say so when the cluster refuses the Lease and when it takes it again: a warning in the
        log, the ``lease_refused`` figure on ``/metrics`` and the cluster's health (the watcher
        watches nothing meanwhile; without this it waited in silence and the cluster showed healthy)."""
        now = elector.refused
        if now == refused:
            return refused
        where = f"{LEASE_REFUSED} {elector.namespace}/{elector.name}"
        with transaction.atomic():
            row = Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
            stored = row.last_error.split("; ") if row is not None else []
            others = [error for error in stored if error and not error.startswith(LEASE_REFUSED)]
            if now:
                logger.warning("%s: the cluster refuses the %s: %s", cluster.name, where, now)
                self.report(f"{cluster.name}: the cluster refuses the {where}: {now}")
                errors = [f"{where} refused: {now}", *others]
            else:
                self.report(f"{cluster.name}: the {where} is no longer refused")
                errors = others
            Cluster.objects.filter(pk=cluster.pk).update(healthy=not errors, last_error="; ".join(errors)[:2000])
        sync_stats.lease_refused(cluster, bool(now))
        return now

    def _stop_watch(self, cluster: Cluster, watch: ClusterWatch, watch_stop: threading.Event, why: str) -> None:
        watch_stop.set()
        if not watch.join(timeout=10):
            logger.warning("%s: watch threads still busy after %s", cluster.name, why)
        self.watching.clear()
        self.report(f"stopped watching {cluster.name} ({why})")
