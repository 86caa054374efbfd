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

from scheduler.calculator import BYTES_PER_PARAMETER

DATA = Path(__file__).with_name("data") / "model_presets.yaml"
_REQUIRED = ("parameters", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "context_length")


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
    experts: int = 0
    experts_per_token: int = 0
    kv_layout: str = "mha"
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0

    @property
    def kv_values_per_token_per_layer(self) -> int:
        """What the KV cache stores per token and layer: K and V per KV head, or MLA's one latent."""
        if self.kv_layout == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kv_values_per_token_per_layer": self.kv_values_per_token_per_layer}


def _checked(entry: dict[str, Any]) -> Preset:
    preset = Preset(**entry)
    for field in _REQUIRED:
        if not isinstance(getattr(preset, field), int) or getattr(preset, field) <= 0:
            raise ValueError(f"preset {preset.id}: {field} must be a positive integer, not {getattr(preset, field)!r}")
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
