"""Planner time: placement alone, then the real ``plan()`` with the database, on 50 pools x 20 GPU nodes.

``planner.ms_<n>``: :func:`scheduler.planning.placement.place` (the hot loop, no ORM) for n pods with the
GPU dimension (GPU count, per-GPU memory for weights and KV cache, CPU), beside the n log n ratio
for the same sizes (``planner.nlogn_growth_*``), so a figure far above it means the algorithm
stopped scaling. Targets: 1,000 under 50 ms, growth 1k -> 10k at most x13.

``planner.plan_ms_<n>``: :func:`scheduler.planning.planner.plan` on PostgreSQL with n InferenceModels in
one cluster (reading pools, nodes and holdings, placing them, and suggesting what would make a
proposal fit that does not: idle models and right-sizing). Targets: 10k under 500 ms, 100k
under 5 s. Every figure is the median of 3 runs: the first after the rows change reads and places
the running models, the next two reuse them while the rows stay unchanged (scheduler.holdings_cache,
scheduler.planning.baseline), so the median is the repeated plan's cost.
``planner.plan_cold_ms_<n>`` is that first plan alone, the cost after any write to the cluster's
rows; the targets hold for it too.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable

from bench.planner_data import GI, NODE_CPU, NODE_GPUS, NODE_MEMORY, NODES, NOW, POOLS, add_models, make_cluster
from scheduler.planning.placement import Item, NodeSpace, PoolSpace, place
from scheduler.planning.planner import plan
from scheduler.planning.proposals import proposal_from_request

SIZES = (100, 1_000, 10_000)
RUNS = 3


def median_ms(work: Callable[[], object], prepare: Callable[[], object] = lambda: None) -> float:
    samples = []
    for _ in range(RUNS):
        prepared = prepare()
        start = time.perf_counter()
        work() if prepared is None else work(prepared)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _pools() -> list[PoolSpace]:
    return [
        PoolSpace(f"pool-{p}", NODES * NODE_MEMORY, [
            NodeSpace(f"pool-{p}-node-{n}", NODE_MEMORY, NODE_GPUS, NODE_CPU, 80 * GI, "nvidia", "NVIDIA-A100")
            for n in range(NODES)
        ])
        for p in range(POOLS)
    ]  # fmt: skip


def _items(count: int, rng: random.Random) -> list[Item]:
    sizes = [2, 4, 8, 16, 24, 48, 80]
    items = []
    for i in range(count):
        size = rng.choice(sizes)
        gpus = rng.choice([0, 1, 1, 2]) if size >= 16 else 0
        pool, cpu = f"pool-{rng.randrange(POOLS)}", rng.choice([500, 2000, 8000])
        items.append(Item(f"default/model-{i}", pool, size * GI, gpus, cpu, size * GI if gpus else 0,
                          "nvidia" if gpus else ""))  # fmt: skip
    return items


def _placement_ms(count: int) -> float:
    items = _items(count, random.Random(count))
    return median_ms(lambda pools: place(pools, items), _pools)


def _plan_ms(cluster: object) -> tuple[float, float]:
    """The first plan since the cluster's rows changed (nothing kept) and the median of ``RUNS``."""
    # a proposal too big for its pool's free room: the suggestions (idle, right-sizing) run too
    request = {"estimate": {"name": "new-70b", "namespace": "team-0", "pool": "pool-0", "memory": "600Gi",
                            "gpus": 8, "gpu_memory": "600Gi"}}  # fmt: skip
    proposal = proposal_from_request(request, 0, cluster)
    samples = []

    def timed() -> None:
        start = time.perf_counter()
        plan(cluster, [proposal], now=NOW)
        samples.append((time.perf_counter() - start) * 1000)

    median = median_ms(timed)
    return samples[0], median


def run() -> dict[str, float]:
    ms = {count: _placement_ms(count) for count in SIZES}
    nlogn = {count: count * math.log(count) for count in SIZES}
    cluster = make_cluster("bench-planner")
    add_models(cluster, 10_000, seed=1)
    cold_10k, plan_10k = _plan_ms(cluster)
    add_models(cluster, 90_000, seed=2, start=10_000)
    cold_100k, plan_100k = _plan_ms(cluster)
    return {
        "planner.ms_100": ms[100],
        "planner.ms_1000": ms[1_000],
        "planner.ms_10000": ms[10_000],
        "planner.growth_1000_vs_100": ms[1_000] / ms[100],
        "planner.growth_10000_vs_1000": ms[10_000] / ms[1_000],
        "planner.nlogn_growth_1000_vs_100": nlogn[1_000] / nlogn[100],
        "planner.nlogn_growth_10000_vs_1000": nlogn[10_000] / nlogn[1_000],
        "planner.plan_ms_10000": plan_10k,
        "planner.plan_ms_100000": plan_100k,
        "planner.plan_cold_ms_10000": cold_10k,
        "planner.plan_cold_ms_100000": cold_100k,
    }
