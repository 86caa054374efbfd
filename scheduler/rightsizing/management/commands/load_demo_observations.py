"""``manage.py load_demo_observations [--cluster demo]``: the demo week of right-sizing (demo.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster
from scheduler.rightsizing.demo import load_demo_observations


class Command(BaseCommand):
    help = "Load platform/demo/observations.yaml as the demo cluster's right-sizing history."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--cluster", default="demo")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"cluster {options['cluster']!r} does not exist (run load_demo first)")
        made = load_demo_observations(cluster)
        self.stdout.write(self.style.SUCCESS(f"{cluster.name}: {made} right-sizing observations"))
