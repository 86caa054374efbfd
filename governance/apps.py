from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """Team limits and budgets, the gateway's usage ledger, and showback (GPU-hours and cost per team)."""

    name = "governance"
    verbose_name = "Usage, limits and showback"

    def ready(self) -> None:
        from prometheus_client.core import REGISTRY

        from governance.budgets import BudgetCollector

        REGISTRY.register(BudgetCollector())
