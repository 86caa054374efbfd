"""What-if planning: proposed models plus their dependencies, placed with what already runs.

Reads the database once (pools, nodes, serving models), then works on plain objects: the
dependency closure, :func:`scheduler.placement.place`, and for each pool that does not fit the
changes that would make it fit (scale idle models to zero, oldest idle first; apply right-sizing
savings; both).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from clusters.models import Cluster
from clusters.quantities import format_bytes
from clusters.validation import FieldError, ManifestInvalid
from scheduler.holdings import Holding, ModelKey, load_holdings
from scheduler.models import Node, NodePool
from scheduler.placement import Item, NodeSpace, Placement, PoolResult, PoolSpace, place
from scheduler.proposals import Proposal
from scheduler.savings import Recommender, recommended_bytes

# GPUs are not checked on nodes synthesized from pool figures that give no GPU count.
UNKNOWN_GPUS = 1 << 30


def pool_spaces_factory(cluster: Cluster) -> Callable[[], list[PoolSpace]]:
    """A function returning fresh PoolSpaces each call (placement fills nodes in place).

    Pools with Node rows use them (schedulable only). Pools known only by their figures (demo
    data, staff-made pools) get ``node_count`` nodes of ``largest_node_bytes`` each, capped so
    they add up to the allocatable memory, GPUs spread evenly; a pool with no node figures at all
    is one node the size of its budget, so only the budget limits it.
    """
    pools = list(NodePool.objects.filter(cluster=cluster).order_by("name"))
    nodes: dict[int, list[tuple[str, int, int]]] = {}
    for node in Node.objects.filter(pool__cluster=cluster, schedulable=True).order_by("pool_id", "name"):
        nodes.setdefault(node.pool_id, []).append((node.name, node.allocatable_bytes, node.gpu_count))
    shapes: list[tuple[str, int | None, list[tuple[str, int, int]]]] = []
    for pool in pools:
        shape = nodes.get(pool.pk) or _synthesized_nodes(pool)
        shapes.append((pool.name, pool.effective_budget_bytes, shape))

    def build() -> list[PoolSpace]:
        return [PoolSpace(name, budget, [NodeSpace(*node) for node in shape]) for name, budget, shape in shapes]

    return build


def _synthesized_nodes(pool: NodePool) -> list[tuple[str, int, int]]:
    if pool.node_count and pool.largest_node_bytes:
        remaining, result = pool.allocatable_bytes, []
        per_node_gpus = pool.gpu_count // pool.node_count if pool.gpu_count else UNKNOWN_GPUS
        for index in range(pool.node_count):
            size = min(pool.largest_node_bytes, max(remaining, 0))
            result.append((f"{pool.name}-node-{index + 1}", size, per_node_gpus))
            remaining -= size
        return result
    return [(f"{pool.name} (budget only)", pool.effective_budget_bytes, pool.gpu_count or UNKNOWN_GPUS)]


@dataclass
class Plan:
    cluster: Cluster
    placement: Placement
    models: list[Proposal]
    baseline: list[Holding]
    suggestions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.placement.fits


def dependency_closure(proposals: list[Proposal], holdings: list[Holding]) -> list[Proposal]:
    """The proposals plus every dependency not already running, each model once, dependencies first.

    A dependency names a model of the same cluster and namespace: a proposal's name first, then an
    existing model's object name, then its ``modelName`` (the reference does not say which one a
    dependency names). A missing or cyclic dependency is a ManifestInvalid naming it.
    """
    by_name: dict[tuple[str, str], Proposal | Holding] = {}
    for holding in holdings:
        by_name.setdefault((holding.namespace, holding.model_name), holding)
    for holding in holdings:
        by_name[(holding.namespace, holding.name)] = holding
    for proposal in proposals:
        by_name[(proposal.namespace, proposal.name)] = proposal
    result: dict[ModelKey, Proposal] = {}

    def visit(node: Proposal | Holding, trail: tuple[str, ...], root: Proposal) -> None:
        if node.name in trail:
            cycle = " -> ".join((*trail[trail.index(node.name) :], node.name))
            rule = f"form a dependency cycle: {cycle}"
            raise ManifestInvalid([FieldError(f"{root.path}.dependencies", list(root.dependencies), rule)])
        if node.key in result:
            return
        for name in node.dependencies:
            target = by_name.get((node.namespace, name))
            if target is None:
                chain = " -> ".join((*trail, node.name, name))
                rule = f"names no model in namespace {node.namespace} ({chain})"
                raise ManifestInvalid([FieldError(f"{root.path}.dependencies", name, rule)])
            visit(target, (*trail, node.name), root)
        if isinstance(node, Proposal):
            result[node.key] = node
        elif not node.running:
            result[node.key] = Proposal(node.kind, node.cluster_id, node.namespace, node.name, node.pool,
                                        node.memory_bytes, node.gpu_count, node.dependencies, "dependency",
                                        root.path)  # fmt: skip

    for proposal in proposals:
        visit(proposal, (), proposal)
    return list(result.values())


def plan(
    cluster: Cluster,
    proposals: list[Proposal],
    include_running: bool = True,
    now: datetime | None = None,
    recommender: Recommender | None = None,
) -> Plan:
    """Place the proposals, their dependencies and (by default) every model running now."""
    now = now or timezone.now()
    holdings = load_holdings(cluster.pk)
    models = dependency_closure(proposals, holdings)
    planned = {proposal.key for proposal in models}
    baseline = [h for h in holdings if h.running and h.key not in planned] if include_running else []
    spaces = pool_spaces_factory(cluster)
    items = [Item(p.label, p.pool, p.memory_bytes, p.gpus) for p in models]
    items += [Item(h.label, h.pool, h.memory_bytes, h.gpu_count) for h in baseline]
    result = Plan(cluster, place(spaces(), items), models, baseline)
    for pool in result.placement.pools.values():
        if not pool.fits:
            result.suggestions[pool.name] = _suggest(pool, items, baseline, spaces, now, recommender)
    return result


def _replace_pool(
    pool: str, items: list[Item], spaces: Callable[[], list[PoolSpace]], memory: dict[str, int], drop: set[str]
) -> PoolResult:
    mine = [
        Item(i.label, i.pool, memory.get(i.label, i.memory_bytes), i.gpus)
        for i in items
        if i.pool == pool and i.label not in drop
    ]
    return place([space for space in spaces() if space.name == pool], mine).pools[pool]


def _suggest(
    pool: PoolResult,
    items: list[Item],
    baseline: list[Holding],
    spaces: Callable[[], list[PoolSpace]],
    now: datetime,
    recommender: Recommender | None,
) -> dict[str, Any]:
    """What would make ``pool`` fit: idle models to scale to zero, right-sizing, or both; or nothing.

    ``fits_after`` names the first change that suffices (scaling the fewest oldest-idle models to
    zero first, as it needs no redeploy); ``rightsizing`` always lists every saving available.
    """
    mine = [h for h in baseline if h.pool == pool.name]
    idle = sorted((h for h in mine if h.idle_since(now)), key=lambda h: (h.idle_since(now), h.label))
    resized: dict[str, tuple[int, int]] = {}
    for holding in mine:
        target = recommended_bytes(holding, recommender)
        if target is not None and target < holding.memory_bytes:
            resized[holding.label] = (holding.memory_bytes, target)
    rightsizing = [{"model": label, "from": format_bytes(old), "to": format_bytes(new), "saves_bytes": old - new}
                   for label, (old, new) in resized.items()]  # fmt: skip
    memory = {label: new for label, (_, new) in resized.items()}

    def first_idle_prefix(sizes: dict[str, int]) -> list[str] | None:
        for count in range(len(idle) + 1):
            drop = {h.label for h in idle[:count]}
            if _replace_pool(pool.name, items, spaces, sizes, drop).fits:
                return [h.label for h in idle[:count]]
        return None

    scale = first_idle_prefix({}) if idle else None
    if scale:
        return {"fits_after": "scale_to_zero", "scale_to_zero": scale, "rightsizing": rightsizing}
    if resized and _replace_pool(pool.name, items, spaces, memory, set()).fits:
        return {"fits_after": "rightsizing", "scale_to_zero": [], "rightsizing": rightsizing}
    both = first_idle_prefix(memory) if idle and resized else None
    if both is not None:
        return {"fits_after": "both", "scale_to_zero": both, "rightsizing": rightsizing}
    return {
        "fits_after": None,
        "scale_to_zero": [h.label for h in idle],
        "rightsizing": rightsizing,
        "message": "even scaling every idle model to zero and applying every right-sizing saving is not enough",
    }


def plan_to_dict(result: Plan) -> dict[str, Any]:
    """The plan as JSON for the API and the page."""
    origins = {proposal.label: proposal.origin for proposal in result.models}
    pools = []
    for pool in result.placement.pools.values():
        pools.append(
            {
                "name": pool.name,
                "fits": pool.fits,
                "budget_bytes": pool.budget_bytes,
                "requested_bytes": pool.requested_bytes,
                "placed_bytes": pool.placed_bytes,
                "budget_free_bytes": pool.budget_free_bytes,
                "fragmented": pool.fragmented,
                "largest_fit_bytes": pool.largest_fit_bytes,
                "largest_fit": _gi_floor(pool.largest_fit_bytes),
                "nodes": [
                    {
                        "name": node.name,
                        "capacity_bytes": node.capacity_bytes,
                        "used_bytes": node.used_bytes,
                        "free_bytes": node.free_bytes,
                        "gpus": None if node.gpus >= UNKNOWN_GPUS else node.gpus,
                        "used_gpus": node.used_gpus,
                        "models": [{"model": label, "origin": origins.get(label, "running")} for label in node.items],
                    }
                    for node in pool.nodes
                ],
                "unplaced": [
                    {
                        "model": miss.item.label,
                        "origin": origins.get(miss.item.label, "running"),
                        "memory_bytes": miss.item.memory_bytes,
                        "reason": miss.reason,
                        "detail": miss.detail,
                    }
                    for miss in pool.unplaced
                ],
                "suggestions": result.suggestions.get(pool.name),
            }
        )
    return {
        "cluster": result.cluster.name,
        "fits": result.fits,
        "models": [
            {"model": p.label, "origin": p.origin, "pool": p.pool, "memory_bytes": p.memory_bytes, "gpus": p.gpus}
            for p in result.models
        ],
        "running_models": len(result.baseline),
        "pools": pools,
        "unknown_pool": [
            {"model": miss.item.label, "pool": miss.item.pool, "detail": miss.detail}
            for miss in result.placement.unknown_pool
        ],
    }


def _gi_floor(amount: int) -> str:
    """A valid ``memory`` quantity no larger than ``amount`` (whole Gi, else whole Mi)."""
    if amount >= 1024**3:
        return f"{amount // 1024**3}Gi"
    return f"{amount // 1024**2}Mi"
