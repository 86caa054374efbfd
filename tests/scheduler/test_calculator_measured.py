"""Issue 27: the calculator against memory measured on an NVIDIA H200 (9 architectures, 27 cases).

The answer for a case is ``peak_bytes + context_only_used``: torch's peak during a chunked prefill
of ``context`` tokens for each of ``sequences`` sequences, 2,048 tokens of each per step, plus what
the device uses with only a CUDA context (the measurement's README says how). The calculator gets
the preset's architecture, the case's context and sequences, ``max_batched_tokens`` = 2,048 x
sequences as measured, and the measured CUDA context; its total must be within 5% of every case.
The measurements are read from ``../shared/gpu-measurements/`` beside the repository when present
(new measurements land there first), else from the copy committed in scheduler/data/.
"""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.calculator import estimate
from scheduler.presets import preset

ROOT = Path(__file__).resolve().parents[2]
FILE = "h200-2026-11-26.json"
TOLERANCE = 0.05


def measurements() -> dict:
    shared = ROOT.parent / "shared" / "gpu-measurements" / FILE
    committed = ROOT / "scheduler" / "data" / "gpu-measurements" / FILE
    return json.loads((shared if shared.exists() else committed).read_text())


def errors() -> list[tuple[float, str]]:
    """(relative error of the calculator's total, description) for every measured case."""
    data = measurements()
    context_only = data["context_only_used"]
    found = []
    for model_id, record in data["models"].items():
        chosen = preset(model_id)
        assert chosen is not None, f"{model_id} was measured but is no preset"
        assert chosen.parameters == record["parameters"], model_id
        for case in record["cases"]:
            assert "error" not in case, (model_id, case)
            result = estimate(
                **chosen.estimate_kwargs(),
                context_length=case["context"],
                concurrent_sequences=case["sequences"],
                max_batched_tokens=data["chunk"] * case["sequences"],
                cuda_context_bytes=context_only,
            )
            measured = case["peak_bytes"] + context_only
            error = result.total_bytes / measured - 1
            shape = f"{model_id} context {case['context']} x {case['sequences']} sequences"
            found.append((error, f"{shape}: {result.total_bytes:,} calculated, {measured:,} measured ({error:+.2%})"))
    return found


def test_every_measured_case_is_within_five_percent():
    found = errors()
    assert len(found) == 27
    worst = max(found, key=lambda item: abs(item[0]))
    print(f"worst case: {worst[1]}")
    outside = [text for error, text in found if abs(error) > TOLERANCE]
    assert not outside, "\n".join(outside)


def test_sliding_window_layers_keep_their_window_and_the_kv_is_exact_elsewhere():
    data = measurements()
    gemma, llama = preset("gemma-2-9b-it"), preset("llama-3.1-8b-instruct")
    for chosen in (gemma, llama):
        for case in data["models"][chosen.id]["cases"]:
            shape = {"context_length": case["context"], "concurrent_sequences": case["sequences"]}
            result = estimate(**chosen.estimate_kwargs(), **shape, max_batched_tokens=2048 * case["sequences"])
            kv = next(term for term in result.terms if term.name == "kv_cache")
            assert abs(kv.bytes / case["state_bytes"] - 1) < 0.01, (chosen.id, case, kv)
    long = estimate(**gemma.estimate_kwargs(), context_length=32768)
    kv = next(term for term in long.terms if term.name == "kv_cache")
    # 21 full layers x 32,768 tokens + 21 sliding layers x (4,095 + 2,048) tokens, 2 x 8 x 256 x 2 bytes each
    assert kv.bytes == 2 * 8 * 256 * 2 * (21 * 32768 + 21 * (4095 + 2048))
    assert "21 sliding-window layers" in kv.formula
