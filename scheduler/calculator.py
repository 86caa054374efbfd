"""Model memory calculator: weights + KV cache + overhead against usable GPU memory.

Pure arithmetic, every term returned with its formula so the page and the API can show the
working. Terms (bytes):

- weights = parameters x bytes per parameter (fp32 4, bf16/fp16 2, int8/fp8 1, int4 0.5; AWQ and
  GPTQ are 4-bit with one fp16 scale and one 4-bit zero point per group of 128 weights, so
  (4 + 20/128) / 8 = 0.51953125 bytes)
- KV cache = values per token and layer x layers x KV bytes per value x context length x
  concurrent sequences, where values per token and layer is 2 (K and V) x KV heads x head dim, or
  a preset's own figure (DeepSeek's MLA caches one latent of kv_lora_rank + rope dims)
- overhead = a fixed allowance per GPU (CUDA context, activations, engine buffers; default 1Gi)

Usable memory per GPU is GPU memory x utilization (vLLM's ``gpu_memory_utilization``, default
0.9). The suggested ``memory`` is the total rounded up to a whole Gi (a valid InferenceModel
quantity). With tensor parallelism each GPU holds 1/tp of the weights and the KV cache plus its
own overhead; :func:`gpus_needed` finds the smallest split that fits a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

BYTES_PER_PARAMETER = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "awq": 0.51953125,
    "gptq": 0.51953125,
}
GI = 1024**3
DEFAULT_OVERHEAD_BYTES = GI
DEFAULT_UTILIZATION = 0.9
TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)  # one node: vLLM splits within a node by powers of two


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
    tensor_parallel: int = 1
    per_gpu_bytes: int = 0  # what each of the tensor-parallel GPUs holds
    fits_per_gpu: bool | None = None  # None without a GPU memory

    @property
    def shared_bytes(self) -> int:
        """Weights and KV cache: what tensor parallelism divides among the GPUs."""
        return sum(term.bytes for term in self.terms if term.name != "overhead")

    @property
    def overhead_bytes(self) -> int:
        return next(term.bytes for term in self.terms if term.name == "overhead")


@dataclass(frozen=True)
class GPUSplit:
    """How many GPUs of one memory size serve the model: tensor parallel within a node, pipeline
    stages across nodes when even a full node's split does not fit."""

    tensor_parallel: int
    pipeline_parallel: int
    per_gpu_bytes: int

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel


def per_gpu_bytes(shared_bytes: int, overhead_bytes: int, gpus: int) -> int:
    return math.ceil(shared_bytes / gpus) + overhead_bytes


def usable_bytes(gpu_memory_bytes: int, utilization: float) -> int:
    return math.floor(gpu_memory_bytes * utilization)


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
    tensor_parallel: int = 1,
    kv_values_per_token: int | None = None,
) -> Estimate:
    """Memory for serving a model; ``kv_dtype`` defaults to ``dtype`` (the KV cache is kept at model precision)."""
    weight_bytes = BYTES_PER_PARAMETER[dtype]
    kv_bytes = BYTES_PER_PARAMETER[kv_dtype or dtype]
    weights = math.ceil(parameters * weight_bytes)
    if kv_values_per_token:
        per_layer = f"{kv_values_per_token} values per token"
        values = kv_values_per_token
    else:
        per_layer = f"2 x {kv_heads} KV heads x {head_dim} head dim"
        values = 2 * kv_heads * head_dim
    kv = math.ceil(values * layers * kv_bytes * context_length * concurrent_sequences)
    terms = [
        Term("weights", f"{parameters:,.0f} parameters x {weight_bytes:g} bytes ({dtype})", weights),
        Term(
            "kv_cache",
            f"{per_layer} x {layers} layers x {kv_bytes:g} bytes "
            f"({kv_dtype or dtype}) x {context_length:,} tokens x {concurrent_sequences} sequences",
            kv,
        ),
        Term("overhead", "fixed allowance per GPU", overhead_bytes),
    ]
    total = weights + kv + overhead_bytes
    usable = usable_bytes(gpu_memory_bytes, gpu_utilization) if gpu_memory_bytes else None
    each = per_gpu_bytes(weights + kv, overhead_bytes, tensor_parallel)
    return Estimate(
        terms=terms,
        total_bytes=total,
        suggested_memory=f"{max(1, math.ceil(total / GI))}Gi",
        gpu_memory_bytes=gpu_memory_bytes,
        gpu_utilization=gpu_utilization,
        usable_per_gpu_bytes=usable,
        gpu_count=math.ceil(total / usable) if usable else None,
        tensor_parallel=tensor_parallel,
        per_gpu_bytes=each,
        fits_per_gpu=each <= usable if usable else None,
    )


def gpus_needed(
    result: Estimate, usable_per_gpu: int, attention_heads: int = 0, max_per_node: int = 8
) -> GPUSplit | None:
    """The smallest split of ``result`` over GPUs with ``usable_per_gpu`` bytes each.

    Tensor parallel first (sizes 1, 2, 4, 8 up to ``max_per_node``; vLLM needs the attention heads
    divisible by it), then pipeline stages of a full node. None when the overhead alone does not
    fit one GPU, or when more than 64 pipeline stages would be needed.
    """
    if usable_per_gpu <= result.overhead_bytes:
        return None
    sizes = [
        tp for tp in TENSOR_PARALLEL_SIZES if tp <= max_per_node and (not attention_heads or attention_heads % tp == 0)
    ]
    if not sizes:
        return None
    for tp in sizes:
        each = per_gpu_bytes(result.shared_bytes, result.overhead_bytes, tp)
        if each <= usable_per_gpu:
            return GPUSplit(tp, 1, each)
    widest = sizes[-1]
    for stages in range(2, 65):
        each = per_gpu_bytes(result.shared_bytes, result.overhead_bytes, widest * stages)
        if each <= usable_per_gpu:
            return GPUSplit(widest, stages, each)
    return None


_COUNT_SUFFIXES = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_count(text: str) -> float:
    """``"7B"``, ``"70.6b"``, ``"405B"``, ``"560M"``, ``"7e9"`` or ``"7000000000"`` -> a count.

    Raises ValueError naming the accepted forms, for the field error.
    """
    cleaned = str(text).strip().replace(",", "").replace("_", "")
    scale = _COUNT_SUFFIXES.get(cleaned[-1:].upper(), 1) if cleaned else 1
    number = cleaned[:-1] if scale != 1 else cleaned
    try:
        value = Decimal(number) * scale  # decimal: "8.03B" is exactly 8,030,000,000
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a count like 7B, 70.6B, 560M or 7e9") from None
    if not value.is_finite():
        raise ValueError(f"{text!r} is not a finite count")
    return float(value)


def format_count(value: float) -> str:
    """7e9 -> ``"7B"``, 8030261248 -> ``"8.03B"``, 560e6 -> ``"560M"``: what people call model sizes."""
    for suffix, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}" if value / size < 1000 else f"{value / size:.0f}{suffix}"
    return f"{value:g}"
