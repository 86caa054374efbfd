"""Capacity: the memory calculator against measured GPU memory.

``calculator.max_abs_error_pct``: the largest |calculated / measured - 1| over every case of
scheduler/calculator/data/gpu-measurements/ (27 cases, 9 architectures, one NVIDIA H200), in percent; target
at most 5. It measures the calculator's arithmetic against torch's peak plus the CUDA context of
that one GPU and software stack (PyTorch SDPA, chunked prefill); it leaves out other engines'
kernels and allocators, and other GPUs.

``calculator.max_abs_error_pct_beyond_presets``: the same over 40 cases of 8 architectures that
are no preset (h100-2026-11-26.json: sliding window on every layer, Gemma 3, two mixtures of
experts) at 512 to 32,768 tokens per step, one NVIDIA H100, each from its config.json's numbers.
"""

from __future__ import annotations

from scheduler.calculator.check import compare, compare_architectures


def run() -> dict[str, float]:
    return {
        "calculator.max_abs_error_pct": round(max(abs(item.error) for item in compare()) * 100, 3),
        "calculator.max_abs_error_pct_beyond_presets": round(
            max(abs(item.error) for item in compare_architectures()) * 100, 3
        ),
    }
