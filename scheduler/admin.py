"""Admin: staff set pool budgets, per-GPU memory and team quotas; nodes and reservations are shown, not edited."""

from django.contrib import admin

from clusters.web.admin_quantities import QuantityAdminMixin
from scheduler.models import MemoryReservation, Node, NodePool, TeamQuota


class NodeInline(QuantityAdminMixin, admin.TabularInline):
    """Nodes are read from the cluster on every refresh, so hand edits would be overwritten."""

    model = Node
    extra = 0
    can_delete = False
    fields = readonly_fields = [
        "name", "allocatable_bytes_quantity", "capacity_bytes_quantity", "gpu_count", "gpu_memory_bytes_quantity",
        "schedulable",
    ]  # fmt: skip

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(NodePool)
class NodePoolAdmin(QuantityAdminMixin, admin.ModelAdmin):
    list_display = [
        "name", "cluster", "source", "node_count", "allocatable_bytes_quantity", "budget_bytes_quantity", "gpu_count",
    ]  # fmt: skip
    quantity_fields = ("allocatable_bytes", "largest_node_bytes", "gpu_memory_bytes", "budget_bytes")
    list_filter = ["cluster", "source"]
    search_fields = ["name"]
    readonly_fields = ["refreshed_at"]
    inlines = [NodeInline]


@admin.register(MemoryReservation)
class MemoryReservationAdmin(QuantityAdminMixin, admin.ModelAdmin):
    """Staff may delete a reservation left behind by a controller that never released it."""

    list_display = ["kind", "namespace", "name", "pool", "memory_bytes_quantity", "created_at"]
    list_filter = ["pool__cluster", "pool", "kind"]
    search_fields = ["name", "namespace"]
    readonly_fields = ["pool", "kind", "namespace", "name", "memory_bytes_quantity", "created_at", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(TeamQuota)
class TeamQuotaAdmin(QuantityAdminMixin, admin.ModelAdmin):
    """A team's guaranteed share of a pool and its borrowing limit (scheduler/admission/quotas.py)."""

    list_display = [
        "team", "pool", "guaranteed_bytes_quantity", "guaranteed_gpus", "borrowing_limit_bytes_quantity",
        "borrowing_limit_gpus", "reclaiming_since",
    ]  # fmt: skip
    quantity_fields = ("guaranteed_bytes", "borrowing_limit_bytes")
    list_filter = ["pool__cluster", "team"]
    search_fields = ["team__name", "pool__name"]
    readonly_fields = ["reclaiming_since"]
