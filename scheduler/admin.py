"""Admin: staff set pool budgets and per-GPU memory; nodes and reservations are shown, not edited."""

from django.contrib import admin

from scheduler.models import MemoryReservation, Node, NodePool


class NodeInline(admin.TabularInline):
    """Nodes are read from the cluster on every refresh, so hand edits would be overwritten."""

    model = Node
    extra = 0
    can_delete = False
    fields = readonly_fields = [
        "name",
        "allocatable_bytes",
        "capacity_bytes",
        "gpu_count",
        "gpu_memory_bytes",
        "schedulable",
    ]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(NodePool)
class NodePoolAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "source", "node_count", "allocatable_bytes", "budget_bytes", "gpu_count"]
    list_filter = ["cluster", "source"]
    search_fields = ["name"]
    readonly_fields = ["refreshed_at"]
    inlines = [NodeInline]


@admin.register(MemoryReservation)
class MemoryReservationAdmin(admin.ModelAdmin):
    """Staff may delete a reservation left behind by a controller that never released it."""

    list_display = ["kind", "namespace", "name", "pool", "memory_bytes", "created_at"]
    list_filter = ["pool__cluster", "pool", "kind"]
    search_fields = ["name", "namespace"]
    readonly_fields = ["pool", "kind", "namespace", "name", "memory_bytes", "created_at", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False
