"""``manage.py refresh_node_pools [--cluster NAME]``: read Nodes and update node pools now."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from clusters.kube.client import GatewayError
from clusters.models import Cluster
from scheduler.refresh import refresh_node_pools


class Command(BaseCommand):
    help = "Read every cluster's Nodes (or one cluster's) and update node pools and their nodes."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="Name of one cluster; default: every cluster with an API server.")

    def handle(self, *args, cluster: str | None = None, **options) -> None:
        clusters = Cluster.objects.exclude(auth_method=Cluster.AuthMethod.SNAPSHOT)
        if cluster:
            clusters = Cluster.objects.filter(name=cluster)
            if not clusters.exists():
                raise CommandError(f"--cluster: no cluster named {cluster!r}")
        failed = 0
        for item in clusters:
            try:
                self.stdout.write(str(refresh_node_pools(item)))
            except GatewayError as error:
                failed += 1
                self.stderr.write(f"{item.name}: {error}")
        if failed:
            raise CommandError(f"{failed} cluster(s) could not be read")
