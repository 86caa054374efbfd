"""``manage.py autoscale [--once]``: KubeAI's autoscaler for the Models the portal controls
(``inference_gateway.autoscaler``; run one per installation). ``--once`` runs a single interval,
for scripts and tests."""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand

from inference_gateway.autoscaler import Autoscaler, managing_clusters, run


class Command(BaseCommand):
    help = "Scale the KubeAI Models the portal controls on their engines' active requests (KubeAI's autoscaler)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="One interval for every cluster, then exit.")

    def handle(self, *args, **options) -> None:
        if options["once"]:
            autoscaler = Autoscaler()
            try:
                for cluster in managing_clusters():
                    for name, decision in autoscaler.step(cluster).items():
                        self.stdout.write(f"{cluster.name} {name}: {decision.average:g} active -> "
                                          f"{decision.desired} replicas{' (scaled)' if decision.scaled else ''}")
            finally:
                autoscaler.close()
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        run(stop)
