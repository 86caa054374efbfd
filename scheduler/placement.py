"""First-fit-decreasing placement of models onto pools and nodes: pure, no ORM, no Django.

The planner builds :class:`PoolSpace` and :class:`Item` lists from the database once, then calls
:func:`place`, so the hot loop touches only plain objects. Cost: one sort (n log n) plus, per
model, a scan of its own pool's nodes (a pool has tens of nodes, so near-linear in models).

Rules: a model goes to the first node (in the pool's node order) with enough free memory and
free GPUs, biggest models first. A pool's budget caps the total declared memory too, since
admission enforces the budget and not the sum of nodes. A model that finds no node although the
pool's free memory adds up to enough is *fragmented*: the room is there, split across nodes (a
model bigger than the pool's biggest node is not: no repacking would ever place it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_POOL = "no such pool"
OVER_BUDGET = "over budget"
FRAGMENTED = "fragmented"
NO_ROOM = "no node has room"
TOO_BIG = "larger than any node"


@dataclass(slots=True)
class NodeSpace:
    """One node's capacity and, after placement, what is on it."""

    name: str
    capacity_bytes: int
    gpus: int = 0
    used_bytes: int = 0
    used_gpus: int = 0
    items: list[str] = field(default_factory=list)

    @property
    def free_bytes(self) -> int:
        return self.capacity_bytes - self.used_bytes


@dataclass(slots=True)
class PoolSpace:
    """A pool's budget and nodes. ``budget_bytes`` None: only node capacity limits the pool."""

    name: str
    budget_bytes: int | None
    nodes: list[NodeSpace]


@dataclass(slots=True)
class Item:
    """One model to place: ``label`` identifies it in the result."""

    label: str
    pool: str
    memory_bytes: int
    gpus: int = 0


@dataclass(slots=True)
class Unplaced:
    item: Item
    reason: str
    detail: str


@dataclass
class PoolResult:
    name: str
    budget_bytes: int | None
    requested_bytes: int = 0
    placed_bytes: int = 0
    nodes: list[NodeSpace] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.unplaced

    @property
    def fragmented(self) -> bool:
        return any(miss.reason == FRAGMENTED for miss in self.unplaced)

    @property
    def budget_free_bytes(self) -> int | None:
        return None if self.budget_bytes is None else self.budget_bytes - self.placed_bytes

    @property
    def largest_fit_bytes(self) -> int:
        """The biggest model (no GPUs asked) that would still be placed after this plan."""
        largest = max((node.free_bytes for node in self.nodes), default=0)
        budget_free = self.budget_free_bytes
        return max(0, largest if budget_free is None else min(largest, budget_free))


@dataclass
class Placement:
    pools: dict[str, PoolResult]
    unknown_pool: list[Unplaced] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.unknown_pool and all(pool.fits for pool in self.pools.values())


def _fmt(amount: int) -> str:
    return f"{amount / 1024**3:.1f}Gi"


def place(pools: list[PoolSpace], items: list[Item]) -> Placement:
    """Place ``items`` onto ``pools`` (the pools' nodes are filled in place; pass fresh copies)."""
    results = {pool.name: PoolResult(pool.name, pool.budget_bytes, nodes=pool.nodes) for pool in pools}
    budget_left = {pool.name: pool.budget_bytes for pool in pools}
    free_total = {pool.name: sum(node.capacity_bytes - node.used_bytes for node in pool.nodes) for pool in pools}
    placement = Placement(results)
    for item in sorted(items, key=lambda i: (-i.memory_bytes, -i.gpus, i.label)):
        result = results.get(item.pool)
        if result is None:
            placement.unknown_pool.append(Unplaced(item, NO_POOL, f"no pool named {item.pool}"))
            continue
        result.requested_bytes += item.memory_bytes
        left = budget_left[item.pool]
        if left is not None and item.memory_bytes > left:
            result.unplaced.append(
                Unplaced(item, OVER_BUDGET, f"needs {_fmt(item.memory_bytes)}, budget has {_fmt(left)} left")
            )
            continue
        memory, gpus = item.memory_bytes, item.gpus
        for node in result.nodes:
            if node.capacity_bytes - node.used_bytes >= memory and node.gpus - node.used_gpus >= gpus:
                node.used_bytes += memory
                node.used_gpus += gpus
                node.items.append(item.label)
                result.placed_bytes += memory
                free_total[item.pool] -= memory
                if left is not None:
                    budget_left[item.pool] = left - memory
                break
        else:
            largest = max((node.free_bytes for node in result.nodes), default=0)
            total = free_total[item.pool]
            biggest = max((node.capacity_bytes for node in result.nodes), default=0)
            if memory > biggest:
                detail = f"needs {_fmt(memory)}; the pool's biggest node has {_fmt(biggest)} allocatable"
                result.unplaced.append(Unplaced(item, TOO_BIG, detail))
            elif largest >= memory:
                detail = f"needs {gpus} GPU(s) on a node with {_fmt(memory)} free; no such node is left"
                result.unplaced.append(Unplaced(item, NO_ROOM, detail))
            elif total >= memory:
                detail = (
                    f"needs {_fmt(memory)}: the pool has {_fmt(total)} free in total "
                    f"but the largest free space on one node is {_fmt(largest)}"
                )
                result.unplaced.append(Unplaced(item, FRAGMENTED, detail))
            else:
                detail = f"needs {_fmt(memory)}; the pool has {_fmt(total)} free, at most {_fmt(largest)} on one node"
                result.unplaced.append(Unplaced(item, NO_ROOM, detail))
    return placement
