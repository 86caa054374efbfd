"""Change modes in and out of the API; the token is write-only (``has_token`` says whether one is set)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from clusters.models import Cluster
from gitops.models import ChangeMode


class ChangeModeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    has_token = serializers.SerializerMethodField()

    class Meta:
        model = ChangeMode
        fields = [
            "id",
            "cluster",
            "namespace",
            "mode",
            "forge",
            "repository_url",
            "branch",
            "path_layout",
            "kind_layouts",
            "token",
            "has_token",
            "allow_insecure_http",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {"token": {"write_only": True, "required": False, "style": {"input_type": "password"}}}

    def get_has_token(self, mode: ChangeMode) -> bool:
        return bool(mode.token)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The model's rules (``ChangeMode.clean``) on what would be stored; a token kept while the
        repository URL moves is refused, as for clusters' credentials."""
        stored = self.instance
        values = {} if stored is None else {
            field.name: getattr(stored, field.name) for field in ChangeMode._meta.concrete_fields if field.name != "id"
        }
        candidate = ChangeMode(**{**values, **attrs})
        if stored is not None:
            moved = candidate.moved_credential_errors(stored, {name for name in attrs if attrs[name]})
            if moved:
                raise serializers.ValidationError({field: [message] for field, message in moved.items()})
        candidate.clean()
        return attrs
