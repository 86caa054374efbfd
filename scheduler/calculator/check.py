"""The calculator against measured GPU memory (scheduler/calculator/data/gpu-measurements/, README there).

One comparison shared by the test that holds every case within 5% and the benchmark that reports
the largest error, so both judge the same thing: the calculator's total for the preset, the case's
context and sequences, the measured step size (``chunk`` tokens of each sequence) and the measured
CUDA context, against ``peak_bytes + context_only_used``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from scheduler.calculator.memory import estimate
from scheduler.calculator.presets import preset

COMMITTED = Path(__file__).with_name("data") / "gpu-measurements" / "h200-2026-11-26.json"
# Architectures and step sizes beyond the presets, each case with its own tokens per step
# (tools/gpu-measurements/ measured them): the check that the terms fit the physics, not the table.
BEYOND_PRESETS = COMMITTED.with_name("h100-2026-11-26.json")


@dataclass(frozen=True)
class Comparison:
    model: str
    context: int
    sequences: int
    calculated_bytes: int
    measured_bytes: int

    @property
    def error(self) -> float:
        """Relative error of the calculated total: negative is an underestimate (an OOM risk)."""
        return self.calculated_bytes / self.measured_bytes - 1

    def __str__(self) -> str:
        return (
            f"{self.model} context {self.context:,} x {self.sequences} sequences: {self.calculated_bytes:,} "
            f"calculated, {self.measured_bytes:,} measured ({self.error:+.2%})"
        )


def compare(path: Path = COMMITTED) -> list[Comparison]:
    """Every measured case of ``path``; a measured model without a preset, a parameter count that
    differs from the preset's, or a case that ran out of memory is an error in the data."""
    data = json.loads(path.read_text())
    context_only = data["context_only_used"]
    found = []
    for model_id, record in data["models"].items():
        chosen = preset(model_id)
        if chosen is None or chosen.parameters != record["parameters"]:
            raise ValueError(f"{path.name}: {model_id} is no preset with {record['parameters']:,} parameters")
        for case in record["cases"]:
            if "error" in case:
                raise ValueError(f"{path.name}: {model_id} {case} did not run")
            result = estimate(
                **chosen.estimate_kwargs(),
                context_length=case["context"],
                concurrent_sequences=case["sequences"],
                max_batched_tokens=data["chunk"] * case["sequences"],
                cuda_context_bytes=context_only,
            )
            measured = case["peak_bytes"] + context_only
            found.append(Comparison(model_id, case["context"], case["sequences"], result.total_bytes, measured))
    return found


def architecture_kwargs(config: dict) -> dict:
    """A published config.json's architecture as :func:`scheduler.calculator.memory.estimate` takes it
    (the fields the calculator page and API take for a model that has no preset)."""
    layers = config["num_hidden_layers"]
    window = config.get("sliding_window") or 0
    if not window:
        sliding = 0
    elif config["model_type"] == "gemma3_text":  # five local layers to one global
        sliding = layers - layers // config["sliding_window_pattern"]
    elif config["model_type"] == "gemma2":  # every other layer
        sliding = layers - layers // 2
    else:
        sliding = layers
    routed = config.get("num_experts_per_tok", 0)
    expert = config.get("moe_intermediate_size", config["intermediate_size"])
    return {
        "layers": layers,
        "hidden_size": config["hidden_size"],
        "attention_heads": config["num_attention_heads"],
        "kv_heads": config["num_key_value_heads"],
        "head_dim": config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"],
        "intermediate_size": routed * expert + config.get("shared_expert_intermediate_size", 0)
        if routed
        else config["intermediate_size"],
        "experts_per_token": routed,
        "vocab_size": config["vocab_size"],
        "sliding_window": window,
        "sliding_window_layers": sliding,
    }


def compare_architectures(path: Path = BEYOND_PRESETS) -> list[Comparison]:
    """Every case of a measurement that records each model's config and each case's step size."""
    data = json.loads(path.read_text())
    context_only = data["context_only_used"]
    found = []
    for model_id, record in data["models"].items():
        for case in record["cases"]:
            if "error" in case:
                raise ValueError(f"{path.name}: {model_id} {case} did not run")
            result = estimate(
                parameters=float(record["parameters"]),
                **architecture_kwargs(record["config"]),
                context_length=case["context"],
                concurrent_sequences=case["sequences"],
                max_batched_tokens=case["max_batched_tokens"],
                cuda_context_bytes=context_only,
            )
            measured = case["peak_bytes"] + context_only
            found.append(Comparison(model_id, case["context"], case["sequences"], result.total_bytes, measured))
    return found
