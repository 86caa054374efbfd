"""The memory calculator against hand-worked examples, through the API as well."""

from __future__ import annotations

from scheduler.calculator import estimate

GI = 1024**3


def test_7b_bf16_is_14_gb_of_weights_plus_a_llama_kv_cache():
    # Llama-2-7B: 32 layers, 32 KV heads, head dim 128; 4,096 tokens, one sequence, bf16.
    result = estimate(7e9, "bf16", layers=32, kv_heads=32, head_dim=128, context_length=4096,
                      gpu_memory_bytes=24 * GI)  # fmt: skip
    terms = {term.name: term.bytes for term in result.terms}
    assert terms["weights"] == 14_000_000_000  # 7e9 x 2 bytes
    assert terms["kv_cache"] == 2 * 32 * 32 * 128 * 2 * 4096 == 2 * GI
    assert terms["overhead"] == GI
    assert result.total_bytes == 14_000_000_000 + 3 * GI  # 16.04 GiB
    assert result.suggested_memory == "17Gi"
    assert result.usable_per_gpu_bytes == int(24 * GI * 0.9)
    assert result.gpu_count == 1


def test_70b_int4_with_gqa_and_many_sequences_needs_two_gpus():
    # 70e9 x 0.5 = 35e9 bytes; KV (fp16): 2 x 80 x 8 x 128 x 2 x 8,192 x 16 = 42,949,672,960 bytes = 40Gi
    result = estimate(70e9, "int4", layers=80, kv_heads=8, head_dim=128, context_length=8192, kv_dtype="fp16",
                      concurrent_sequences=16, overhead_bytes=2 * GI, gpu_memory_bytes=80 * GI)  # fmt: skip
    assert [t.bytes for t in result.terms] == [35_000_000_000, 40 * GI, 2 * GI]
    # total 35e9 + 42Gi = 74.6 GiB -> 75Gi; usable 72 GiB per 80Gi GPU -> 2 GPUs
    assert result.total_bytes == 35_000_000_000 + 42 * GI
    assert result.suggested_memory == f"{-(-result.total_bytes // GI)}Gi" == "75Gi"
    assert result.gpu_count == 2


def test_api_shows_every_term_and_names_bad_fields(api_as):
    client = api_as()
    response = client.post("/api/planning/calculator/", {"parameters": 7e9, "dtype": "fp32", "gpu_memory": "40Gi"},
                           format="json")  # fmt: skip
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["terms"][0] == {"name": "weights", "formula": "7,000,000,000 parameters x 4 bytes (fp32)",
                                "bytes": 28_000_000_000}  # fmt: skip
    assert body["suggested_memory"] == "28Gi" and body["gpu_count"] == 1  # 26.08 + 1 GiB on 36 GiB usable

    bad = client.post("/api/planning/calculator/", {"parameters": 7e9, "dtype": "fp64", "gpu_memory": "16GB!"},
                      format="json")  # fmt: skip
    assert bad.status_code == 400
    errors = bad.json()
    assert set(errors) == {"dtype", "gpu_memory"}
    assert "fp64" in errors["dtype"][0]
    assert errors["gpu_memory"] == ["gpu_memory: '16GB!' is not a non-negative Kubernetes quantity (e.g. 80Gi)"]
