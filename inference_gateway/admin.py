"""Staff keep where models may answer, and which ids may be shared, in the admin (audited)."""

from __future__ import annotations

from django.contrib import admin

from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from inference_gateway.decisions import delete_decision, save_decision
from inference_gateway.models import BackendHost, SharedGatewayId, SharedNamespace


class DecisionAdmin(admin.ModelAdmin):
    """Saves and deletes through ``inference_gateway.decisions`` (audit entry, route reload)."""

    list_filter = ["cluster"]

    def save_model(self, request, obj, form, change) -> None:
        save_decision(obj, Actor.from_request(request, AuditEntry.Source.ADMIN))

    def delete_model(self, request, obj) -> None:
        delete_decision(obj, Actor.from_request(request, AuditEntry.Source.ADMIN))

    def delete_queryset(self, request, queryset) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(SharedNamespace)
class SharedNamespaceAdmin(DecisionAdmin):
    list_display = ["namespace", "cluster", "note"]
    search_fields = ["namespace", "note"]


@admin.register(BackendHost)
class BackendHostAdmin(DecisionAdmin):
    list_display = ["host", "cluster", "note"]
    search_fields = ["host", "note"]


@admin.register(SharedGatewayId)
class SharedGatewayIdAdmin(DecisionAdmin):
    list_display = ["gateway_id", "cluster", "note"]
    search_fields = ["gateway_id", "note"]
