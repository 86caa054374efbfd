"""Serializers of the right-sizing API: the preview's input and output, report rows, pools, history."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

from rest_framework import serializers

from clusters.validation.quantities import quantity_to_int
from clusters.validation.schemas import clip
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import Policy


def _bytes(field: str, value: str, minimum: int) -> int:
    amount = quantity_to_int(value)
    if amount is None:
        raise serializers.ValidationError(f'{field}: "{value}" is not a Kubernetes quantity like 80Gi or 512Mi')
    if amount < minimum:
        rule = "must be greater than zero" if minimum else "must not be negative"
        raise serializers.ValidationError(f'{field}: "{value}" {rule}')
    return amount


class PreviewSerializer(serializers.Serializer):
    """Try the policy on a declared memory and an observed peak, with optional overrides."""

    declaredMemory = serializers.CharField(help_text="Declared memory, e.g. 80Gi.")
    observedPeak = serializers.CharField(help_text="Observed peak, e.g. 75Gi.")
    headroomPercent = serializers.DecimalField(
        max_digits=6, decimal_places=2, required=False, help_text="Headroom over the peak (default 4)."
    )
    roundingUnit = serializers.CharField(required=False, help_text="Round up to this unit (default 1Gi).")
    minChange = serializers.CharField(required=False, help_text="Smallest change worth reporting (default 1Gi).")
    flagBelowPercent = serializers.IntegerField(required=False, help_text="Flag below this utilization (default 90).")

    def validate_declaredMemory(self, value: str) -> int:
        return _bytes("declaredMemory", value, 1)

    def validate_observedPeak(self, value: str) -> int:
        return _bytes("observedPeak", value, 0)

    def validate_roundingUnit(self, value: str) -> int:
        return _bytes("roundingUnit", value, 1)

    def validate_minChange(self, value: str) -> int:
        return _bytes("minChange", value, 0)

    def validate_headroomPercent(self, value: Decimal) -> Decimal:
        if not 0 <= value <= 1000:
            raise serializers.ValidationError(f"headroomPercent: {value} must be between 0 and 1000")
        return value

    def validate_flagBelowPercent(self, value: int) -> int:
        if not 0 <= value <= 100:
            raise serializers.ValidationError(f"flagBelowPercent: {value} must be between 0 and 100")
        return value

    def policy(self, base: Policy) -> Policy:
        data = self.validated_data
        headroom = data.get("headroomPercent")
        return base.with_overrides(
            headroom_percent=Fraction(str(headroom)) if headroom is not None else None,
            rounding_unit_bytes=data.get("roundingUnit"),
            min_change_bytes=data.get("minChange"),
            flag_below_percent=data.get("flagBelowPercent"),
        )


class PreviewResultSerializer(serializers.Serializer):
    utilizationPercent = serializers.IntegerField(help_text="floor(100 x peak / declared), clamped to 0..100.")
    ratio = serializers.FloatField(help_text="The true peak / declared (may exceed 1).")
    recommendedMemory = serializers.CharField()
    recommendedBytes = serializers.IntegerField()
    freedBytes = serializers.IntegerField(help_text="Declared minus recommended; negative asks for more.")
    recommendation = serializers.CharField()
    overprovisioned = serializers.BooleanField()


class ReportRowSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="InferenceModel, Model (KubeAI) or ModelService.")
    model_id = serializers.IntegerField(help_text="The object's id within its kind.")
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    model_name = serializers.CharField()
    node_pool = serializers.CharField()
    declared_bytes = serializers.IntegerField(allow_null=True)
    peak_bytes = serializers.IntegerField(allow_null=True, help_text="Null: not enough data.")
    samples = serializers.IntegerField()
    utilization_percent = serializers.IntegerField(allow_null=True)
    ratio = serializers.FloatField(allow_null=True)
    recommended_bytes = serializers.IntegerField(allow_null=True)
    freed_bytes = serializers.IntegerField(allow_null=True)
    recommendation = serializers.CharField()
    overprovisioned = serializers.BooleanField()
    observed_at = serializers.DateTimeField()
    oom_killed = serializers.BooleanField(help_text="OOM-killed in the window: the recommendation only increases.")
    gpus_per_pod = serializers.IntegerField(allow_null=True)
    gpu_memory_peak_bytes = serializers.IntegerField(allow_null=True, help_text="Largest pod, summed over its GPUs.")
    gpu_capacity_bytes = serializers.IntegerField(allow_null=True, help_text="Framebuffer of one pod's GPUs.")
    kv_cache_peak_ratio = serializers.FloatField(allow_null=True)
    gpu_recommendation = serializers.CharField()
    cpu_request_millicores = serializers.IntegerField(allow_null=True)
    cpu_p95_millicores = serializers.IntegerField(allow_null=True)
    recommended_cpu_millicores = serializers.IntegerField(allow_null=True)
    cpu_recommendation = serializers.CharField()


class PoolTotalSerializer(serializers.Serializer):
    node_pool = serializers.CharField()
    models = serializers.IntegerField()
    declared_bytes = serializers.IntegerField()
    recommended_bytes = serializers.IntegerField()
    freed_bytes = serializers.IntegerField()
    needed_bytes = serializers.IntegerField()


class RefreshSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Refresh
        fields = [
            "id",
            "cluster",
            "started_at",
            "finished_at",
            "window_seconds",
            "ok",
            "error",
            "queries",
            "models_seen",
            "models_with_data",
        ]


class ReportSerializer(serializers.Serializer):
    models = ReportRowSerializer(many=True)
    pools = PoolTotalSerializer(many=True)
    refreshes = RefreshSerializer(many=True)


class ObservationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Observation
        fields = [
            "id",
            "kind",
            "object_id",
            "observed_at",
            "node_pool",
            "samples",
            "declared_bytes",
            "peak_bytes",
            "ratio",
            "utilization_percent",
            "recommended_bytes",
            "recommendation",
            "overprovisioned",
            "freed_bytes",
            "oom_killed",
            "gpus_per_pod",
            "gpu_memory_peak_bytes",
            "gpu_capacity_bytes",
            "kv_cache_peak_ratio",
            "gpu_recommendation",
            "cpu_request_millicores",
            "cpu_p95_millicores",
            "recommended_cpu_millicores",
            "cpu_recommendation",
        ]


class RefreshRequestSerializer(serializers.Serializer):
    cluster = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False,
        help_text="A registered cluster's name; absent: every cluster with a Prometheus URL.",
    )

    def validate_cluster(self, value: str) -> str:
        """Blank or unknown names a 400 naming the field (absent is the way to say every cluster)."""
        from clusters.models import Cluster

        if not value.strip():
            raise serializers.ValidationError(f'cluster: "{value}" is empty; name a cluster, or leave cluster out '
                                              "to refresh every cluster with a Prometheus URL")
        if not Cluster.objects.filter(name=value).exists():
            raise serializers.ValidationError(f'cluster: "{clip(value)}" is not a registered cluster')
        return value


def report_query_params() -> list[Any]:
    """The report's filters and ordering, for the OpenAPI schema."""
    from drf_spectacular.utils import OpenApiParameter

    from scheduler.rightsizing.report import SORTABLE, STATES

    return [
        OpenApiParameter("cluster", str, description="Cluster name."),
        OpenApiParameter("namespace", str),
        OpenApiParameter("node_pool", str),
        OpenApiParameter("q", str, description="Part of the object name."),
        OpenApiParameter("state", str, enum=list(STATES)),
        OpenApiParameter(
            "ordering", str, enum=[*SORTABLE, *(f"-{key}" for key in SORTABLE)], description="Default -freed_bytes."
        ),
    ]
