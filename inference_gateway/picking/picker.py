"""The decision for one request: which replica, and which scorer decided it.

The candidates are the route's replicas the request has not tried, less those the passive health
check skips (``inference_gateway.balancer``: a failed connection, three server errors in a row);
when every one is skipped, the balancer's own choice (the least recently failed) is taken. Then,
by the model's strategy (``picking.config``):

- ``scorer``: the saturation filter and the weighted scorers (``picking.scorers``); a replica
  without fresh engine metrics counts as saturated; when every replica is saturated, the one with
  the fewest requests in flight takes it (``saturated``), never an error.
- ``least-load``: the fewest requests in flight (KubeAI's ``LeastLoad``).
- ``prefix-hash``: KubeAI's ``PrefixHash`` (``picking.bounded_hash``): ``prefix-hash``, or
  ``prefix-hash-over-bound`` when every replica was over its bound.
- ``random``: a baseline for benchmarks.

Each decision is counted in ``inference_portal_gateway_picks_total{model, replica, scorer}``,
named in the answer's ``X-Gateway-Replica`` and ``X-Gateway-Picked-By`` headers, and kept for the
model page's replica table (``picking.snapshot``).

**CPU.** The request path reads only what the scraper already holds (no I/O), hashes the prompt
once (``picking.prefix``) and scores a handful of replicas: ``python -m bench routing`` measures
it (``routing.scorer_cpu_us_per_request``).
"""

from __future__ import annotations

import functools
import random
import time
from functools import cache
from typing import Any

from prometheus_client import Counter

from common.gateway_metrics import REGISTRY
from inference_gateway.balancer import Balancer, NoReplica, Replica
from inference_gateway.picking import scorers
from inference_gateway.picking.bounded_hash import Ring
from inference_gateway.picking.config import LEAST_LOAD, PREFIX_HASH, RANDOM, PickingConfig
from inference_gateway.picking.prefix import PrefixIndex, fingerprint, kubeai_prefix
from inference_gateway.picking.scraper import Scraper
from inference_gateway.routes import Route

PICKS = Counter(
    "inference_portal_gateway_picks", "Replicas picked, by model, replica and the scorer (or strategy) that decided.",
    ["model", "replica", "scorer"], registry=REGISTRY,
)
RECENT_SECONDS = 60.0
SATURATED, ONLY, UNHEALTHY = "saturated", "only-replica", "all-unhealthy"


@cache
def _picks(model: str, replica: str, scorer: str) -> Counter:
    return PICKS.labels(model, replica, scorer)


@functools.lru_cache(maxsize=4096)
def replica_name(url: str) -> str:
    """A replica as the header and the counters name it: its host and port."""
    return url.split("://", 1)[-1].split("/", 1)[0]


class ModelState:
    """What the picker keeps per route: the prefix index and the recent picks of each replica, the
    KubeAI ring."""

    def __init__(self) -> None:
        self.indexes: dict[str, PrefixIndex] = {}
        # replica URL -> {(second, what decided): picks}: a count per second, not a record per request
        self.recent: dict[str, dict[tuple[int, str], int]] = {}
        self.last_pick = 0.0
        self.ring: Ring | None = None
        self.replicas: list[str] = []  # the route's replica URLs at its last request

    def index(self, url: str) -> PrefixIndex:
        index = self.indexes.get(url)
        if index is None:
            index = self.indexes[url] = PrefixIndex()
        return index

    def picked(self, url: str, decided: str, now: float) -> None:
        counts = self.recent.get(url)
        if counts is None:
            counts = self.recent[url] = {}
        key = (int(now), decided)
        counts[key] = counts.get(key, 0) + 1
        self.last_pick = now

    def recent_picks(self, url: str, now: float) -> dict[str, int]:
        """The replica's picks of the last ``RECENT_SECONDS`` by what decided (older counts dropped)."""
        counts, picks = self.recent.get(url, {}), {}
        for key in list(counts):
            second, decided = key
            if now - second > RECENT_SECONDS:
                del counts[key]
            else:
                picks[decided] = picks.get(decided, 0) + counts[key]
        return picks

    def ring_of(self, urls: list[str], replication: int) -> Ring:
        if self.ring is None or self.ring.urls != tuple(urls):
            self.ring = Ring(urls, replication)
        return self.ring


class Picker:
    def __init__(self, balancer: Balancer, scraper: Scraper, stale: float) -> None:
        self.balancer, self.scraper, self.stale = balancer, scraper, stale
        self.models: dict[tuple, ModelState] = {}

    def state(self, route: Route) -> ModelState:
        state = self.models.get(route.key)
        if state is None:
            state = self.models[route.key] = ModelState()
        return state

    def pick(self, route: Route, replicas: list[Replica], excluded: set[str], data: dict[str, Any],
             adapter: str | None = None) -> tuple[Replica, str]:
        """The replica for this request and what decided it; NoReplica when none is left to try.
        Synchronous: everything it reads is in memory (the route carries its picking settings)."""
        now = time.monotonic()
        urls = [replica.url for replica in replicas]
        self.scraper.watch(urls, now)
        state = self.state(route)
        state.replicas = urls
        candidates = [replica for replica in replicas if replica.url not in excluded and replica.failed_until <= now]
        if not candidates:
            chosen, decided = self.balancer.pick(replicas, excluded), UNHEALTHY  # raises NoReplica when none
        else:
            chosen, decided = self.decide(route, route.picking, replicas, candidates, data, adapter, now)
            self.balancer.mark_picked(chosen)
        state.picked(chosen.url, decided, now)
        _picks(route.id, replica_name(chosen.url), decided).inc()
        return chosen, decided

    def decide(self, route: Route, config: PickingConfig, replicas: list[Replica], candidates: list[Replica],
               data: dict[str, Any], adapter: str | None, now: float) -> tuple[Replica, str]:
        """The strategy's choice among ``candidates`` (none of them excluded or skipped)."""
        if config.strategy == LEAST_LOAD:
            return min(candidates, key=lambda replica: (replica.outstanding, replica.last_pick)), LEAST_LOAD
        if config.strategy == PREFIX_HASH:
            spec = config.prefix_hash
            ring = self.state(route).ring_of([replica.url for replica in replicas], spec.replication)
            key = (adapter or "") + kubeai_prefix(data, spec.prefix_char_length)
            found = ring.pick(key, candidates, spec.mean_load_factor / 100)
            if found is None:
                raise NoReplica("no ready replica")
            chosen, within = found
            return chosen, PREFIX_HASH if within else f"{PREFIX_HASH}-over-bound"
        if config.strategy == RANDOM:
            return random.choice(candidates), RANDOM
        return self.score(route, config, candidates, data, adapter, now)

    def score(self, route: Route, config: PickingConfig, candidates: list[Replica], data: dict[str, Any],
              adapter: str | None, now: float) -> tuple[Replica, str]:
        """The saturation filter, then the weighted scorers (``picking.scorers``)."""
        states, stale = self.scraper.states, self.stale
        fresh = []
        for replica in candidates:
            engine = states.get(replica.url)
            if engine is None or now - engine.read_at > stale:
                continue
            queue = max(engine.waiting, replica.outstanding - engine.running)
            if queue > scorers.QUEUE_THRESHOLD or engine.kv_usage > scorers.KV_THRESHOLD:
                continue
            fresh.append((replica, engine, queue))
        if not fresh:
            return min(candidates, key=lambda replica: (replica.outstanding, replica.last_pick)), SATURATED
        model = self.state(route)
        print_ = fingerprint(data)
        if len(fresh) == 1:
            model.index(fresh[0][0].url).sent(print_)
            return fresh[0][0], ONLY
        queues = [queue for _, _, queue in fresh]
        most, least = max(queues), min(queues)
        spread = most - least
        size = print_.size or 1
        scores = {
            scorers.QUEUE: [(most - queue) / spread if spread else 1.0 for queue in queues],
            scorers.KV: [1.0 - engine.kv_usage for _, engine, _ in fresh],
            scorers.PREFIX: [model.index(replica.url).matched(print_) / size for replica, _, _ in fresh],
            scorers.LORA: [scorers.lora_score(adapter, engine.adapters, engine.max_lora) for _, engine, _ in fresh],
        }
        weights = config.weights
        totals = [weights.prefix * prefix + weights.queue * queue + weights.kv * kv + weights.lora * lora
                  for prefix, queue, kv, lora in zip(scores[scorers.PREFIX], scores[scorers.QUEUE],
                                                     scores[scorers.KV], scores[scorers.LORA], strict=True)]
        order = sorted(range(len(fresh)), key=lambda at: (-totals[at], fresh[at][0].outstanding,
                                                          fresh[at][0].last_pick))
        winner = order[0]
        chosen = fresh[winner][0]
        model.index(chosen.url).sent(print_)
        return chosen, scorers.deciding(scores, weights, winner, order[1])
