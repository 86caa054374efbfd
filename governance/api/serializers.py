"""Limits through the API: ``{"team": "<team name>", "model": null or "<gateway id>", ...}``."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounts.models import Team
from governance.models import Limit

FIGURES = ("requests_per_minute", "tokens_per_minute", "monthly_tokens", "api_token_requests_per_minute",
           "api_token_tokens_per_minute")


class TeamByName(serializers.SlugRelatedField):
    default_error_messages = {
        "does_not_exist": "no team is named {value!r}",
        "invalid": "a team name (string) is expected",
    }


class LimitSerializer(serializers.ModelSerializer):
    """One scope's figures; a figure left out or null sets no limit of that kind."""

    team = TeamByName(slug_field="name", queryset=Team.objects.all(), allow_null=True, required=False)
    model = serializers.CharField(max_length=253, allow_null=True, required=False,
                                  help_text="A model's gateway id; null or absent: every model.")

    class Meta:
        model = Limit
        fields = ["id", "team", "model", *FIGURES, "updated_at"]
        read_only_fields = ["id", "updated_at"]
        # (team, model) is the key: a POST for an existing scope updates it (LimitViewSet.create)
        validators: list[Any] = []

    def validate_model(self, value: str | None) -> str:
        if value is not None and not value.strip():
            raise serializers.ValidationError("a model's gateway id, or null for every model")
        return value or ""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        team = attrs.get("team", getattr(self.instance, "team", None))
        model = attrs.get("model", getattr(self.instance, "model", ""))
        if team is None and not model:
            raise serializers.ValidationError({"team": ["a limit needs a team, a model or both"]})
        for name in FIGURES:
            value = attrs.get(name)
            if value is not None and value < 1:
                raise serializers.ValidationError({name: [f"{name}: {value} must be at least 1 (null: no limit)"]})
        return attrs

    def to_representation(self, instance: Limit) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["model"] = instance.model or None
        return data


class UsageRowSerializer(serializers.Serializer):
    """One row of ``/api/usage/`` (documentation of its shape; rows come from governance.showback)."""

    team = serializers.CharField(help_text='A team name, or "unused" for GPU-hours no model held (staff only).')
    model = serializers.CharField(allow_null=True)
    day = serializers.DateField(required=False, help_text="With group_by=day.")
    requests = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unpriced_gpu_hours = serializers.FloatField(help_text="GPU-hours of GPU products without a price (cost 0).")
    cost = serializers.FloatField()
    idle_cost = serializers.FloatField()
    cost_per_million_tokens = serializers.FloatField(allow_null=True)


class UsageTotalsSerializer(serializers.Serializer):
    """The sums of every row of the selection (all pages), rounded once."""

    requests = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unpriced_gpu_hours = serializers.FloatField()
    cost = serializers.FloatField()
    idle_cost = serializers.FloatField()
    cost_per_million_tokens = serializers.FloatField(allow_null=True)


class UsagePageSerializer(serializers.Serializer):
    """A page of ``/api/usage/``: the project's list envelope plus ``totals`` of the whole selection."""

    count = serializers.IntegerField(help_text="Rows in the whole selection.")
    count_estimated = serializers.BooleanField(help_text="Always false here: the rows are counted exactly.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = UsageRowSerializer(many=True)
    totals = UsageTotalsSerializer(help_text="Sums of every row of the selection, not only this page's.")
