"""The memory calculator against hand-worked examples, through the API as well."""

from __future__ import annotations

from scheduler.calculator.memory import estimate

GI = 1024**3
MI = 1024**2


def test_7b_bf16_is_14_gb_of_weights_plus_a_llama_kv_cache_and_one_steps_activations():
    # Llama-2-7B: 32 layers, hidden 4,096, 32 heads = 32 KV heads of 128, MLP 11,008, vocabulary 32,000;
    # 4,096 tokens, one sequence, bf16, vLLM's 2,048 batched tokens, an H200's CUDA context.
    result = estimate(7e9, "bf16", layers=32, hidden_size=4096, attention_heads=32, kv_heads=32, head_dim=128,
                      intermediate_size=11008, vocab_size=32000, context_length=4096,
                      gpu_memory_bytes=24 * GI)  # fmt: skip
    terms = {term.name: term.bytes for term in result.terms}
    assert list(terms) == ["weights", "kv_cache", "activations", "logits", "cuda_context"]
    assert terms["weights"] == 14_000_000_000  # 7e9 x 2 bytes
    assert terms["kv_cache"] == 2 * 32 * 32 * 128 * 2 * 4096 == 2 * GI
    mask = 2048 * 4096  # one byte per (token, context position)
    mlp = 2048 * (4 * 4096 + 3 * 11008) * 2  # the MLP step: wider than attention's (no K/V to gather: MHA)
    assert mlp > 2048 * (2 * 4096 + 96 * 128) * 2 + 2048 * 4096 * 2
    assert terms["activations"] == mask + mlp == 210_763_776
    assert terms["logits"] == 32000 * 4
    assert terms["cuda_context"] == 621 * MI
    assert result.total_bytes == sum(terms.values())  # 13.04 + 2 + 0.20 + 0.61 = 15.85 GiB
    assert result.suggested_memory == "16Gi"
    assert result.usable_per_gpu_bytes == int(24 * GI * 0.9)
    assert result.gpu_count == 1


def test_70b_int4_with_gqa_and_many_sequences_needs_two_gpus():
    # 70e9 x 0.5 = 35e9 bytes; KV (fp16): 2 x 80 x 8 x 128 x 2 x 8,192 x 16 = 42,949,672,960 bytes = 40Gi
    result = estimate(70e9, "int4", layers=80, hidden_size=8192, attention_heads=64, kv_heads=8, head_dim=128,
                      intermediate_size=28672, vocab_size=128256, context_length=8192, kv_dtype="fp16",
                      concurrent_sequences=16, gpu_memory_bytes=80 * GI)  # fmt: skip
    terms = {term.name: term.bytes for term in result.terms}
    assert (terms["weights"], terms["kv_cache"]) == (35_000_000_000, 40 * GI)
    # Attention's step is the peak: 8 KV heads gathered to 64 query heads over 16 x 8,192 tokens (4 GiB).
    gathered = 2 * 16 * 64 * 8192 * 128 * 2
    attention = 2048 * (2 * 8192 + (64 + 2 * 8) * 128) * 2 + 2048 * 8192 * 2 + gathered
    assert terms["activations"] == 2048 * 8192 + attention
    assert terms["logits"] == 16 * 128256 * 4
    # 35e9 + 40Gi + 4.18 GiB + 621Mi = 77.97 GiB -> 78Gi; usable 72 GiB per 80Gi GPU -> 2 GPUs
    assert result.suggested_memory == f"{-(-result.total_bytes // GI)}Gi" == "78Gi"
    assert result.gpu_count == 2 and result.fits_per_gpu is False
    split = estimate(**{**_seventy_b_int4(), "tensor_parallel": 2})
    # Each GPU holds half the weights and KV cache and a whole copy of the per-GPU terms.
    assert split.per_gpu_bytes == -(-(35_000_000_000 + 40 * GI) // 2) + split.per_gpu_fixed_bytes
    assert split.fits_per_gpu is True


def _seventy_b_int4() -> dict:
    return dict(parameters=70e9, dtype="int4", layers=80, hidden_size=8192, attention_heads=64, kv_heads=8,
                head_dim=128, intermediate_size=28672, vocab_size=128256, context_length=8192, kv_dtype="fp16",
                concurrent_sequences=16, gpu_memory_bytes=80 * GI)  # fmt: skip


def test_api_shows_every_term_and_names_bad_fields(api_as):
    client = api_as()
    response = client.post("/api/planning/calculator/", {"parameters": 7e9, "dtype": "fp32", "gpu_memory": "40Gi"},
                           format="json")  # fmt: skip
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["terms"][0] == {"name": "weights", "formula": "7,000,000,000 parameters x 4 bytes (fp32)",
                                "bytes": 28_000_000_000}  # fmt: skip
    # 26.08 GiB of weights + 621 MiB of CUDA context (no architecture given: no KV, no activations)
    assert [term["name"] for term in body["terms"]] == ["weights", "kv_cache", "activations", "logits", "cuda_context"]
    assert body["total_bytes"] == 28_000_000_000 + 621 * MI
    assert body["suggested_memory"] == "27Gi" and body["gpu_count"] == 1  # on 36 GiB usable

    bad = client.post("/api/planning/calculator/", {"parameters": 7e9, "dtype": "fp64", "gpu_memory": "16GB!"},
                      format="json")  # fmt: skip
    assert bad.status_code == 400
    errors = bad.json()
    assert set(errors) == {"dtype", "gpu_memory"}
    assert "fp64" in errors["dtype"][0]
    assert errors["gpu_memory"] == ["gpu_memory: '16GB!' is not a non-negative Kubernetes quantity (e.g. 80Gi)"]
