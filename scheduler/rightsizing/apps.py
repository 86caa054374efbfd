from django.apps import AppConfig


class RightsizingConfig(AppConfig):
    """Right-sizing from real metrics: part of scheduler/, its own app label so its tables and
    migrations stay separate from node pools and budgets."""

    name = "scheduler.rightsizing"
    label = "rightsizing"
    verbose_name = "Right-sizing"

    def ready(self) -> None:
        from scheduler.rightsizing.kinds import connect_history_deletion

        connect_history_deletion()
