"""``manage.py refresh_rightsizing [--cluster NAME]``: refresh right-sizing from Prometheus now."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster
from scheduler.rightsizing.refresh import refresh_clusters


class Command(BaseCommand):
    help = "Query Prometheus for observed memory peaks and update right-sizing recommendations."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="Only this cluster (default: every cluster with a Prometheus URL).")

    def handle(self, *args, **options) -> None:
        name = options.get("cluster")
        if name and not Cluster.objects.filter(name=name).exists():
            raise CommandError(f"--cluster {name!r} is not a registered cluster")
        refreshes = refresh_clusters(name)
        if not refreshes:
            self.stdout.write("no cluster has a Prometheus URL; nothing to refresh")
        failed = 0
        for refresh in refreshes:
            if refresh.ok:
                self.stdout.write(
                    f"{refresh.cluster.name}: {refresh.models_with_data}/{refresh.models_seen} models with data, "
                    f"{refresh.queries} queries" + (f" ({refresh.error})" if refresh.error else "")
                )
            else:
                failed += 1
                self.stderr.write(f"{refresh.cluster.name}: {refresh.error}")
        if failed:
            raise CommandError(f"{failed} of {len(refreshes)} refreshes failed")
