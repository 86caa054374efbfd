"""Model memory calculator: what serving a model needs on a GPU, term by term.

Pure arithmetic, every term returned with its formula so the page and the API can show the
working. Checked against memory measured on an NVIDIA H200 (tests/scheduler/test_calculator_measured.py
and scheduler/calculator/data/gpu-measurements/). Terms (bytes):

- weights = parameters x bytes per parameter (fp32 4, bf16/fp16 2, int8/fp8 1, int4 0.5; AWQ and
  GPTQ are 4-bit with one fp16 scale and one 4-bit zero point per group of 128 weights, so
  (4 + 20/128) / 8 = 0.51953125 bytes)
- KV cache = values per token and layer x KV bytes per value x cached tokens, summed over layers:
  a full-attention layer caches context length x sequences tokens; a sliding-window layer keeps
  the last window - 1 tokens of each sequence plus the tokens of the step being processed
  (sequences x (window - 1) + max batched tokens, as vLLM sizes a sliding-window layer), never
  more than full attention. Values per token and layer is 2 (K and V) x KV heads x head dim, or
  a preset's own figure (DeepSeek's MLA caches one latent of kv_lora_rank + rope dims).
- activations = the largest buffers one forward step of ``max_batched_tokens`` tokens (N) holds
  at once, in the activation dtype (A bytes: 2, or 4 for fp32 models). A chunked-prefill step
  over a context of L tokens builds one boolean attention mask (N x L bytes) and then peaks in
  either of two places:
  the MLP: N x (4 x hidden + 3 x intermediate) x A (the residual stream, its normalized copy, the
  MLP output and the embeddings at hidden width; gate, activated gate and up projection, or the
  fused gate-up pair and its product, at intermediate width: 4 x intermediate when gate and up
  are one matrix), plus for a mixture of experts N x experts per token x 2 x hidden x A (routing
  gathers each token's hidden state once per chosen expert and holds each expert's output until
  the weighted sum: measured on OLMoE's 8 of 64 experts, 11% of the total at 32,768 tokens a
  step); or attention at the last chunk: N x (2 x hidden + (heads + 2 x KV heads) x
  head dim) x A for the residual stream and Q, K, V, plus the mask as an additive bias (N x L x
  A), plus - when KV heads are fewer than query heads - K and V gathered to every query head over
  the whole context (2 x sequences x heads x L x head dim x A). For a mixture of experts the
  intermediate width a token passes through is experts per token x expert intermediate size
  (plus shared experts).
- logits = sequences x vocabulary x 4 bytes: the last position of each sequence only, in fp32
  for sampling (serving engines do not keep logits for the whole prompt).
- CUDA context = what the device reports in use with only a CUDA context (measured 0.61 GiB on
  an H200 with CUDA 13; an input).

``max_batched_tokens`` defaults to 2,048, vLLM's ``--max-num-batched-tokens`` default for its
OpenAI server with chunked prefill. Usable memory per GPU is GPU memory x utilization (vLLM's
``gpu_memory_utilization``, default 0.9). The suggested ``memory`` is the total rounded up to a
whole Gi (a valid InferenceModel quantity). With tensor parallelism each GPU holds 1/tp of the
weights and the KV cache plus a whole copy of the per-GPU terms (activations, logits, CUDA
context: counted in full, the safe side); :func:`gpus_needed` finds the smallest split that fits.
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
MI = 1024**2
DEFAULT_OVERHEAD_BYTES = GI  # right-sizing's per-GPU engine allowance (scheduler/rightsizing/gpu_policy.py)
DEFAULT_CUDA_CONTEXT_BYTES = 621 * MI  # measured on an H200 (CUDA 13): 650,969,088 bytes
DEFAULT_MAX_BATCHED_TOKENS = 2048
DEFAULT_UTILIZATION = 0.9
LOGIT_BYTES = 4
TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)  # one node: vLLM splits within a node by powers of two
SHARED_TERMS = ("weights", "kv_cache")  # what tensor parallelism divides among the GPUs


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
        return sum(term.bytes for term in self.terms if term.name in SHARED_TERMS)

    @property
    def per_gpu_fixed_bytes(self) -> int:
        """Activations, logits and the CUDA context: what every GPU of a split holds in full."""
        return self.total_bytes - self.shared_bytes


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


def per_gpu_bytes(shared_bytes: int, fixed_bytes: int, gpus: int) -> int:
    return math.ceil(shared_bytes / gpus) + fixed_bytes


def usable_bytes(gpu_memory_bytes: int, utilization: float) -> int:
    return math.floor(gpu_memory_bytes * utilization)


def _kv_term(
    values: int,
    per_layer: str,
    layers: int,
    kv_bytes: float,
    kv_label: str,
    context_length: int,
    sequences: int,
    max_batched_tokens: int,
    sliding_window: int,
    sliding_layers: int,
) -> Term:
    """Full-attention layers cache the whole context; sliding-window layers their window plus a step."""
    sliding_layers = min(sliding_layers, layers) if sliding_window else 0
    full_layers = layers - sliding_layers
    full_tokens = context_length * sequences
    window_tokens = min(full_tokens, sequences * (sliding_window - 1) + max_batched_tokens) if sliding_layers else 0
    kv = math.ceil(values * kv_bytes * (full_layers * full_tokens + sliding_layers * window_tokens))
    formula = (
        f"{per_layer} x {kv_bytes:g} bytes ({kv_label}) x ({full_layers} full-attention layers x "
        f"{context_length:,} tokens x {sequences} sequences"
    )
    if sliding_layers:
        formula += (
            f" + {sliding_layers} sliding-window layers x min({full_tokens:,}, {sequences} sequences x "
            f"({sliding_window:,} window - 1) + {max_batched_tokens:,} batched tokens)"
        )
    return Term("kv_cache", formula + ")", kv)


def _activation_term(
    tokens: int,
    sequences: int,
    context_length: int,
    hidden_size: int,
    intermediate_size: int,
    attention_heads: int,
    kv_heads: int,
    head_dim: int,
    act_bytes: int,
    gate_up_fused: bool,
    experts_per_token: int = 0,
) -> Term:
    """The peak of one chunked-prefill step: the mask, then the larger of the MLP and attention."""
    mask = tokens * context_length
    widths = 4 if gate_up_fused else 3
    routed = 2 * hidden_size * experts_per_token  # a token's copies to its experts and their outputs
    mlp = tokens * (4 * hidden_size + widths * intermediate_size + routed) * act_bytes
    grouped = attention_heads > kv_heads  # grouped-query attention: K and V are copied out per query head
    gathered = 2 * sequences * attention_heads * context_length * head_dim * act_bytes if grouped else 0
    attention = (
        tokens * (2 * hidden_size + (attention_heads + 2 * kv_heads) * head_dim) * act_bytes
        + tokens * context_length * act_bytes
        + gathered
    )
    gather_text = (
        f" + 2 x {sequences} sequences x {attention_heads} heads x {context_length:,} tokens x {head_dim} head dim x "
        f"{act_bytes} bytes (K and V gathered per query head)"
        if gathered
        else ""
    )
    formula = (
        f"{tokens:,} batched tokens x {context_length:,} tokens x 1 byte (attention mask) + max(MLP: {tokens:,} x "
        f"(4 x {hidden_size} hidden + {widths} x {intermediate_size} intermediate"
        + (f" + 2 x {hidden_size} hidden x {experts_per_token} experts per token" if experts_per_token else "")
        + f") x {act_bytes} bytes = {mlp:,}; "
        f"attention: {tokens:,} x (2 x {hidden_size} hidden + ({attention_heads} + 2 x {kv_heads}) heads x "
        f"{head_dim} head dim) x {act_bytes} bytes + {tokens:,} x {context_length:,} x {act_bytes} bytes (mask as bias)"
        f"{gather_text} = {attention:,})"
    )
    return Term("activations", formula, mask + max(mlp, attention))


def estimate(
    parameters: float,
    dtype: str = "bf16",
    layers: int = 0,
    kv_heads: int = 0,
    head_dim: int = 0,
    context_length: int = 0,
    concurrent_sequences: int = 1,
    kv_dtype: str | None = None,
    gpu_memory_bytes: int | None = None,
    gpu_utilization: float = DEFAULT_UTILIZATION,
    tensor_parallel: int = 1,
    kv_values_per_token: int | None = None,
    hidden_size: int = 0,
    attention_heads: int = 0,
    intermediate_size: int = 0,
    vocab_size: int = 0,
    sliding_window: int = 0,
    sliding_window_layers: int = 0,
    gate_up_fused: bool = False,
    experts_per_token: int = 0,
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS,
    cuda_context_bytes: int = DEFAULT_CUDA_CONTEXT_BYTES,
) -> Estimate:
    """Memory for serving a model; ``kv_dtype`` defaults to ``dtype`` (the KV cache is kept at model
    precision). ``intermediate_size`` is the MLP width one token passes through (for a mixture of
    experts: experts per token x expert size, plus shared experts); ``experts_per_token`` the routed
    experts of a mixture of experts (0: dense)."""
    weight_bytes = BYTES_PER_PARAMETER[dtype]
    kv_bytes = BYTES_PER_PARAMETER[kv_dtype or dtype]
    act_bytes = 4 if dtype == "fp32" else 2  # quantized weights still compute in 16-bit
    weights = math.ceil(parameters * weight_bytes)
    if kv_values_per_token:
        per_layer = f"{kv_values_per_token} values per token"
        values = kv_values_per_token
    else:
        per_layer = f"2 x {kv_heads} KV heads x {head_dim} head dim"
        values = 2 * kv_heads * head_dim
    kv = _kv_term(
        values, per_layer, layers, kv_bytes, kv_dtype or dtype, context_length, concurrent_sequences,
        max_batched_tokens, sliding_window, sliding_window_layers,
    )  # fmt: skip
    activations = _activation_term(
        max_batched_tokens, concurrent_sequences, context_length, hidden_size, intermediate_size, attention_heads,
        kv_heads, head_dim, act_bytes, gate_up_fused, experts_per_token,
    )  # fmt: skip
    logits = concurrent_sequences * vocab_size * LOGIT_BYTES
    terms = [
        Term("weights", f"{parameters:,.0f} parameters x {weight_bytes:g} bytes ({dtype})", weights),
        kv,
        activations,
        Term(
            "logits",
            f"{concurrent_sequences} sequences x {vocab_size:,} vocabulary x {LOGIT_BYTES} bytes "
            "(fp32, last position only)",
            logits,
        ),
        Term("cuda_context", "per GPU, what the device uses with only a CUDA context", cuda_context_bytes),
    ]
    total = sum(term.bytes for term in terms)
    shared = weights + kv.bytes
    usable = usable_bytes(gpu_memory_bytes, gpu_utilization) if gpu_memory_bytes else None
    each = per_gpu_bytes(shared, total - shared, tensor_parallel)
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
    result: Estimate, usable_per_gpu: int, attention_heads: int = 0, max_per_node: int = 8, max_nodes: int = 64
) -> GPUSplit | None:
    """The smallest split of ``result`` over GPUs with ``usable_per_gpu`` bytes each.

    Tensor parallel first (sizes 1, 2, 4, 8 up to ``max_per_node``; vLLM needs the attention heads
    divisible by it), then pipeline stages of a full node, one node each. None when the per-GPU
    terms alone do not fit one GPU, or when more stages than ``max_nodes`` would be needed (a
    pool's nodes: a split of 4 nodes was proposed on a pool of 2, issue 43; at most 64).
    """
    if usable_per_gpu <= result.per_gpu_fixed_bytes:
        return None
    sizes = [
        tp for tp in TENSOR_PARALLEL_SIZES if tp <= max_per_node and (not attention_heads or attention_heads % tp == 0)
    ]
    if not sizes:
        return None
    for tp in sizes:
        each = per_gpu_bytes(result.shared_bytes, result.per_gpu_fixed_bytes, tp)
        if each <= usable_per_gpu:
            return GPUSplit(tp, 1, each)
    widest = sizes[-1]
    for stages in range(2, min(max_nodes, 64) + 1):
        each = per_gpu_bytes(result.shared_bytes, result.per_gpu_fixed_bytes, widest * stages)
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
