"""Capacity: the memory calculator against measured GPU memory.

``calculator.max_abs_error_pct``: the largest |calculated / measured - 1| over every case of
scheduler/data/gpu-measurements/ (27 cases, 9 architectures, one NVIDIA H200), in percent; target
at most 5. It measures the calculator's arithmetic against torch's peak plus the CUDA context of
that one GPU and software stack (PyTorch SDPA, chunked prefill); it leaves out other engines'
kernels and allocators, and other GPUs.
"""

from __future__ import annotations

from scheduler.calculator_check import compare


def run() -> dict[str, float]:
    return {"calculator.max_abs_error_pct": round(max(abs(item.error) for item in compare()) * 100, 3)}
