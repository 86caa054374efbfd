"""Request serializers of the planning API: every bad input is a 400 naming field, value and rule."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from clusters.api.exceptions import field_error_detail
from clusters.models import Cluster
from clusters.quantities import quantity_to_int
from clusters.validation import ManifestInvalid
from scheduler.calculator import BYTES_PER_PARAMETER, DEFAULT_OVERHEAD_BYTES, DEFAULT_UTILIZATION
from scheduler.proposals import Proposal, proposal_from_request


def _quantity(field: str, value: Any) -> int:
    amount = quantity_to_int(value)
    if amount is None or amount < 0:
        raise serializers.ValidationError(f"{field}: {value!r} is not a non-negative Kubernetes quantity (e.g. 80Gi)")
    return amount


class ProposedModelSerializer(serializers.Serializer):
    """One proposed model: an existing one (``kind`` + ``id``), the same with ``spec`` changes
    (a JSON merge patch over its spec), or a new one (``manifest``, a whole manifest)."""

    kind = serializers.CharField(required=False, help_text="Kind of an existing model (default InferenceModel).")
    id = serializers.IntegerField(required=False, help_text="Id of an existing model in the cluster.")
    spec = serializers.DictField(required=False, help_text="Changes to the existing model's spec (merge patch).")
    manifest = serializers.DictField(required=False, help_text="A new model's manifest (InferenceModel...).")
    estimate = serializers.DictField(
        required=False,
        help_text="A model known by numbers, e.g. a calculator result: {name, namespace, pool, memory, gpus, "
        "gpu_memory, accelerator, gpu_product}.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [key for key in ("manifest", "estimate", "id") if key in attrs]
        if not given:
            raise serializers.ValidationError("needs id (an existing model), manifest (a new one) or estimate")
        if len(given) > 1 or ("spec" in attrs and "id" not in attrs):
            raise serializers.ValidationError(
                "give one of manifest (a new model), estimate (numbers) or id (an existing one, with optional spec)"
            )
        return attrs


class PlanRequestSerializer(serializers.Serializer):
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), required=False, help_text="Defaults to the only cluster."
    )
    models = ProposedModelSerializer(many=True, help_text="Models to add to what runs now.")
    include_running = serializers.BooleanField(default=True, help_text="Place the models running now as well.")
    repack = serializers.BooleanField(
        default=False, help_text="Re-pack the running models with the proposal instead of keeping them where they are."
    )
    now = serializers.DateTimeField(required=False, help_text="Reference time for idleness (default: now).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Context ``clusters`` (a queryset) limits the clusters one may plan on: any other name is
        refused exactly as a name that does not exist. Context ``visible`` limits the namespaces."""
        super().__init__(*args, **kwargs)
        if self.context.get("clusters") is not None:
            self.fields["cluster"].queryset = self.context["clusters"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        cluster = attrs.get("cluster")
        if cluster is None:
            clusters = list(self.fields["cluster"].queryset[:2])
            if len(clusters) != 1:
                rule = f"cluster: is required when {len(clusters)} clusters exist"
                raise serializers.ValidationError({"cluster": [rule]})
            attrs["cluster"] = cluster = clusters[0]
        proposals: list[Proposal] = []
        try:
            for index, item in enumerate(attrs["models"]):
                proposals.append(proposal_from_request(item, index, cluster, self.context.get("visible")))
        except ManifestInvalid as invalid:
            raise serializers.ValidationError(field_error_detail(invalid.errors)) from None
        attrs["proposals"] = proposals
        return attrs


class CalculatorRequestSerializer(serializers.Serializer):
    """Each input is bounded a thousand times beyond today's largest models, so every term and the
    total stay finite numbers (``1e308`` parameters would make the weights infinite)."""

    parameters = serializers.FloatField(min_value=1, max_value=1e15, help_text="Parameter count, e.g. 7e9.")
    dtype = serializers.ChoiceField(choices=sorted(BYTES_PER_PARAMETER), default="bf16")
    layers = serializers.IntegerField(min_value=0, max_value=100_000, default=0)
    kv_heads = serializers.IntegerField(
        min_value=0, max_value=100_000, default=0, help_text="Key/value heads (GQA), not query heads."
    )
    head_dim = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)
    context_length = serializers.IntegerField(min_value=0, max_value=1_000_000_000, default=0)
    concurrent_sequences = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1)
    kv_dtype = serializers.ChoiceField(
        choices=["same", *sorted(BYTES_PER_PARAMETER)], default="same", help_text="KV cache precision; same as dtype."
    )
    overhead = serializers.CharField(required=False, help_text="Quantity, default 1Gi.")
    gpu_memory = serializers.CharField(required=False, help_text="Memory of one GPU, e.g. 80Gi.")
    gpu_utilization = serializers.FloatField(min_value=0.01, max_value=1.0, default=DEFAULT_UTILIZATION)

    def validate_overhead(self, value: str) -> int:
        return _quantity("overhead", value)

    def validate_gpu_memory(self, value: str) -> int:
        amount = _quantity("gpu_memory", value)
        if amount == 0:
            raise serializers.ValidationError(f"gpu_memory: {value!r} must be greater than zero")
        return amount

    def to_estimate_kwargs(self) -> dict[str, Any]:
        data = dict(self.validated_data)
        data["overhead_bytes"] = data.pop("overhead", DEFAULT_OVERHEAD_BYTES)
        if data["kv_dtype"] == "same":
            data["kv_dtype"] = None
        data["gpu_memory_bytes"] = data.pop("gpu_memory", None)
        return data
