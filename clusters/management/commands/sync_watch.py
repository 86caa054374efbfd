"""The long-running watcher: keeps every cluster's mirrored kinds current until SIGTERM.

Several replicas may run: each cluster is watched by the one holding its Lease in that cluster
(clusters/sync/leader.py); a leader that cannot renew stops watching within the renew deadline and
another takes over once the lease has expired. Clusters added, changed or removed in the portal
are followed without a restart (clusters/sync/watch_supervisor.py).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from clusters.models import Cluster
from clusters.sync.leader import LeaseTiming
from clusters.sync.watch_supervisor import ClusterSupervisor
from clusters.sync.watcher import WatchSettings

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Watch clusters and keep the portal's rows current (list, then watch; relist on 410)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="Only this cluster (default: every cluster with an API server).")
        parser.add_argument(
            "--rescan",
            type=float,
            default=10.0,
            help="Seconds between looks for clusters added in the portal.",
        )
        parser.add_argument(
            "--lease",
            type=float,
            nargs=3,
            default=(15.0, 10.0, 2.0),
            metavar=("DURATION", "RENEW_DEADLINE", "RETRY_PERIOD"),
            help="Leader election timing in seconds (client-go's defaults: 15 10 2).",
        )
        parser.add_argument(
            "--watch-timeout",
            type=int,
            nargs=2,
            default=(300, 600),
            metavar=("MIN", "MAX"),
            help="Server-side timeout of each watch, chosen at random in [MIN, MAX] seconds.",
        )

    def handle(
        self,
        *args: Any,
        cluster: str | None,
        rescan: float,
        lease: tuple[float, float, float],
        watch_timeout: tuple[int, int],
        **options: Any,
    ) -> None:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        clusters = Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT)
        if cluster:
            clusters = clusters.filter(name=cluster)
            if not clusters.exists():
                raise CommandError(f"no cluster named {cluster!r} with an API server")
        settings = WatchSettings(timeout_range=tuple(watch_timeout))
        timing = LeaseTiming(*lease)
        supervisors: dict[int, ClusterSupervisor] = {}

        def report(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        try:
            while not stop.is_set():
                close_old_connections()
                for pk in clusters.values_list("pk", flat=True):
                    if pk not in supervisors or not supervisors[pk].thread.is_alive():
                        supervisors[pk] = ClusterSupervisor(pk, stop, settings, timing, report=report).start()
                stop.wait(rescan)
        finally:
            stop.set()
            for supervisor in supervisors.values():
                if not supervisor.join(timeout=20):
                    logger.warning("cluster %s: supervisor still busy at shutdown", supervisor.cluster_id)
            report("stopped")
