"""Architecture presets of popular open models for the calculator (data in data/model_presets.yaml).

The numbers come from each model's published ``config.json`` (the file cites it per model), so a
user picks "Llama 3.1 70B" instead of typing layers, KV heads and head size by hand. Loaded once
and checked on load: a preset with a missing or non-positive number is a bug in the data file,
reported with the preset and field, never a wrong estimate later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from scheduler.calculator.memory import BYTES_PER_PARAMETER

DATA = Path(__file__).with_name("data") / "model_presets.yaml"
_REQUIRED = (
    "parameters", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "context_length",
    "intermediate_size", "vocab_size",
)  # fmt: skip


@dataclass(frozen=True)
class Preset:
    id: str
    name: str
    hf_id: str
    source: str
    parameters: int
    dtype: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    context_length: int
    intermediate_size: int
    vocab_size: int
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    sliding_window: int = 0
    attention_pattern: str = ""
    gate_up_fused: bool = False
    kv_layout: str = "mha"
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0

    @property
    def sliding_window_layers(self) -> int:
        """Layers attending through the window: the S positions of the pattern repeated over the layers."""
        if not self.sliding_window or not self.attention_pattern:
            return 0
        pattern = self.attention_pattern
        return sum(pattern[index % len(pattern)] == "S" for index in range(self.layers))

    @property
    def intermediate_per_token(self) -> int:
        """The MLP width one token passes through: the dense MLP, or its experts (routed plus shared),
        whichever layer is wider."""
        if not self.experts:
            return self.intermediate_size
        experts = (self.experts_per_token + self.shared_experts) * self.expert_intermediate_size
        return max(experts, self.intermediate_size if self.dense_layers else 0)

    @property
    def kv_values_per_token_per_layer(self) -> int:
        """What the KV cache stores per token and layer: K and V per KV head, or MLA's one latent."""
        if self.kv_layout == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "kv_values_per_token_per_layer": self.kv_values_per_token_per_layer,
            "sliding_window_layers": self.sliding_window_layers,
            "intermediate_per_token": self.intermediate_per_token,
        }

    def estimate_kwargs(self) -> dict[str, Any]:
        """The architecture as :func:`scheduler.calculator.memory.estimate` takes it."""
        return {
            "parameters": float(self.parameters),
            "dtype": self.dtype,
            "layers": self.layers,
            "hidden_size": self.hidden_size,
            "attention_heads": self.attention_heads,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "kv_values_per_token": self.kv_values_per_token_per_layer if self.kv_layout == "mla" else None,
            "intermediate_size": self.intermediate_per_token,
            "vocab_size": self.vocab_size,
            "sliding_window": self.sliding_window,
            "sliding_window_layers": self.sliding_window_layers,
            "gate_up_fused": self.gate_up_fused,
            "experts_per_token": self.experts_per_token if self.experts else 0,
        }


def _checked(entry: dict[str, Any]) -> Preset:
    preset = Preset(**entry)
    for field in _REQUIRED:
        if not isinstance(getattr(preset, field), int) or getattr(preset, field) <= 0:
            raise ValueError(f"preset {preset.id}: {field} must be a positive integer, not {getattr(preset, field)!r}")
    if preset.experts and not preset.expert_intermediate_size:
        raise ValueError(f"preset {preset.id}: a mixture of experts needs expert_intermediate_size")
    if set(preset.attention_pattern) - {"S", "F"} or bool(preset.sliding_window) != bool(preset.attention_pattern):
        raise ValueError(f"preset {preset.id}: sliding_window needs an attention_pattern of S and F, and only it")
    if preset.kv_layout not in ("mha", "mla") or (preset.kv_layout == "mla" and not preset.kv_lora_rank):
        raise ValueError(f"preset {preset.id}: kv_layout {preset.kv_layout!r} needs mha, or mla with kv_lora_rank")
    return preset


@cache
def all_presets() -> tuple[Preset, ...]:
    """Every preset, in the file's order (families together, small to large)."""
    return tuple(_checked(entry) for entry in yaml.safe_load(DATA.read_text()))


def preset(preset_id: str) -> Preset | None:
    return next((item for item in all_presets() if item.id == preset_id), None)


def published_weights_bytes(hf_id: str) -> int | None:
    """Weights of a served model named by its Hugging Face id, at the precision it is published in;
    None when no preset is that model (right-sizing then gives no GPU figure rather than a guess)."""
    wanted = hf_id.strip().lower()
    match = next((item for item in all_presets() if item.hf_id.lower() == wanted), None) if wanted else None
    return None if match is None else int(match.parameters * BYTES_PER_PARAMETER[match.dtype])
