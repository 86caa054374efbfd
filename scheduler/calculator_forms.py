"""The calculator page's form; validation is the API serializer's, so page and API refuse the same
input the same way (one error list, shown once, under the form's top)."""

from __future__ import annotations

from typing import Any

from django import forms

from scheduler.api.calculator_serializers import CalculatorRequestSerializer
from scheduler.calculator import BYTES_PER_PARAMETER, format_count
from scheduler.presets import Preset, all_presets

DTYPES = [(key, key) for key in BYTES_PER_PARAMETER]


class CalculatorForm(forms.Form):
    preset = forms.ChoiceField(
        required=False,
        choices=lambda: [("", "— type the architecture —"), *((item.id, item.name) for item in all_presets())],
        help_text="Fills the fields below from the model's config.json; change any of them before calculating.",
    )
    parameters = forms.CharField(initial="7B", help_text="e.g. 7B, 70.6B or 7e9")
    dtype = forms.ChoiceField(choices=DTYPES, initial="bf16", label="Weights dtype / quantization")
    layers = forms.IntegerField(initial=32, min_value=0)
    kv_heads = forms.IntegerField(initial=32, min_value=0, label="KV heads")
    head_dim = forms.IntegerField(initial=128, min_value=0, label="Head size")
    kv_values_per_token = forms.IntegerField(
        required=False, min_value=1, label="KV values per token and layer",
        help_text="Empty: 2 x KV heads x head size. MLA models (DeepSeek) cache one latent instead.",
    )  # fmt: skip
    context_length = forms.IntegerField(initial=4096, min_value=0)
    concurrent_sequences = forms.IntegerField(initial=1, min_value=1)
    kv_dtype = forms.ChoiceField(choices=[("same", "same as weights"), *DTYPES], initial="same", label="KV cache dtype")
    overhead = forms.CharField(initial="1Gi", help_text="Per GPU.")
    gpu_memory = forms.CharField(initial="80Gi", required=False, label="GPU memory")
    gpu_utilization = forms.FloatField(initial=0.9, label="GPU memory utilization")
    tensor_parallel = forms.IntegerField(initial=1, min_value=1, required=False, label="Tensor parallel size")

    @staticmethod
    def initial_for(chosen: Preset) -> dict[str, Any]:
        """The form's fields filled from a preset (its published dtype, a 4,096-token context)."""
        return {
            "preset": chosen.id,
            "parameters": format_count(chosen.parameters),
            "dtype": chosen.dtype,
            "layers": chosen.layers,
            "kv_heads": chosen.kv_heads,
            "head_dim": chosen.head_dim,
            "kv_values_per_token": chosen.kv_values_per_token_per_layer if chosen.kv_layout == "mla" else None,
            "context_length": min(chosen.context_length, 4096),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        payload = {key: value for key, value in data.items() if value not in (None, "")}
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
