"""Staff manage teams, their namespace grants and the identity-provider group mappings in the admin."""

from django.contrib import admin

from accounts.models import GroupMapping, NamespaceGrant, Team


class NamespaceGrantInline(admin.TabularInline):
    model = NamespaceGrant
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name", "members__username"]
    filter_horizontal = ["members"]
    inlines = [NamespaceGrantInline]


@admin.register(GroupMapping)
class GroupMappingAdmin(admin.ModelAdmin):
    """Provider group -> team and role; applied at each person's next single sign-on."""

    list_display = ["group", "team", "role"]
    search_fields = ["group", "team__name", "role__name"]
    list_filter = ["team", "role"]
