from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


def _install_triggers(using: str = "default", **kwargs: Any) -> None:
    """After every ``migrate`` (and ``flush``): the triggers on every serving kind's table that keep
    the pool totals, recounted (:mod:`scheduler.pool_totals`), and the holdings' generations, moved
    (:mod:`scheduler.holdings_cache`)."""
    from scheduler import holdings_cache, pool_totals  # the models are ready only once migrate runs

    pool_totals.install(connections[using])
    holdings_cache.install(connections[using])


class SchedulerConfig(AppConfig):
    """Memory: node pools, budgets, admission, placement and right-sizing."""

    name = "scheduler"
    verbose_name = "Memory planning"

    def ready(self) -> None:
        post_migrate.connect(_install_triggers, sender=self, dispatch_uid="scheduler-triggers")
