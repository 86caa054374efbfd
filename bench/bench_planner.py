"""Planner time: first-fit-decreasing placement of 100, 1,000 and 10,000 models onto 50 pools of 20 nodes.

Measures :func:`scheduler.placement.place` (the planner's hot loop, no ORM), best of 5 runs per
size. Growth ratios are printed beside the n log n ratio for the same sizes
(``planner.nlogn_growth_*``), so a figure far above it means the algorithm stopped scaling.
Target: 1,000 models under 200 ms.
"""

from __future__ import annotations

import math
import random
import time

from scheduler.placement import Item, NodeSpace, PoolSpace, place

GI = 1024**3
POOLS, NODES = 50, 20
SIZES = (100, 1_000, 10_000)


def _pools() -> list[PoolSpace]:
    return [
        PoolSpace(f"pool-{p}", 20 * 640 * GI, [NodeSpace(f"pool-{p}-node-{n}", 640 * GI, 8) for n in range(NODES)])
        for p in range(POOLS)
    ]


def _items(count: int, rng: random.Random) -> list[Item]:
    sizes = [2, 4, 8, 16, 24, 48, 80]
    return [
        Item(f"default/model-{i}", f"pool-{rng.randrange(POOLS)}", rng.choice(sizes) * GI, rng.choice([0, 0, 1]))
        for i in range(count)
    ]


def _best_ms(count: int) -> float:
    rng = random.Random(count)
    items = _items(count, rng)
    best = math.inf
    for _ in range(5):
        pools = _pools()
        start = time.perf_counter()
        place(pools, items)
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def run() -> dict[str, float]:
    ms = {count: _best_ms(count) for count in SIZES}
    nlogn = {count: count * math.log(count) for count in SIZES}
    return {
        "planner.ms_100": ms[100],
        "planner.ms_1000": ms[1_000],
        "planner.ms_10000": ms[10_000],
        "planner.growth_1000_vs_100": ms[1_000] / ms[100],
        "planner.growth_10000_vs_1000": ms[10_000] / ms[1_000],
        "planner.nlogn_growth_1000_vs_100": nlogn[1_000] / nlogn[100],
        "planner.nlogn_growth_10000_vs_1000": nlogn[10_000] / nlogn[1_000],
    }
