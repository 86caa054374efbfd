from django.contrib import admin

from scheduler.models import NodePool


@admin.register(NodePool)
class NodePoolAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "source", "node_count", "allocatable_bytes", "budget_bytes", "gpu_count"]
    list_filter = ["cluster", "source"]
    search_fields = ["name"]
