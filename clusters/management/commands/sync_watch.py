"""The long-running watcher: keeps every cluster's mirrored kinds current until SIGTERM.

Several replicas may run: each cluster is watched by the one holding its PostgreSQL advisory
lock; the others wait and take over when it goes away.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster
from clusters.watcher import ClusterWatch, WatchSettings, release_lead, try_lead

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Watch clusters and keep the portal's rows current (list, then watch; relist on 410)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="Only this cluster (default: every cluster with an API server).")
        parser.add_argument(
            "--lead-retry",
            type=float,
            default=15.0,
            help="Seconds between attempts to take over a cluster another replica watches.",
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
        self, *args: Any, cluster: str | None, lead_retry: float, watch_timeout: tuple[int, int], **options: Any
    ) -> None:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        clusters = list(Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT))
        if cluster:
            clusters = [each for each in clusters if each.name == cluster]
            if not clusters:
                raise CommandError(f"no cluster named {cluster!r} with an API server")
        settings = WatchSettings(timeout_range=tuple(watch_timeout))
        running: dict[str, ClusterWatch] = {}
        try:
            while not stop.is_set():
                for each in clusters:
                    if each.name not in running and try_lead(each):
                        running[each.name] = ClusterWatch(each, stop, settings)
                        running[each.name].start()
                        self.stdout.write(f"watching {each.name} ({len(running[each.name].watchers)} watches)")
                if len(running) == len(clusters):
                    stop.wait()
                else:
                    stop.wait(lead_retry)
        finally:
            stop.set()
            for name, watch in running.items():
                if not watch.join(timeout=10):
                    logger.warning("%s: watch threads still busy at shutdown", name)
                release_lead(next(each for each in clusters if each.name == name))
            self.stdout.write("stopped")
