"""The calculator page's form; validation is the API serializer's, so page and API refuse the same
input the same way (one error list, shown once, under the form's top)."""

from __future__ import annotations

from typing import Any

from django import forms

from scheduler.calculator.api.serializers import CalculatorRequestSerializer
from scheduler.calculator.memory import BYTES_PER_PARAMETER, DEFAULT_MAX_BATCHED_TOKENS, format_count
from scheduler.calculator.presets import Preset, all_presets

DTYPES = [(key, key) for key in BYTES_PER_PARAMETER]


# What a preset fills: on a form with a preset chosen, these come from the preset unless the user
# changed them from what the page showed (so picking a preset and pressing Calculate computes
# that preset, not the page's defaults).
ARCHITECTURE_FIELDS = (
    "parameters", "dtype", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "kv_values_per_token",
    "intermediate_size", "gate_up_fused", "experts_per_token", "vocab_size", "sliding_window", "sliding_window_layers",
)  # fmt: skip


class CalculatorForm(forms.Form):
    preset = forms.ChoiceField(
        required=False,
        choices=lambda: [("", "— type the architecture —"), *((item.id, item.name) for item in all_presets())],
        help_text="The model's config.json fills the architecture; fields you change win.",
    )
    parameters = forms.CharField(initial="7B", help_text="e.g. 7B, 70.6B or 7e9")
    dtype = forms.ChoiceField(choices=DTYPES, initial="bf16", label="Weights dtype / quantization")
    layers = forms.IntegerField(initial=32, min_value=0)
    hidden_size = forms.IntegerField(initial=4096, min_value=0, required=False)
    attention_heads = forms.IntegerField(initial=32, min_value=0, required=False)
    kv_heads = forms.IntegerField(initial=32, min_value=0, label="KV heads")
    head_dim = forms.IntegerField(initial=128, min_value=0, label="Head size")
    kv_values_per_token = forms.IntegerField(
        required=False, min_value=1, label="KV values per token and layer",
        help_text="Empty: 2 x KV heads x head size. MLA models (DeepSeek) cache one latent instead.",
    )  # fmt: skip
    intermediate_size = forms.IntegerField(
        initial=11008,
        min_value=0,
        required=False,
        help_text="MLP width per token (mixture of experts: experts per token x expert size).",
    )
    gate_up_fused = forms.BooleanField(required=False, label="Gate and up projections fused")
    experts_per_token = forms.IntegerField(
        initial=0, min_value=0, required=False, label="Experts per token", help_text="Mixture of experts; 0: dense."
    )
    vocab_size = forms.IntegerField(initial=32000, min_value=0, required=False, label="Vocabulary size")
    sliding_window = forms.IntegerField(
        initial=0, min_value=0, required=False, help_text="Tokens; 0: every layer attends fully."
    )
    sliding_window_layers = forms.IntegerField(
        initial=0, min_value=0, required=False, label="Layers using the sliding window"
    )
    context_length = forms.IntegerField(initial=4096, min_value=0)
    concurrent_sequences = forms.IntegerField(initial=1, min_value=1)
    max_batched_tokens = forms.IntegerField(
        initial=DEFAULT_MAX_BATCHED_TOKENS,
        min_value=1,
        required=False,
        help_text="Tokens per forward step (vLLM's default 2,048).",
    )
    kv_dtype = forms.ChoiceField(choices=[("same", "same as weights"), *DTYPES], initial="same", label="KV cache dtype")
    cuda_context = forms.CharField(initial="621Mi", required=False, label="CUDA context", help_text="Per GPU.")
    gpu_memory = forms.CharField(initial="80Gi", required=False, label="GPU memory")
    gpu_utilization = forms.FloatField(initial=0.9, label="GPU memory utilization")
    tensor_parallel = forms.IntegerField(initial=1, min_value=1, required=False, label="Tensor parallel size")

    @staticmethod
    def initial_for(chosen: Preset) -> dict[str, Any]:
        """The form's fields filled from a preset (its published dtype, a 4,096-token context)."""
        fields = chosen.estimate_kwargs()
        return {
            **{key: fields[key] for key in ARCHITECTURE_FIELDS},
            "preset": chosen.id,
            "parameters": format_count(chosen.parameters),
            "context_length": min(chosen.context_length, 4096),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        payload = {key: value for key, value in data.items() if value not in (None, "")}
        if data.get("preset"):
            unchanged = set(ARCHITECTURE_FIELDS) - set(self.changed_data)
            payload = {key: value for key, value in payload.items() if key not in unchanged}
        serializer = CalculatorRequestSerializer(data=payload)
        if not serializer.is_valid():
            for key, messages in serializer.errors.items():
                for message in messages if isinstance(messages, list) else [messages]:
                    text = str(message)
                    self.add_error(key if key in self.fields else None, text)
        else:
            data["estimate_kwargs"] = serializer.to_estimate_kwargs()
            data["chosen_preset"] = serializer.chosen_preset
        return data
