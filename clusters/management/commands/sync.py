"""One full resync of every mirrored kind, then exit (scripts, cron, tests)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from clusters.kube.client import GatewayError
from clusters.models import Cluster
from clusters.sync.controllers import reconcile_cluster
from clusters.sync.resync import resync_cluster


class Command(BaseCommand):
    help = (
        "Resync clusters once: list every mirrored kind, upsert what changed, tombstone what is gone; then "
        "one reconcile pass for the kinds each cluster lets the portal manage."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--once",
            action="store_true",
            required=True,
            help="Run one full resync and exit (the long-running watcher is `sync_watch`).",
        )
        parser.add_argument("--cluster", help="Only this cluster (default: every cluster with an API server).")

    def handle(self, *args: Any, cluster: str | None, **options: Any) -> None:
        clusters = Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT)
        if cluster:
            clusters = clusters.filter(name=cluster)
            if not clusters:
                raise CommandError(
                    f"no cluster named {cluster!r} with an API server; known: "
                    + (", ".join(Cluster.objects.values_list("name", flat=True)) or "none")
                )
        failed = []
        for each in clusters:
            try:
                reports = resync_cluster(each)
            except GatewayError as error:
                failed.append(each.name)
                self.stderr.write(f"{each.name}: {error}")
                continue
            each.refresh_from_db()
            for report in reports:
                if report.kind in each.missing_kinds:
                    self.stdout.write(f"{each.name} {report.kind}: not installed ({report.error})")
                elif report.error:
                    failed.append(f"{each.name} {report.kind}")
                    self.stderr.write(f"{each.name} {report.kind}: {report.error}")
                else:
                    self.stdout.write(
                        f"{each.name} {report.kind}: {report.listed} listed, {report.written} written, "
                        f"{report.deleted} marked deleted"
                    )
            for result in reconcile_cluster(each):
                self.stdout.write(
                    f"{each.name} reconcile {result.kind} {result.namespace}/{result.name}: {result.outcome}"
                )
        if failed:
            raise CommandError(f"resync failed for {', '.join(failed)}")
