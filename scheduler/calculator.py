"""Model memory calculator: weights + KV cache + overhead against usable GPU memory.

Pure arithmetic, every term returned with its formula so the page and the API can show the
working. Terms (bytes):

- weights = parameters x bytes per parameter (fp32 4, bf16/fp16 2, int8/fp8 1, int4 0.5)
- KV cache = 2 (K and V) x layers x KV heads x head dim x KV bytes per value x context length x
  concurrent sequences
- overhead = a fixed allowance (CUDA context, activations, engine buffers; default 1Gi)

Usable memory per GPU is GPU memory x utilization (vLLM's ``gpu_memory_utilization``, default
0.9). The suggested ``memory`` is the total rounded up to a whole Gi (a valid InferenceModel
quantity), the GPU count the total divided by usable memory per GPU, rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BYTES_PER_PARAMETER = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
GI = 1024**3
DEFAULT_OVERHEAD_BYTES = GI
DEFAULT_UTILIZATION = 0.9


@dataclass(frozen=True)
class Term:
    name: str
    formula: str
    bytes: int


@dataclass(frozen=True)
class Estimate:
    terms: list[Term]
    total_bytes: int
    suggested_memory: str
    gpu_memory_bytes: int | None
    gpu_utilization: float
    usable_per_gpu_bytes: int | None
    gpu_count: int | None


def estimate(
    parameters: float,
    dtype: str = "bf16",
    layers: int = 0,
    kv_heads: int = 0,
    head_dim: int = 0,
    context_length: int = 0,
    concurrent_sequences: int = 1,
    kv_dtype: str | None = None,
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES,
    gpu_memory_bytes: int | None = None,
    gpu_utilization: float = DEFAULT_UTILIZATION,
) -> Estimate:
    """Memory for serving a model; ``kv_dtype`` defaults to ``dtype`` (the KV cache is kept at model precision)."""
    weight_bytes = BYTES_PER_PARAMETER[dtype]
    kv_bytes = BYTES_PER_PARAMETER[kv_dtype or dtype]
    weights = math.ceil(parameters * weight_bytes)
    kv = math.ceil(2 * layers * kv_heads * head_dim * kv_bytes * context_length * concurrent_sequences)
    terms = [
        Term("weights", f"{parameters:,.0f} parameters x {weight_bytes:g} bytes ({dtype})", weights),
        Term(
            "kv_cache",
            f"2 x {layers} layers x {kv_heads} KV heads x {head_dim} head dim x {kv_bytes:g} bytes "
            f"({kv_dtype or dtype}) x {context_length:,} tokens x {concurrent_sequences} sequences",
            kv,
        ),
        Term("overhead", "fixed allowance", overhead_bytes),
    ]
    total = weights + kv + overhead_bytes
    usable = math.floor(gpu_memory_bytes * gpu_utilization) if gpu_memory_bytes else None
    return Estimate(
        terms=terms,
        total_bytes=total,
        suggested_memory=f"{max(1, math.ceil(total / GI))}Gi",
        gpu_memory_bytes=gpu_memory_bytes,
        gpu_utilization=gpu_utilization,
        usable_per_gpu_bytes=usable,
        gpu_count=math.ceil(total / usable) if usable else None,
    )
