"""One real Prometheus for the right-sizing tests, with deterministic history for every case.

Every series ends at ``END`` (a whole minute shortly before the session started); tests refresh
``at=END`` so windows are exact. Models (namespace/modelName) and what their history shows:

- default/llama-2-70b: the reference example. Two pods one after the other; the working set stays
  between 60Gi and 69.7Gi except one sample of exactly 75Gi in the second pod. The pod-level
  cgroup (container="") and the pause container (container="POD") are larger and must not count.
  GPU framebuffer 70000 MiB peak, vLLM KV cache 0.85 peak.
- team-b/llama-2-70b: same modelName in another namespace, peak 40Gi: must stay separate.
- default/few-samples: only 30 one-minute samples (below the 60-sample minimum).
- default/no-data: no series at all.
- default/over-peak: declared 16Gi in the tests, peak 20Gi.
- default/tiny: declared 512Mi, peak 100Mi.
- default/rounding: declared 40Gi, peak 30.5Gi.
- default/llmd-served: its pod carries only the llm-d.ai/model label.
- an unlabelled pod with 500Gi that belongs to no model.
- ml/kubeai-qwen (a KubeAI Model, pod label ``model``): two 80Gi GPUs (framebuffer peaks 72000 and
  71000 MiB), KV cache at most 20%, 40Gi of memory.
- ml/ms-llama (a ModelService, pod label ``llm-d.ai/model``): memory up to 70Gi and an OOM kill,
  CPU steady at 2 cores, two 80Gi GPUs, KV cache 95% at its peak.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.rightsizing.prometheus_server import GI, MI, History, PrometheusServer, minutes

WEEK_MINUTES = 7 * 24 * 60
END = (int(time.time()) // 60) * 60 - 120
MEMORY = "container_memory_working_set_bytes"


def _pod(history: History, namespace: str, pod: str, model_label: str, model: str, stamps: list[int]) -> None:
    history.add("kube_pod_labels", {"namespace": namespace, "pod": pod, model_label: model}, ((t, 1) for t in stamps))


def _memory(history: History, namespace: str, pod: str, points: list[tuple[int, float]], container="server") -> None:
    history.add(MEMORY, {"namespace": namespace, "pod": pod, "container": container}, points)


def build_history() -> History:
    history = History()
    eh = "label_inference_eh_ops_io_model"
    week = list(minutes(END, WEEK_MINUTES))
    first, second = week[:5000], week[5000:]

    # default/llama-2-70b: the reference example
    _pod(history, "default", "llama-0", eh, "llama-2-70b", first)
    _pod(history, "default", "llama-1", eh, "llama-2-70b", second)
    _memory(history, "default", "llama-0", [(t, 60 * GI + (i % 100) * 100 * MI) for i, t in enumerate(first)])
    peak_at = 3000
    _memory(
        history,
        "default",
        "llama-1",
        [(t, 75 * GI if i == peak_at else 60 * GI + (i % 97) * 100 * MI) for i, t in enumerate(second)],
    )
    _memory(history, "default", "llama-1", [(t, 90 * GI) for t in second], container="")
    _memory(history, "default", "llama-1", [(t, 100 * GI) for t in second], container="POD")
    history.add(
        "DCGM_FI_DEV_FB_USED",
        {"namespace": "default", "pod": "llama-1", "container": "server", "gpu": "0"},
        [(t, 70000 if i == 10 else 50000) for i, t in enumerate(second)],
    )
    history.add(
        "vllm:kv_cache_usage_perc",
        {"namespace": "default", "pod": "llama-1", "model_name": "llama-2-70b"},
        [(t, 0.85 if i == 20 else 0.5) for i, t in enumerate(second)],
    )

    # team-b/llama-2-70b: same name, other namespace
    _pod(history, "team-b", "llama-0", eh, "llama-2-70b", week)
    _memory(history, "team-b", "llama-0", [(t, 40 * GI if i == 7 else 30 * GI) for i, t in enumerate(week)])

    # default/few-samples: 30 samples
    recent = list(minutes(END, 30))
    _pod(history, "default", "few-0", eh, "few-samples", recent)
    _memory(history, "default", "few-0", [(t, 5 * GI) for t in recent])

    for pod, model, peak, base in [
        ("over-0", "over-peak", 20 * GI, 18 * GI),
        ("tiny-0", "tiny", 100 * MI, 80 * MI),
        ("rounding-0", "rounding", 30 * GI + 512 * MI, 20 * GI),
    ]:
        _pod(history, "default", pod, eh, model, week)
        _memory(history, "default", pod, [(t, peak if i == 99 else base) for i, t in enumerate(week)])

    # default/llmd-served: found through the second candidate label
    _pod(history, "default", "llmd-0", "label_llm_d_ai_model", "llmd-served", week)
    _memory(history, "default", "llmd-0", [(t, 12 * GI) for t in week])

    # a pod of no model
    _memory(history, "default", "stray-0", [(t, 500 * GI) for t in week])

    _serving_kinds(history, week)
    return history


def _gpus(history: History, namespace: str, pod: str, peaks: list[int], week: list[int]) -> None:
    """dcgm-exporter's framebuffer series (MiB) for each GPU of a pod: used, and free up to 80Gi."""
    for gpu, peak in enumerate(peaks):
        used = [(t, peak if i == 500 else peak - 20000) for i, t in enumerate(week)]
        labels = {"namespace": namespace, "pod": pod, "container": "vllm", "gpu": str(gpu)}
        history.add("DCGM_FI_DEV_FB_USED", labels, used)
        history.add("DCGM_FI_DEV_FB_FREE", labels, [(t, 81920 - value) for t, value in used])


def _serving_kinds(history: History, week: list[int]) -> None:
    _pod(history, "ml", "kubeai-qwen-0", "label_model", "kubeai-qwen", week)
    _memory(history, "ml", "kubeai-qwen-0", [(t, 40 * GI) for t in week])
    _gpus(history, "ml", "kubeai-qwen-0", [72000, 71000], week)
    history.add("vllm:kv_cache_usage_perc", {"namespace": "ml", "pod": "kubeai-qwen-0"},
                [(t, 0.2 if i == 42 else 0.05) for i, t in enumerate(week)])  # fmt: skip

    _pod(history, "ml", "ms-llama-decode-0", "label_llm_d_ai_model", "ms-llama", week)
    _memory(history, "ml", "ms-llama-decode-0", [(t, 70 * GI if i == 900 else 50 * GI) for i, t in enumerate(week)])
    history.add("kube_pod_container_status_last_terminated_reason",
                {"namespace": "ml", "pod": "ms-llama-decode-0", "container": "vllm", "reason": "OOMKilled"},
                [(t, 1 if i > 900 else 0) for i, t in enumerate(week)])  # fmt: skip
    history.add("container_cpu_usage_seconds_total",
                {"namespace": "ml", "pod": "ms-llama-decode-0", "container": "vllm"},
                [(t, 2.0 * 60 * i) for i, t in enumerate(week)])  # 2 cores, every minute  # fmt: skip
    _gpus(history, "ml", "ms-llama-decode-0", [74000, 74000], week)
    history.add("vllm:kv_cache_usage_perc", {"namespace": "ml", "pod": "ms-llama-decode-0"},
                [(t, 0.95 if i == 77 else 0.6) for i, t in enumerate(week)])  # fmt: skip


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    server = PrometheusServer(build_history())
    yield server
    server.stop()


@pytest.fixture
def end() -> datetime:
    return datetime.fromtimestamp(END, tz=UTC)
