"""What one replica's engine says about itself, read from its Prometheus ``/metrics`` with vLLM's
metric names (prometheus_client's text parser; the names llm-d's endpoint picker reads):
``vllm:num_requests_waiting``, ``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc`` (else
the older ``vllm:gpu_cache_usage_perc``), ``vllm:lora_requests_info`` (the adapters running and
waiting, and ``max_lora``) and ``vllm:prefix_cache_queries_total`` / ``hits_total``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

WAITING, RUNNING = "vllm:num_requests_waiting", "vllm:num_requests_running"
KV_USAGE, KV_USAGE_OLD = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"
LORA_INFO = "vllm:lora_requests_info"
PREFIX_QUERIES, PREFIX_HITS = "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"


class NotEngineMetrics(ValueError):
    """The answer is not an inference engine's metrics (no queue gauge in it)."""


@dataclass(frozen=True)
class EngineState:
    """One scrape of one replica; ``read_at`` is the gateway's monotonic clock when it arrived."""

    waiting: float
    running: float
    kv_usage: float
    adapters: frozenset[str]  # running or waiting: the ones in (or about to take) a LoRA slot
    max_lora: int
    prefix_queries: float
    prefix_hits: float
    read_at: float


def parse(text: str, read_at: float) -> EngineState:
    """The state in an exposition; NotEngineMetrics when it has no ``vllm:num_requests_waiting``.
    Several series of one name (several engines behind one port: data parallel) are summed, the
    KV use averaged."""
    found: dict[str, list[float]] = {}
    adapters: set[str] = set()
    max_lora = 0
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as error:
        raise NotEngineMetrics(f"not Prometheus text: {error}") from error
    for family in families:
        for sample in family.samples:
            if sample.name == LORA_INFO:
                for key in ("running_lora_adapters", "waiting_lora_adapters"):
                    adapters.update(name for name in (sample.labels.get(key) or "").split(",") if name)
                with contextlib.suppress(ValueError):  # a label that is no number says nothing of the slots
                    max_lora = max(max_lora, int(sample.labels.get("max_lora") or 0))
            elif sample.name in (WAITING, RUNNING, KV_USAGE, KV_USAGE_OLD, PREFIX_QUERIES, PREFIX_HITS):
                found.setdefault(sample.name, []).append(sample.value)
    if WAITING not in found:
        raise NotEngineMetrics(f"no {WAITING} in it")
    kv = found.get(KV_USAGE) or found.get(KV_USAGE_OLD) or [0.0]
    return EngineState(
        waiting=sum(found[WAITING]), running=sum(found.get(RUNNING, [0.0])), kv_usage=sum(kv) / len(kv),
        adapters=frozenset(adapters), max_lora=max_lora, prefix_queries=sum(found.get(PREFIX_QUERIES, [0.0])),
        prefix_hits=sum(found.get(PREFIX_HITS, [0.0])), read_at=read_at,
    )
