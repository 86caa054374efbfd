"""Measure real GPU memory of model architectures (random bf16 weights) to check the portal's
memory calculator (scheduler/calculator/memory.py) on shapes and architectures beyond the reference set
in ../shared/gpu-measurements/ (same method: see its README).

Each case is (context tokens per sequence, concurrent sequences, tokens of each sequence per
forward step): a chunked prefill of `chunk x sequences` tokens a step, SDPA attention, a dynamic
KV cache, logits for the last position only. Records weights, state after the prefill (KV cache),
the peak allocated during the case and what the device reports with only a CUDA context.
Needs a CUDA GPU with PyTorch and transformers; writes $OUT/$OUTNAME (default calc_measured.json).
Arguments: model ids to measure (default all)."""

import gc
import json
import os
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

# Published config.json architectures (random weights: only shapes matter for memory).
MODELS = {
    "llama-3.2-3b-instruct": dict(
        model_type="llama",
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=28,
        num_attention_heads=24,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "mistral-7b-v0.1-swa": dict(
        model_type="mistral",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=32000,
        tie_word_embeddings=False,
        sliding_window=4096,
    ),
    "gemma-3-4b-it-text": dict(
        model_type="gemma3_text",
        hidden_size=2560,
        intermediate_size=10240,
        num_hidden_layers=34,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        vocab_size=262208,
        tie_word_embeddings=True,
        sliding_window=1024,
        sliding_window_pattern=6,
    ),
    "olmoe-1b-7b": dict(
        model_type="olmoe",
        hidden_size=2048,
        intermediate_size=1024,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        vocab_size=50304,
        num_experts=64,
        num_experts_per_tok=8,
        tie_word_embeddings=False,
    ),
    "qwen1.5-moe-a2.7b": dict(
        model_type="qwen2_moe",
        hidden_size=2048,
        intermediate_size=5632,
        moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=16,
        vocab_size=151936,
        num_experts=60,
        num_experts_per_tok=4,
        tie_word_embeddings=False,
    ),
    "llama-3.1-8b-instruct": dict(
        model_type="llama",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
    "qwen2.5-14b-instruct": dict(
        model_type="qwen2",
        hidden_size=5120,
        intermediate_size=13824,
        num_hidden_layers=48,
        num_attention_heads=40,
        num_key_value_heads=8,
        vocab_size=152064,
        tie_word_embeddings=False,
    ),
    "gemma-2-2b-it": dict(
        model_type="gemma2",
        hidden_size=2304,
        intermediate_size=9216,
        num_hidden_layers=26,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        vocab_size=256000,
        tie_word_embeddings=True,
        sliding_window=4096,
    ),
}
# (context tokens, concurrent sequences, tokens of each sequence per step)
CASES = [(8192, 1, 512), (16384, 2, 4096), (2048, 16, 2048), (4096, 4, 1024), (32768, 1, 8192)]


def used() -> int:
    """What the device reports in use (context + allocator), bytes."""
    free, total = torch.cuda.mem_get_info()
    return total - free


out = {
    "device": torch.cuda.get_device_name(0),
    "torch": torch.__version__,
    "transformers": transformers.__version__,
    "models": {},
}
torch.cuda.init()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
out["context_only_used"] = used()
deadline = time.time() + float(os.environ.get("BUDGET_S", "400"))
for mid in sys.argv[1:] or list(MODELS):
    if time.time() > deadline:
        print("budget spent before", mid, flush=True)
        break
    spec = dict(MODELS[mid])
    mtype = spec.pop("model_type")
    try:
        cfg = AutoConfig.for_model(mtype, **spec)
        cfg.max_position_embeddings = 40960
        t0 = time.time()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
        model.eval()
    except Exception as exc:  # an architecture this transformers lacks: say so, go on
        print(mid, "build failed:", repr(exc)[:300], flush=True)
        out["models"][mid] = {"error": repr(exc)[:300]}
        continue
    weights = torch.cuda.memory_allocated() - base
    rec = {
        "config": MODELS[mid],
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights_bytes": weights,
        "build_s": round(time.time() - t0, 1),
        "cases": [],
    }
    for ctx, seqs, chunk in CASES:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        try:
            with torch.inference_mode():
                past = None
                for start in range(0, ctx, chunk):
                    ids = torch.randint(0, cfg.vocab_size, (seqs, min(chunk, ctx - start)), device="cuda")
                    r = model(input_ids=ids, past_key_values=past, use_cache=True, logits_to_keep=1)
                    past = r.past_key_values
                torch.cuda.synchronize()
                rec["cases"].append(
                    {
                        "context": ctx,
                        "sequences": seqs,
                        "chunk": chunk,
                        "max_batched_tokens": chunk * seqs,
                        "state_bytes": torch.cuda.memory_allocated() - before,
                        "peak_bytes": torch.cuda.max_memory_allocated(),
                        "device_used_bytes": used(),
                    }
                )
                del r, past
        except torch.OutOfMemoryError:
            rec["cases"].append({"context": ctx, "sequences": seqs, "chunk": chunk, "error": "oom"})
        except Exception as exc:
            rec["cases"].append({"context": ctx, "sequences": seqs, "chunk": chunk, "error": repr(exc)[:300]})
    del model
    out["models"][mid] = rec
    print(mid, json.dumps(rec), flush=True)
    target = os.path.join(os.environ.get("OUT", "."), os.environ.get("OUTNAME", "calc_measured.json"))
    with open(target, "w") as sink:  # after every model, so a run cut short keeps what it measured
        json.dump(out, sink, indent=1)
print("done")
