"""The saturation filter and the weighted scorers, after llm-d's inference scheduler (the Gateway API
Inference Extension's endpoint picker, "EPP").

**Defaults, with where they come from.** Saturation: a replica is saturated when its waiting queue is
over 5 requests or its KV cache over 0.8 used, or its metrics are older than 200 ms; the metrics
are read every 50 ms (GIE, pkg/epp/saturationdetector/config.go: ``DefaultQueueDepthThreshold = 5``,
``DefaultKVCacheUtilThreshold = 0.8``, ``DefaultMetricsStalenessThreshold = 200ms``, "the pod
metrics refresh interval is 50ms"). Weights: prefix cache 3, queue 2, KV cache 2 (llm-d's default
scheduling profile: ``prefix-cache-scorer`` 3, ``queue-scorer`` 2, ``kv-cache-utilization-scorer``
2, as llm-d's inference-scheduling guide and Red Hat's documentation of it set them), LoRA affinity 1
(GIE's ``lora-affinity-scorer``, weight 1 in its default configuration).

**Scores**, each from 0 to 1 over the replicas left after the filter:

- ``queue``: ``(most - this) / (most - least)`` of the waiting queue (1 for all when equal), GIE's
  queue scorer. The queue is the engine's ``num_requests_waiting``, or, when more, the requests
  this gateway has in flight there beyond what the engine reported running: requests sent since the
  last read (up to 50 ms ago) are seen at once, so a burst is not all sent to one replica.
- ``kv-cache``: ``1 - kv_cache_usage_perc``.
- ``prefix-cache``: the share of the request's prefix this replica was sent before
  (``picking.prefix``).
- ``lora-affinity``: 1 when the adapter is loaded (running or waiting there), 0.8 when it has a
  free LoRA slot, 0 otherwise (GIE's LoRA affinity scorer); 1 for every replica without an adapter.

The replica with the highest weighted sum takes the request (ties: fewest in flight, then least
recently picked). The *deciding scorer* named in the answer's header is the one that gave the
winner most of its lead over the runner-up.
"""

from __future__ import annotations

from dataclasses import dataclass

QUEUE_THRESHOLD = 5
KV_THRESHOLD = 0.8
STALE_SECONDS = 0.2
SCRAPE_SECONDS = 0.05
LORA_ROOM = 0.8

QUEUE, KV, PREFIX, LORA = "queue", "kv-cache", "prefix-cache", "lora-affinity"
SCORERS = (PREFIX, QUEUE, KV, LORA)


@dataclass(frozen=True)
class Weights:
    prefix: float = 3.0
    queue: float = 2.0
    kv: float = 2.0
    lora: float = 1.0

    def of(self, scorer: str) -> float:
        return {PREFIX: self.prefix, QUEUE: self.queue, KV: self.kv, LORA: self.lora}[scorer]


DEFAULT_WEIGHTS = Weights()
WEIGHT_NAMES = {"prefix": "prefix", "queue": "queue", "kv": "kv", "lora": "lora"}


def parse_weights(text: str) -> Weights:
    """``prefix=3,queue=2,kv=2,lora=1`` (any of them; the rest keep their defaults). ValueError names
    the part, its value and the rule."""
    values: dict[str, float] = {}
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        name, _, number = part.partition("=")
        name = name.strip()
        if name not in WEIGHT_NAMES:
            raise ValueError(f"{part!r}: the scorer must be one of {', '.join(WEIGHT_NAMES)}")
        try:
            weight = float(number)
        except ValueError:
            raise ValueError(f"{part!r}: the weight must be a number") from None
        if not 0 <= weight <= 100:
            raise ValueError(f"{part!r}: the weight must be from 0 to 100")
        values[WEIGHT_NAMES[name]] = weight
    return Weights(**values)


def lora_score(adapter: str | None, adapters: frozenset[str], max_lora: int) -> float:
    if adapter is None or adapter in adapters:
        return 1.0
    return LORA_ROOM if len(adapters) < max_lora else 0.0


def deciding(scores: dict[str, list[float]], weights: Weights, winner: int, runner_up: int | None) -> str:
    """The scorer that gave the winner most of its lead over the runner-up."""
    if runner_up is None:
        return "only-replica"
    return max(SCORERS, key=lambda name: weights.of(name) * (scores[name][winner] - scores[name][runner_up]))
