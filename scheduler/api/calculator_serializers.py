"""Calculator request and preset serializers: every bad input is a 400 naming field, value and rule."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.validation.quantities import quantity_to_int
from scheduler.calculator import (
    BYTES_PER_PARAMETER,
    DEFAULT_OVERHEAD_BYTES,
    DEFAULT_UTILIZATION,
    format_count,
    parse_count,
)
from scheduler.presets import Preset, all_presets, preset


def _quantity(field: str, value: Any) -> int:
    amount = quantity_to_int(value)
    if amount is None or amount < 0:
        raise serializers.ValidationError(f"{field}: {value!r} is not a non-negative Kubernetes quantity (e.g. 80Gi)")
    return amount


@extend_schema_field({"oneOf": [{"type": "number"}, {"type": "string", "example": "70.6B"}]})
class ParameterCountField(serializers.Field):
    """A parameter count as a number (``7e9``) or as people write it (``"7B"``, ``"70.6B"``)."""

    default_error_messages = {"range": "parameters: {value!r} must be between 1 and 1e15 (e.g. 7B)"}

    def to_internal_value(self, data: Any) -> float:
        try:
            value = float(data) if isinstance(data, (int, float)) and not isinstance(data, bool) else parse_count(data)
        except ValueError as error:
            raise serializers.ValidationError(f"parameters: {error}") from None
        if not 1 <= value <= 1e15:
            self.fail("range", value=data)
        return value

    def to_representation(self, value: float) -> str:
        return format_count(value)


class CalculatorRequestSerializer(serializers.Serializer):
    """Each input is bounded a thousand times beyond today's largest models, so every term and the
    total stay finite numbers (``1e308`` parameters would make the weights infinite).

    ``preset`` fills what the request leaves out (parameters, dtype, layers, KV heads, head size,
    the MLA latent, context length); anything the request names wins.
    """

    preset = serializers.ChoiceField(
        choices=[item.id for item in all_presets()],
        required=False,
        help_text="A preset id from /api/planning/presets/.",
    )
    parameters = ParameterCountField(required=False, help_text="Parameter count, e.g. 7B, 70.6B or 7e9.")
    dtype = serializers.ChoiceField(
        choices=list(BYTES_PER_PARAMETER), default="bf16", help_text="Weight precision or quantization."
    )
    layers = serializers.IntegerField(min_value=0, max_value=100_000, default=0)
    kv_heads = serializers.IntegerField(
        min_value=0, max_value=100_000, default=0, help_text="Key/value heads (GQA), not query heads."
    )
    head_dim = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)
    kv_values_per_token = serializers.IntegerField(
        min_value=1, max_value=100_000_000, required=False, allow_null=True,
        help_text="KV values cached per token and layer when not 2 x KV heads x head dim (MLA's latent).",
    )  # fmt: skip
    context_length = serializers.IntegerField(min_value=0, max_value=1_000_000_000, default=0)
    concurrent_sequences = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1)
    kv_dtype = serializers.ChoiceField(
        choices=["same", *BYTES_PER_PARAMETER], default="same", help_text="KV cache precision; same as dtype."
    )
    overhead = serializers.CharField(required=False, help_text="Quantity per GPU, default 1Gi.")
    gpu_memory = serializers.CharField(required=False, help_text="Memory of one GPU, e.g. 80Gi.")
    gpu_utilization = serializers.FloatField(min_value=0.01, max_value=1.0, default=DEFAULT_UTILIZATION)
    tensor_parallel = serializers.IntegerField(
        min_value=1, max_value=64, default=1, help_text="GPUs one replica splits over."
    )

    def validate_overhead(self, value: str) -> int:
        return _quantity("overhead", value)

    def validate_gpu_memory(self, value: str) -> int:
        amount = _quantity("gpu_memory", value)
        if amount == 0:
            raise serializers.ValidationError(f"gpu_memory: {value!r} must be greater than zero")
        return amount

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        chosen = preset(attrs["preset"]) if attrs.get("preset") else None
        given = set(self.initial_data) if isinstance(self.initial_data, dict) else set()
        if chosen is not None:
            if "parameters" not in given:
                attrs["parameters"] = float(chosen.parameters)
            for field in ("dtype", "layers", "kv_heads", "head_dim", "context_length"):
                if field not in given:
                    attrs[field] = getattr(chosen, field)
            if chosen.kv_layout == "mla" and not {"kv_values_per_token", "kv_heads", "head_dim"} & given:
                attrs["kv_values_per_token"] = chosen.kv_values_per_token_per_layer
            if attrs["parameters"] == parse_count(format_count(chosen.parameters)):
                attrs["parameters"] = float(chosen.parameters)  # "8.03B" shown for the preset: its exact count
        elif "parameters" not in attrs:
            raise serializers.ValidationError({"parameters": ["parameters: is required without a preset (e.g. 7B)"]})
        heads = chosen.attention_heads if chosen else 0
        if heads and heads % attrs["tensor_parallel"]:
            raise serializers.ValidationError(
                {
                    "tensor_parallel": [
                        f"tensor_parallel: {attrs['tensor_parallel']} must divide the {heads} attention heads "
                        f"of {chosen.name}"
                    ]
                }
            )
        attrs["preset_obj"] = chosen
        return attrs

    def to_estimate_kwargs(self) -> dict[str, Any]:
        data = {key: value for key, value in self.validated_data.items() if key not in ("preset", "preset_obj")}
        data["overhead_bytes"] = data.pop("overhead", DEFAULT_OVERHEAD_BYTES)
        if data["kv_dtype"] == "same":
            data["kv_dtype"] = None
        data["gpu_memory_bytes"] = data.pop("gpu_memory", None)
        return data

    @property
    def chosen_preset(self) -> Preset | None:
        return self.validated_data.get("preset_obj")


class PresetSerializer(serializers.Serializer):
    """One model preset, as published in its config.json (``source``)."""

    id = serializers.CharField()
    name = serializers.CharField()
    hf_id = serializers.CharField(help_text="Hugging Face repository.")
    source = serializers.URLField(help_text="The config.json the numbers come from.")
    parameters = serializers.IntegerField(help_text="Total parameters (model card).")
    parameters_display = serializers.SerializerMethodField()
    dtype = serializers.CharField(help_text="Precision the checkpoint is published in.")
    layers = serializers.IntegerField()
    hidden_size = serializers.IntegerField()
    attention_heads = serializers.IntegerField()
    kv_heads = serializers.IntegerField()
    head_dim = serializers.IntegerField()
    context_length = serializers.IntegerField(help_text="max_position_embeddings.")
    experts = serializers.IntegerField(help_text="Routed experts (0: dense).")
    experts_per_token = serializers.IntegerField()
    kv_layout = serializers.ChoiceField(choices=["mha", "mla"])
    kv_values_per_token_per_layer = serializers.IntegerField()

    def get_parameters_display(self, obj: Preset) -> str:
        return format_count(obj.parameters)
