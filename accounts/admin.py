"""Staff manage teams and their namespace grants in the admin."""

from django.contrib import admin

from accounts.models import NamespaceGrant, Team


class NamespaceGrantInline(admin.TabularInline):
    model = NamespaceGrant
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name", "members__username"]
    filter_horizontal = ["members"]
    inlines = [NamespaceGrantInline]
