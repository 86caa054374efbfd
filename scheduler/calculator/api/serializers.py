"""Calculator request and preset serializers: every bad input is a 400 naming field, value and rule."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.validation.quantities import quantity_to_int
from scheduler.calculator.memory import (
    BYTES_PER_PARAMETER,
    DEFAULT_CUDA_CONTEXT_BYTES,
    DEFAULT_MAX_BATCHED_TOKENS,
    DEFAULT_UTILIZATION,
    format_count,
    parse_count,
)
from scheduler.calculator.presets import Preset, all_presets, preset


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

    ``preset`` fills what the request leaves out (parameters, dtype, the architecture's sizes, the
    MLA latent, the sliding window, context length); anything the request names wins.
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
    hidden_size = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)
    attention_heads = serializers.IntegerField(min_value=0, max_value=100_000, default=0, help_text="Query heads.")
    kv_heads = serializers.IntegerField(
        min_value=0, max_value=100_000, default=0, help_text="Key/value heads (GQA), not query heads."
    )
    head_dim = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)
    kv_values_per_token = serializers.IntegerField(
        min_value=1, max_value=100_000_000, required=False, allow_null=True,
        help_text="KV values cached per token and layer when not 2 x KV heads x head dim (MLA's latent).",
    )  # fmt: skip
    intermediate_size = serializers.IntegerField(
        min_value=0, max_value=10_000_000, default=0,
        help_text="MLP width one token passes through (mixture of experts: experts per token x expert size).",
    )  # fmt: skip
    gate_up_fused = serializers.BooleanField(default=False, help_text="Gate and up projections are one matrix.")
    experts_per_token = serializers.IntegerField(
        min_value=0, max_value=10_000, default=0, help_text="Routed experts per token (mixture of experts); 0: dense."
    )
    vocab_size = serializers.IntegerField(min_value=0, max_value=100_000_000, default=0)
    sliding_window = serializers.IntegerField(
        min_value=0, max_value=1_000_000_000, default=0, help_text="Tokens a sliding-window layer keeps; 0: none."
    )
    sliding_window_layers = serializers.IntegerField(
        min_value=0, max_value=100_000, default=0, help_text="How many of the layers attend through the window."
    )
    context_length = serializers.IntegerField(min_value=0, max_value=1_000_000_000, default=0)
    concurrent_sequences = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1)
    max_batched_tokens = serializers.IntegerField(
        min_value=1, max_value=100_000_000, default=DEFAULT_MAX_BATCHED_TOKENS,
        help_text="Tokens one forward step processes (vLLM's --max-num-batched-tokens, default 2,048).",
    )  # fmt: skip
    kv_dtype = serializers.ChoiceField(
        choices=["same", *BYTES_PER_PARAMETER], default="same", help_text="KV cache precision; same as dtype."
    )
    cuda_context = serializers.CharField(required=False, help_text="Quantity per GPU, default 621Mi (an H200's).")
    gpu_memory = serializers.CharField(required=False, help_text="Memory of one GPU, e.g. 80Gi.")
    gpu_utilization = serializers.FloatField(min_value=0.01, max_value=1.0, default=DEFAULT_UTILIZATION)
    tensor_parallel = serializers.IntegerField(
        min_value=1, max_value=64, default=1, help_text="GPUs one replica splits over."
    )

    def validate_cuda_context(self, value: str) -> int:
        return _quantity("cuda_context", value)

    def validate_gpu_memory(self, value: str) -> int:
        amount = _quantity("gpu_memory", value)
        if amount == 0:
            raise serializers.ValidationError(f"gpu_memory: {value!r} must be greater than zero")
        return amount

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        chosen = preset(attrs["preset"]) if attrs.get("preset") else None
        given = set(self.initial_data) if isinstance(self.initial_data, dict) else set()
        if chosen is not None:
            from_preset = {**chosen.estimate_kwargs(), "context_length": chosen.context_length}
            if {"kv_heads", "head_dim"} & given:
                from_preset.pop("kv_values_per_token")  # the heads named: 2 x KV heads x head dim, not the latent
            attrs.update({key: value for key, value in from_preset.items() if key not in given})
            if attrs["parameters"] == parse_count(format_count(chosen.parameters)):
                attrs["parameters"] = float(chosen.parameters)  # "8.03B" shown for the preset: its exact count
        elif "parameters" not in attrs:
            raise serializers.ValidationError({"parameters": ["parameters: is required without a preset (e.g. 7B)"]})
        heads = attrs["attention_heads"]
        if heads and heads % attrs["tensor_parallel"]:
            model = chosen.name if chosen else "the model"
            raise serializers.ValidationError(
                {
                    "tensor_parallel": [
                        f"tensor_parallel: {attrs['tensor_parallel']} must divide the {heads} attention heads "
                        f"of {model}"
                    ]
                }
            )
        attrs["preset_obj"] = chosen
        return attrs

    def to_estimate_kwargs(self) -> dict[str, Any]:
        data = {key: value for key, value in self.validated_data.items() if key not in ("preset", "preset_obj")}
        data["cuda_context_bytes"] = data.pop("cuda_context", DEFAULT_CUDA_CONTEXT_BYTES)
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
    intermediate_size = serializers.IntegerField(help_text="The dense MLP's width.")
    expert_intermediate_size = serializers.IntegerField(help_text="Each expert's MLP width (0: dense).")
    shared_experts = serializers.IntegerField()
    dense_layers = serializers.IntegerField(help_text="Layers with the dense MLP in a mixture of experts.")
    intermediate_per_token = serializers.IntegerField(help_text="The MLP width one token passes through.")
    gate_up_fused = serializers.BooleanField()
    vocab_size = serializers.IntegerField()
    sliding_window = serializers.IntegerField(help_text="Tokens a sliding-window layer keeps (0: none).")
    attention_pattern = serializers.CharField(help_text="S (sliding) and F (full) repeated from the first layer.")
    sliding_window_layers = serializers.IntegerField()
    kv_layout = serializers.ChoiceField(choices=["mha", "mla"])
    kv_values_per_token_per_layer = serializers.IntegerField()

    def get_parameters_display(self, obj: Preset) -> str:
        return format_count(obj.parameters)
