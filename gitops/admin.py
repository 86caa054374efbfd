"""Admin of gitops: staff set change modes (the token write-only); pull requests and files are read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from gitops.models import ChangeMode, GitFile, ProposedChange


class ChangeModeForm(forms.ModelForm):
    """The token is never rendered back; an empty submit keeps the stored one, unless the
    repository URL changed (then it must be given again)."""

    token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Never shown once saved; leave empty to keep the current token.",
    )

    class Meta:
        model = ChangeMode
        fields = [
            "cluster", "namespace", "mode", "forge", "repository_url", "branch", "path_layout", "kind_layouts",
            "token", "allow_insecure_http",
        ]  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        stored = ChangeMode.objects.filter(pk=self.instance.pk).first() if self.instance.pk else None
        if stored is None:
            return data
        supplied = {"token"} if data.get("token") else set()
        if not supplied:
            data["token"] = self.instance.token = stored.token
        candidate = ChangeMode(repository_url=data.get("repository_url", ""))
        for field, message in candidate.moved_credential_errors(stored, supplied).items():
            self.add_error(field, message)
        return data


@admin.register(ChangeMode)
class ChangeModeAdmin(admin.ModelAdmin):
    form = ChangeModeForm
    list_display = ["cluster", "namespace", "mode", "forge", "repository_url", "branch"]
    list_filter = ["mode", "forge"]
    readonly_fields = ["created_at", "updated_at"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Written by the portal only (the proposals and the poller): shown, never edited here."""

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(ProposedChange)
class ProposedChangeAdmin(ReadOnlyAdmin):
    list_display = ["kind", "namespace", "name", "number", "state", "author_label", "opened_at", "finished_at"]
    list_filter = ["state", "kind"]
    search_fields = ["name", "namespace", "branch"]


@admin.register(GitFile)
class GitFileAdmin(ReadOnlyAdmin):
    list_display = ["kind", "object_id", "path", "blob_sha", "checked_at"]
    search_fields = ["path"]
