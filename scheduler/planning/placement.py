"""First-fit-decreasing placement of pods onto pools and nodes: pure, no ORM, no Django.

The planner builds :class:`PoolSpace` and :class:`Item` lists from the database once, then calls
:func:`place`, so the hot loop touches only plain objects. Cost: one sort (n log n) plus, per
pod, a scan of its own pool's nodes (a pool has tens of nodes, so near-linear in pods).

Rules: a pod goes to the first node (in the pool's node order) whose accelerator and GPU product
match, with enough free memory, CPU and GPUs, and whose GPUs are big enough for the pod's weights
and KV cache (``gpu_memory_bytes`` <= GPUs x per-GPU memory). ``fixed`` items (models running
now) are placed first and in their own order, so a proposal never displaces them; the others go
biggest first. A pool's budget caps the total declared memory too, since admission enforces the
budget and not the sum of nodes. A pod that finds no node although the pool's free memory adds up
to enough is *fragmented*: the room is there, split across nodes (a pod bigger than the pool's
biggest node is not: no repacking would ever place it). Every "does not fit" names the resource
and the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter
from typing import Any

NO_POOL = "no such pool"
OVER_BUDGET = "over budget"
FRAGMENTED = "fragmented"
NO_ROOM = "no node has room"
TOO_BIG = "larger than any node"
NO_SUCH_GPU = "no node has that GPU"


@dataclass(slots=True)
class Item:
    """One pod to place: ``label`` identifies its model in the result.

    ``gpu_memory_bytes`` is what the pod's weights and KV cache need across its GPUs (0: unchecked);
    ``accelerator`` and ``gpu_product`` ("" for any) narrow the nodes it may use.
    """

    label: str
    pool: str
    memory_bytes: int
    gpus: int = 0
    cpu_millis: int = 0
    gpu_memory_bytes: int = 0
    accelerator: str = ""
    gpu_product: str = ""


@dataclass(slots=True)
class NodeSpace:
    """One node's capacity and, after placement, what is on it. 0 CPU or per-GPU memory: unknown."""

    name: str
    capacity_bytes: int
    gpus: int = 0
    cpu_millis: int = 0
    gpu_memory_bytes: int = 0
    accelerator: str = ""
    gpu_product: str = ""
    used_bytes: int = 0
    used_gpus: int = 0
    used_cpu_millis: int = 0
    placed: list[Item] = field(default_factory=list)

    @property
    def free_bytes(self) -> int:
        return self.capacity_bytes - self.used_bytes

    @property
    def items(self) -> list[str]:
        return [item.label for item in self.placed]

    def matches(self, item: Item) -> bool:
        """The node has the accelerator and product the pod asks for (a pod without GPUs fits any)."""
        if not item.gpus:
            return True
        return (not item.accelerator or not self.accelerator or item.accelerator == self.accelerator) and (
            not item.gpu_product or item.gpu_product == self.gpu_product
        )

    def gpu_memory_for(self, gpus: int) -> int | None:
        """GPU memory ``gpus`` of this node's GPUs give together; None when the node does not say."""
        return gpus * self.gpu_memory_bytes if self.gpu_memory_bytes else None

    def shortfall(self, item: Item, free: bool) -> str | None:
        """The first resource the node lacks for ``item`` (free now, or at all), with the numbers."""
        memory = self.free_bytes if free else self.capacity_bytes
        gpus = self.gpus - self.used_gpus if free else self.gpus
        cpu = self.cpu_millis - self.used_cpu_millis if free else self.cpu_millis
        if item.memory_bytes > memory:
            return f"memory: needs {_fmt(item.memory_bytes)}, {self.name} has {_fmt(memory)}"
        if item.gpus > gpus:
            return f"GPUs: needs {item.gpus}, {self.name} has {gpus}"
        if self.cpu_millis and item.cpu_millis > cpu:
            return f"CPU: needs {item.cpu_millis / 1000:g}, {self.name} has {cpu / 1000:g}"
        given = self.gpu_memory_for(item.gpus)
        if item.gpu_memory_bytes and given is not None and item.gpu_memory_bytes > given:
            return (
                f"GPU memory: weights and KV cache need {_fmt(item.gpu_memory_bytes)}, {item.gpus} GPU(s) of "
                f"{_fmt(self.gpu_memory_bytes)} on {self.name} give {_fmt(given)}"
            )
        return None

    def take(self, item: Item) -> None:
        self.used_bytes += item.memory_bytes
        self.used_gpus += item.gpus
        self.used_cpu_millis += item.cpu_millis
        self.placed.append(item)


@dataclass(slots=True)
class PoolSpace:
    """A pool's budget and nodes. ``budget_bytes`` None: only node capacity limits the pool."""

    name: str
    budget_bytes: int | None
    nodes: list[NodeSpace]


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
        return FRAGMENTED in map(_reason, self.unplaced)  # a pool may miss thousands of pods

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
    missed: set[str] = field(default_factory=set)
    """The labels of the models with a pod that found no node, kept as misses are added (a walk
    of the thousands of misses of a crowded cluster, per plan, was a millisecond and a half)."""

    @property
    def fits(self) -> bool:
        return not self.unknown_pool and all(pool.fits for pool in self.pools.values())

    @property
    def misses(self) -> list[Unplaced]:
        """Every pod that found no node, of every model placed."""
        return [*chain.from_iterable(pool.unplaced for pool in self.pools.values()), *self.unknown_pool]


_reason = attrgetter("reason")


def _fmt(amount: int) -> str:
    return f"{amount / 1024**3:.1f}Gi"


def biggest_first(items: list[Item]) -> list[Item]:
    return sorted(items, key=lambda i: (-i.memory_bytes, -i.gpus, -i.gpu_memory_bytes, i.label))


UNLIMITED = 1 << 62


class FirstFit:
    """A segment tree over a pool's nodes holding each subtree's most free memory, GPUs and CPU.

    First fit asks for the first node with room; scanning the nodes makes that O(nodes) per pod
    once the first ones fill up (quadratic-looking growth as pools fill). The tree skips every
    subtree without enough of some resource, so a query costs O(log nodes) in the usual case of a
    pool of one node type, and a placement one O(log nodes) update.
    """

    def __init__(self, nodes: list[NodeSpace]) -> None:
        self.nodes = nodes
        self.index = {id(node): index for index, node in enumerate(nodes)}
        self.size = size = 1 << max(0, (len(nodes) - 1).bit_length())
        self.memory = [-1] * (2 * size)
        self.gpus = [-1] * (2 * size)
        self.cpu = [-1] * (2 * size)
        for index in range(len(nodes)):
            self._leaf(index)
        for position in range(size - 1, 0, -1):
            self._pull(position)

    def _leaf(self, index: int) -> None:
        node, position = self.nodes[index], index + self.size
        self.memory[position] = node.capacity_bytes - node.used_bytes
        self.gpus[position] = node.gpus - node.used_gpus
        self.cpu[position] = node.cpu_millis - node.used_cpu_millis if node.cpu_millis else UNLIMITED

    def _pull(self, position: int) -> None:
        left, right = 2 * position, 2 * position + 1
        self.memory[position] = max(self.memory[left], self.memory[right])
        self.gpus[position] = max(self.gpus[left], self.gpus[right])
        self.cpu[position] = max(self.cpu[left], self.cpu[right])

    def copy(self, nodes: list[NodeSpace]) -> FirstFit:
        """This tree over ``nodes``, copies of its nodes in the same state."""
        copied = FirstFit.__new__(FirstFit)
        copied.nodes, copied.size = nodes, self.size
        copied.index = {id(node): index for index, node in enumerate(nodes)}
        copied.memory, copied.gpus, copied.cpu = self.memory.copy(), self.gpus.copy(), self.cpu.copy()
        return copied

    def first(self, item: Item) -> NodeSpace | None:
        """The first node (in pool order) that matches ``item`` and has room for it.

        Descends left whenever the left subtree has enough of every resource, keeping the right
        sibling for later only when it has enough too; a leaf that still refuses (another GPU
        type, GPUs too small) sends the search to the next kept subtree.
        """
        need_memory, need_gpus, need_cpu = item.memory_bytes, item.gpus, item.cpu_millis
        memory, gpus, cpu, size = self.memory, self.gpus, self.cpu, self.size
        if memory[1] < need_memory or gpus[1] < need_gpus or cpu[1] < need_cpu:
            return None
        pending = [1]
        while pending:
            position = pending.pop()
            while position < size:
                left, right = 2 * position, 2 * position + 1
                if memory[right] >= need_memory and gpus[right] >= need_gpus and cpu[right] >= need_cpu:
                    pending.append(right)
                if memory[left] >= need_memory and gpus[left] >= need_gpus and cpu[left] >= need_cpu:
                    position = left
                elif pending and pending[-1] == right:
                    position = pending.pop()
                else:
                    break
            else:
                node = self.nodes[position - size]
                if node.matches(item) and node.shortfall(item, free=True) is None:
                    return node
        return None

    def take(self, node: NodeSpace, item: Item) -> None:
        node.take(item)
        index = self.index[id(node)]
        self._leaf(index)
        memory, gpus, cpu = self.memory, self.gpus, self.cpu
        position = (index + self.size) // 2
        while position:
            left, right = 2 * position, 2 * position + 1
            memory[position] = memory[left] if memory[left] > memory[right] else memory[right]
            gpus[position] = gpus[left] if gpus[left] > gpus[right] else gpus[right]
            cpu[position] = cpu[left] if cpu[left] > cpu[right] else cpu[right]
            position //= 2


class Placer:
    """:func:`place`'s state between two lists of items, so a placement can go on from a copy.

    The planner places a cluster's running models once and keeps this state
    (:mod:`scheduler.planning.baseline`); each plan goes on from a :meth:`copy` with its proposals, the
    same as placing everything from the start.
    """

    def __init__(self, pools: list[PoolSpace]) -> None:
        self.placement = Placement(
            {pool.name: PoolResult(pool.name, pool.budget_bytes, nodes=pool.nodes) for pool in pools}
        )
        self.trees = {pool.name: FirstFit(pool.nodes) for pool in pools}
        self.budget_left = {pool.name: pool.budget_bytes for pool in pools}
        self.reasons: dict[str, dict[tuple[Any, ...], Unplaced]] = {pool.name: {} for pool in pools}

    def add(self, items: Iterable[Item], stop_at_miss: bool = False) -> bool:
        """Place ``items`` in their order, each in the first node of its pool with room.

        ``stop_at_miss``: stop at the first pod of a known pool that finds no node and return
        False, the miss neither described nor recorded, the rest not read (a what-if's
        suggestions ask only whether a pool fits: an over-committed pool's 2,000 misses were
        each told why, ~3 ms a plan, to answer no). Else, or when every pod of a known pool
        found a node, True."""
        results, placement = self.placement.pools, self.placement
        for item in items:
            result = results.get(item.pool)
            if result is None:
                placement.unknown_pool.append(Unplaced(item, NO_POOL, f"no pool named {item.pool}"))
                placement.missed.add(item.label)
                continue
            result.requested_bytes += item.memory_bytes
            left = self.budget_left[item.pool]
            if left is not None and item.memory_bytes > left:
                if stop_at_miss:
                    return False
                # A pod no node could ever hold is told so first: freeing budget would not help it.
                miss = _remembered_why_not(self.reasons[item.pool], result.nodes, item)
                if miss.reason not in (TOO_BIG, NO_SUCH_GPU):
                    detail = f"memory: needs {_fmt(item.memory_bytes)}, the pool's budget has {_fmt(left)} left"
                    miss = Unplaced(item, OVER_BUDGET, detail)
                result.unplaced.append(miss)
                placement.missed.add(item.label)
                continue
            tree = self.trees[item.pool]
            node = tree.first(item)
            if node is None:
                if stop_at_miss:
                    return False
                result.unplaced.append(_remembered_why_not(self.reasons[item.pool], result.nodes, item))
                placement.missed.add(item.label)
                continue
            tree.take(node, item)
            self.reasons[item.pool].clear()  # the pool's free space changed
            result.placed_bytes += item.memory_bytes
            if left is not None:
                self.budget_left[item.pool] = left - item.memory_bytes
        return True

    def copy(self) -> Placer:
        """A placer in the same state that shares nothing this one changes (items and misses, which
        no placement changes, are shared)."""
        copied = Placer.__new__(Placer)
        pools = {}
        for name, result in self.placement.pools.items():
            nodes = [replace(node, placed=node.placed.copy()) for node in result.nodes]
            pools[name] = replace(result, nodes=nodes, unplaced=result.unplaced.copy())
        copied.placement = Placement(pools, self.placement.unknown_pool.copy(), self.placement.missed.copy())
        copied.trees = {name: tree.copy(pools[name].nodes) for name, tree in self.trees.items()}
        copied.budget_left = dict(self.budget_left)
        copied.reasons = {name: dict(known) for name, known in self.reasons.items()}
        return copied


def place(pools: list[PoolSpace], items: list[Item], fixed: list[Item] = ()) -> Placement:
    """Place ``fixed`` in order, then ``items`` biggest first (nodes are filled in place: pass fresh copies)."""
    placer = Placer(pools)
    placer.add(fixed)
    placer.add(biggest_first(items))
    return placer.placement


def fits(pool: PoolSpace, items: list[Item], fixed: Iterable[Item] = ()) -> bool:
    """``place([pool], items, fixed).pools[pool.name].fits``, read only as far as the first pod of
    the pool that finds no node (see :meth:`Placer.add`'s ``stop_at_miss``); pods of other pools
    are left out as ``place`` leaves them out of the pool's result."""
    placer = Placer([pool])
    return placer.add(fixed, stop_at_miss=True) and placer.add(biggest_first(items), stop_at_miss=True)


def _remembered_why_not(known: dict[tuple[Any, ...], Unplaced], nodes: list[NodeSpace], item: Item) -> Unplaced:
    """:func:`_why_not`, worked out once per pod shape while the pool's nodes stay as they are.

    Once a pool is full, thousands of pods of a few shapes miss it in a row; the reason depends
    only on the shape and the nodes' free space (``place`` forgets the reasons when a pod lands).
    """
    shape = (item.memory_bytes, item.gpus, item.cpu_millis, item.gpu_memory_bytes, item.accelerator, item.gpu_product)
    if shape not in known:
        known[shape] = _why_not(nodes, item)
    miss = known[shape]
    return miss if miss.item is item else Unplaced(item, miss.reason, miss.detail)


def _why_not(nodes: list[NodeSpace], item: Item) -> Unplaced:
    """Why no node took ``item``: no matching GPU, bigger than any node, fragmented or no room left."""
    matching = [node for node in nodes if node.matches(item)]
    if not matching:
        offered = sorted({f"{node.gpu_product or '?'} ({node.accelerator or 'no GPU'})" for node in nodes}) or ["none"]
        wanted = item.gpu_product or item.accelerator
        detail = f"GPU type: needs {item.gpus} {wanted} GPU(s); the pool's nodes have {', '.join(offered)}"
        return Unplaced(item, NO_SUCH_GPU, detail)
    never = [node.shortfall(item, free=False) for node in matching]
    if all(never):
        return Unplaced(item, TOO_BIG, _beyond_every_node(matching, item) or f"{never[0]}; no node could ever hold it")
    now = [node.shortfall(item, free=True) or "" for node in matching]
    total = sum(max(node.free_bytes, 0) for node in matching)
    largest = max((node.free_bytes for node in matching), default=0)
    if all(reason.startswith("memory") for reason in now) and total >= item.memory_bytes:
        detail = (
            f"memory: needs {_fmt(item.memory_bytes)}: the pool has {_fmt(total)} free in total "
            f"but the largest free space on one node is {_fmt(largest)}"
        )
        return Unplaced(item, FRAGMENTED, detail)
    nearest = min(now, key=lambda reason: (reason.startswith("memory"), reason))
    return Unplaced(item, NO_ROOM, f"{nearest}; no node of the pool has room left")


def _beyond_every_node(nodes: list[NodeSpace], item: Item) -> str | None:
    """The resource ``item`` needs more of than the pool's best node has, worded with both numbers."""
    memory = max(node.capacity_bytes for node in nodes)
    if item.memory_bytes > memory:
        return f"memory: needs {_fmt(item.memory_bytes)}; the pool's biggest node has {_fmt(memory)} allocatable"
    gpus = max(node.gpus for node in nodes)
    if item.gpus > gpus:
        return f"GPUs: needs {item.gpus} on one node; the pool's nodes have at most {gpus}"
    known_cpu = [node.cpu_millis for node in nodes if node.cpu_millis]
    if known_cpu and len(known_cpu) == len(nodes) and item.cpu_millis > max(known_cpu):
        return f"CPU: needs {item.cpu_millis / 1000:g}; the pool's nodes have at most {max(known_cpu) / 1000:g}"
    per_gpu = [node.gpu_memory_bytes for node in nodes if node.gpu_memory_bytes]
    if item.gpu_memory_bytes and per_gpu and len(per_gpu) == len(nodes):
        given = item.gpus * max(per_gpu)
        if item.gpu_memory_bytes > given:
            return (
                f"GPU memory: weights and KV cache need {_fmt(item.gpu_memory_bytes)}; {item.gpus} GPU(s) of at "
                f"most {_fmt(max(per_gpu))} each give {_fmt(given)}"
            )
    return None
