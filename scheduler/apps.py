from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


def _install_pool_totals(using: str = "default", **kwargs: Any) -> None:
    """After every ``migrate`` (and ``flush``): the pool totals' triggers on every serving kind's
    table, and the totals recounted (:mod:`scheduler.pool_totals`)."""
    from scheduler.pool_totals import install  # the models are ready only once migrate runs

    install(connections[using])


class SchedulerConfig(AppConfig):
    """Memory: node pools, budgets, admission, placement and right-sizing."""

    name = "scheduler"
    verbose_name = "Memory planning"

    def ready(self) -> None:
        post_migrate.connect(_install_pool_totals, sender=self, dispatch_uid="scheduler-pool-totals")
