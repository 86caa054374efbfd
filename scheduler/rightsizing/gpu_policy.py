"""GPU memory of a serving pod: framebuffer and KV cache -> ``--gpu-memory-utilization`` or fewer GPUs.

vLLM reserves ``gpu_memory_utilization`` (u, default 0.9) of every GPU at start: the weights, a
fixed allowance (activations, CUDA graphs; the calculator's 1Gi per GPU) and, in everything left,
the KV cache. So the DCGM framebuffer (``DCGM_FI_DEV_FB_USED``, summed over the pod's
tensor-parallel GPUs) stays near u x GPU memory whatever the load and cannot say what the model
needs; vLLM's KV-cache usage gauge (``vllm:kv_cache_usage_perc``) can:

- KV cache at or above 90% at its peak: requests waited for cache blocks. Raise u by 0.05 (up to
  0.95) or add a GPU.
- Below 50% with the served model's weights known (its Hugging Face id matches a calculator preset):
  needed = weights + allowance per GPU + peak KV use x 1.1 (10% headroom). The recommended u is
  needed / framebuffer, rounded up to 0.01; the fewest tensor-parallel GPUs (powers of two, fewer
  than now) whose u x memory still holds it, and the smallest common GPU type that holds it on the
  same count, are named too.
- Below 50% without known weights: said, with no invented figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clusters.validation.quantities import format_bytes
from scheduler.calculator.fit import GPU_TYPES
from scheduler.calculator.memory import DEFAULT_OVERHEAD_BYTES, DEFAULT_UTILIZATION, TENSOR_PARALLEL_SIZES
from scheduler.rightsizing.policy import format_memory

KV_HIGH = 0.9
KV_LOW = 0.5
KV_HEADROOM = 1.1
MAX_UTILIZATION = 0.95


@dataclass(frozen=True)
class GPUVerdict:
    recommended_utilization: float | None
    recommended_gpus: int | None
    recommendation: str


def gpu_verdict(
    gpus: int,
    framebuffer_peak_bytes: int | None,
    gpu_memory_bytes: int | None,
    kv_peak: float | None,
    weights_bytes: int | None,
    utilization: float = DEFAULT_UTILIZATION,
) -> GPUVerdict:
    """What the pod's GPU figures say (``gpu_memory_bytes``: one GPU's framebuffer)."""
    if not gpus or framebuffer_peak_bytes is None or not gpu_memory_bytes:
        return GPUVerdict(None, None, "")
    capacity = gpus * gpu_memory_bytes
    seen = f"GPU memory peak {format_memory(framebuffer_peak_bytes)} of {format_bytes(capacity)} on {gpus} GPU"
    seen += "s" if gpus > 1 else ""
    if kv_peak is None:
        return GPUVerdict(None, None, f"{seen}; no KV-cache metric to judge it by")
    kv = f"KV cache peaked at {math.floor(kv_peak * 100)}%"
    if kv_peak >= KV_HIGH:
        if utilization + 0.05 <= MAX_UTILIZATION + 1e-9:
            raised = round(utilization + 0.05, 2)
            return GPUVerdict(
                raised,
                None,
                f"{seen}; {kv}: raise --gpu-memory-utilization from {utilization:.2f} to {raised:.2f} or add a GPU",
            )
        return GPUVerdict(None, gpus * 2, f"{seen}; {kv}: serve on {gpus * 2} GPUs")
    if kv_peak >= KV_LOW:
        return GPUVerdict(None, None, f"{seen}; {kv}: the GPU memory fits")
    if not weights_bytes:
        return GPUVerdict(
            None,
            None,
            f"{seen}; {kv}: --gpu-memory-utilization can go down (the model's weights are unknown, so no figure)",
        )
    pool = utilization * capacity - weights_bytes - gpus * DEFAULT_OVERHEAD_BYTES
    kv_needed = max(0.0, pool) * kv_peak * KV_HEADROOM
    needed = weights_bytes + gpus * DEFAULT_OVERHEAD_BYTES + kv_needed
    target = min(utilization, math.ceil(needed / capacity * 100) / 100)
    text = f"{seen}; {kv}: lower --gpu-memory-utilization from {utilization:.2f} to {target:.2f}"
    fewer = next(
        (
            count
            for count in TENSOR_PARALLEL_SIZES
            if count < gpus
            and weights_bytes + count * DEFAULT_OVERHEAD_BYTES + kv_needed <= utilization * count * gpu_memory_bytes
        ),
        None,
    )
    if fewer:
        text += f", or serve on {fewer} GPU{'s' if fewer > 1 else ''}"
    smaller = [
        gpu
        for gpu in GPU_TYPES
        if gpu.memory_bytes < gpu_memory_bytes and needed <= utilization * gpus * gpu.memory_bytes
    ]
    if smaller:
        text += f", or on {gpus} x {min(smaller, key=lambda gpu: gpu.memory_bytes).name}"
    return GPUVerdict(target, fewer, text)
