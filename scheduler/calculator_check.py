"""The calculator against measured GPU memory (scheduler/data/gpu-measurements/, README there).

One comparison shared by the test that holds every case within 5% and the benchmark that reports
the largest error, so both judge the same thing: the calculator's total for the preset, the case's
context and sequences, the measured step size (``chunk`` tokens of each sequence) and the measured
CUDA context, against ``peak_bytes + context_only_used``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from scheduler.calculator import estimate
from scheduler.presets import preset

COMMITTED = Path(__file__).with_name("data") / "gpu-measurements" / "h200-2026-11-26.json"


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
