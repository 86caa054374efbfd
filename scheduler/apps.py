from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    """Memory: node pools, budgets, admission, placement and right-sizing."""

    name = "scheduler"
    verbose_name = "Memory planning"
