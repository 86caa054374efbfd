"""Team quota serializer: staff set a team's guaranteed share of a pool and its borrowing limit.

Memory is a Kubernetes quantity (``96Gi``) in and out; the pool is named by cluster and pool name.
Every bad input is a 400 naming the field, the value and the rule; the guarantees of a pool must
fit it together (:meth:`scheduler.models.TeamQuota.clean`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import Team
from clusters.validation.quantities import format_bytes, quantity_to_int
from scheduler.models import NodePool, TeamQuota

API_NAMES = {"guaranteed_bytes": "guaranteed_memory", "borrowing_limit_bytes": "borrowing_limit_memory"}
"""The model's byte fields as the API names them (quantities, not bytes)."""


@extend_schema_field({"oneOf": [{"type": "string", "example": "96Gi"}, {"type": "integer"}]})
class MemoryQuantityField(serializers.Field):
    """Bytes as a Kubernetes quantity: ``"96Gi"`` or a number of bytes in, ``"96Gi"`` out."""

    def to_internal_value(self, data: Any) -> int:
        amount = quantity_to_int(data) if not isinstance(data, bool) else None
        if amount is None or amount < 0:
            raise serializers.ValidationError(f"{self.field_name}: {data!r} is not a non-negative quantity (e.g. 96Gi)")
        return amount

    def to_representation(self, value: int) -> str:
        return format_bytes(value)


class TeamQuotaSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="name", queryset=Team.objects.all())
    cluster = serializers.CharField(source="pool.cluster.name", help_text="The pool's cluster, by name.")
    pool = serializers.CharField(source="pool.name", help_text="The node pool, by its label value.")
    guaranteed_memory = MemoryQuantityField(source="guaranteed_bytes", help_text="e.g. 160Gi")
    borrowing_limit_memory = MemoryQuantityField(
        source="borrowing_limit_bytes", required=False, allow_null=True, help_text="Beyond the guarantee; null: none."
    )

    class Meta:
        model = TeamQuota
        fields = [
            "id", "team", "cluster", "pool", "guaranteed_memory", "guaranteed_gpus", "borrowing_limit_memory",
            "borrowing_limit_gpus", "reclaiming_since",
        ]  # fmt: skip
        read_only_fields = ["reclaiming_since"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        named = attrs.pop("pool", None)
        if named is not None:
            cluster, name = named["cluster"]["name"], named["name"]
            pool = NodePool.objects.filter(cluster__name=cluster, name=name).select_related("cluster").first()
            if pool is None:
                raise serializers.ValidationError(
                    {"pool": [f"pool: {name!r} is not a node pool of cluster {cluster!r}"]}
                )
            attrs["pool"] = pool
        quota = TeamQuota(**{**self._current(), **attrs})
        if quota.pool_id and quota.team_id:
            clash = TeamQuota.objects.filter(team=quota.team, pool=quota.pool).exclude(pk=quota.pk)
            if clash.exists():
                raise serializers.ValidationError(
                    {"team": [f"team: {quota.team.name!r} already has a quota in pool {quota.pool}"]}
                )
        try:
            quota.clean()
        except DjangoValidationError as error:
            raise serializers.ValidationError(
                {
                    API_NAMES.get(key, key): [
                        text.replace(f"{key}:", f"{API_NAMES.get(key, key)}:", 1) for text in texts
                    ]
                    for key, texts in error.message_dict.items()
                }
            ) from None
        return attrs

    def _current(self) -> dict[str, Any]:
        if self.instance is None:
            return {}
        fields = ("pk", "team", "pool", "guaranteed_bytes", "guaranteed_gpus", "borrowing_limit_bytes",
                  "borrowing_limit_gpus")  # fmt: skip
        return {field: getattr(self.instance, field) for field in fields}
