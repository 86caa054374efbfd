"""Right-sizing configuration: Django's ``RIGHTSIZING`` setting (a dict) over these defaults.

Kept in the app so the project settings only need to name what differs, e.g.
``RIGHTSIZING = {"HEADROOM_PERCENT": 10, "WINDOW": "14d", "PERCENTILE": 0.99}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from django.conf import settings

from clusters.kinds import all_models
from clusters.validation.quantities import quantity_to_int
from scheduler.rightsizing.policy import Policy

DEFAULTS: dict[str, Any] = {
    # Policy (see policy.py for why these reproduce the reference example).
    "HEADROOM_PERCENT": 4,
    "ROUNDING_UNIT": "1Gi",
    "MIN_CHANGE": "1Gi",
    "FLAG_BELOW_PERCENT": 90,
    "PERCENTILE": None,
    "MIN_SAMPLES": 60,
    "WINDOW": "7d",
    # Where the metrics are (see queries.py for the convention).
    "POD_LABELS_METRIC": "kube_pod_labels",
    "MODEL_LABELS": None,  # None: every serving kind's own pod_label (see serving_kinds())
    "MEMORY_METRIC": 'container_memory_working_set_bytes{container!="",container!="POD"}',
    "GPU_MEMORY_METRIC": "DCGM_FI_DEV_FB_USED",  # MiB per GPU, labelled namespace/pod by dcgm-exporter
    "GPU_FREE_METRIC": "DCGM_FI_DEV_FB_FREE",  # MiB per GPU: used + free is the GPU's framebuffer
    "KV_CACHE_METRIC": '{__name__=~"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc"}',
    "OOM_METRIC": 'kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}',
    "CPU_METRIC": 'container_cpu_usage_seconds_total{container!="",container!="POD"}',
    "CPU_PERCENTILE": 0.95,  # KRR's simple strategy; see cpu_policy.py
    "GPU_MEMORY_UTILIZATION": 0.9,  # vLLM's default --gpu-memory-utilization
    "TIMEOUT_SECONDS": 30,
}

_DURATION = re.compile(r"(\d+)([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: str) -> int:
    """``"7d"`` -> 604800; a Prometheus duration with one unit."""
    match = _DURATION.fullmatch(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration like 7d, 12h or 30m")
    return int(match[1]) * _SECONDS[match[2]]


def format_duration(seconds: int) -> str:
    """604800 -> ``"7d"``: the largest unit up to days that divides exactly (PromQL and messages)."""
    for suffix in ("d", "h", "m"):
        if seconds % _SECONDS[suffix] == 0:
            return f"{seconds // _SECONDS[suffix]}{suffix}"
    return f"{seconds}s"


def option(name: str) -> Any:
    return {**DEFAULTS, **getattr(settings, "RIGHTSIZING", {})}[name]


def default_policy() -> Policy:
    """The policy the settings describe."""
    percentile = option("PERCENTILE")
    return Policy(
        headroom_percent=Fraction(str(option("HEADROOM_PERCENT"))),
        rounding_unit_bytes=quantity_to_int(option("ROUNDING_UNIT")) or 1,
        min_change_bytes=quantity_to_int(option("MIN_CHANGE")) or 0,
        flag_below_percent=int(option("FLAG_BELOW_PERCENT")),
        percentile=float(percentile) if percentile is not None else None,
        min_samples=int(option("MIN_SAMPLES")),
        window_seconds=parse_duration(option("WINDOW")),
    )


@dataclass(frozen=True)
class MetricsConvention:
    """How models are found in Prometheus; see queries.py."""

    pod_labels_metric: str
    model_labels: tuple[str, ...]
    memory_metric: str
    gpu_memory_metric: str
    kv_cache_metric: str
    gpu_free_metric: str = "DCGM_FI_DEV_FB_FREE"
    oom_metric: str = 'kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}'
    cpu_metric: str = 'container_cpu_usage_seconds_total{container!="",container!="POD"}'
    cpu_percentile: float = 0.95

    @classmethod
    def from_settings(cls) -> MetricsConvention:
        labels = option("MODEL_LABELS")
        return cls(
            pod_labels_metric=option("POD_LABELS_METRIC"),
            model_labels=tuple(labels if labels is not None else dict.fromkeys(k.pod_label for k in serving_kinds())),
            memory_metric=option("MEMORY_METRIC"),
            gpu_memory_metric=option("GPU_MEMORY_METRIC"),
            kv_cache_metric=option("KV_CACHE_METRIC"),
            gpu_free_metric=option("GPU_FREE_METRIC"),
            oom_metric=option("OOM_METRIC"),
            cpu_metric=option("CPU_METRIC"),
            cpu_percentile=float(option("CPU_PERCENTILE")),
        )


def serving_kinds() -> list[type]:
    """The registered kinds right-sizing judges: those that declare their pods (clusters/serving.py)."""
    return [model for model in all_models() if isinstance(getattr(model, "pod_label", None), str)]
