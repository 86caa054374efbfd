"""What-if planning: proposed models plus their dependencies, placed beside what already runs.

Reads the database once (pools, nodes, serving models' narrow columns), then works on plain
objects: the dependency closure, :func:`scheduler.placement.place` with the running models kept
where they are (placed first; re-packed with the proposals only when asked), the proposal's own
fit, and for each pool where a proposal does not fit the cheapest changes that would make room:
idle models to scale to zero (oldest idle first, each with the memory it frees), right-sizings to
apply, or both.

Cost: the first placement is n log n; the search for the fewest idle models re-places only the
pool concerned, log k times (a binary search over the oldest-idle prefix), never the whole cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from django.utils import timezone

from clusters.models import Cluster
from clusters.validation.quantities import format_bytes
from clusters.validation.schemas import FieldError, ManifestInvalid
from config.gc_tuning import collector_paused
from scheduler.consumption import PodShape
from scheduler.holdings import Holding, ModelKey, dependencies_of, load_holdings
from scheduler.models import Node, NodePool
from scheduler.placement import Item, NodeSpace, Placement, PoolResult, PoolSpace, biggest_first, place
from scheduler.proposals import Proposal
from scheduler.quotas import what_if
from scheduler.savings import Recommender, recommended_bytes

# GPUs are not checked on nodes synthesized from pool figures that give no GPU count.
UNKNOWN_GPUS = 1 << 30
NodeShape = tuple[str, int, int, int, int, str, str]
"""(name, memory, GPUs, CPU millis, per-GPU memory, accelerator, GPU product): a NodeSpace's arguments."""


class PoolShapes:
    """Every pool's budget and node shapes of one cluster, read once; fresh NodeSpaces on demand.

    Placement fills nodes in place, so each placement asks for new ones: :meth:`spaces` builds
    every pool (the first placement), :meth:`pool` one pool (the suggestions' re-placements).
    Pools with Node rows use them (schedulable only). Pools known only by their figures (demo
    data, staff-made pools) get ``node_count`` nodes of ``largest_node_bytes`` each, capped so
    they add up to the allocatable memory, GPUs spread evenly; a pool with no node figures at all
    is one node the size of its budget, so only the budget limits it.
    """

    def __init__(self, cluster: Cluster) -> None:
        pools = list(NodePool.objects.filter(cluster=cluster).order_by("name"))
        nodes: dict[int, list[NodeShape]] = {}
        fields = [
            "pool_id",
            "name",
            "allocatable_bytes",
            "gpu_count",
            "cpu_millis",
            "gpu_memory_bytes",
            "accelerator",
            "gpu_product",
        ]
        rows = Node.objects.filter(pool__cluster=cluster, schedulable=True).order_by("pool_id", "name")
        for pool_id, *shape in rows.values_list(*fields):
            nodes.setdefault(pool_id, []).append(tuple(shape))
        self.shapes: dict[str, tuple[int | None, list[NodeShape]]] = {
            pool.name: (pool.effective_budget_bytes, nodes.get(pool.pk) or _synthesized_nodes(pool)) for pool in pools
        }

    def pool(self, name: str) -> PoolSpace:
        budget, shape = self.shapes[name]
        return PoolSpace(name, budget, [NodeSpace(*node) for node in shape])

    def spaces(self) -> list[PoolSpace]:
        return [self.pool(name) for name in self.shapes]


def _synthesized_nodes(pool: NodePool) -> list[NodeShape]:
    extra = (0, pool.gpu_memory_bytes, pool.accelerator, pool.gpu_product.split(", ")[0])
    if pool.node_count and pool.largest_node_bytes:
        remaining, result = pool.allocatable_bytes, []
        per_node_gpus = pool.gpu_count // pool.node_count if pool.gpu_count else UNKNOWN_GPUS
        for index in range(pool.node_count):
            size = min(pool.largest_node_bytes, max(remaining, 0))
            result.append((f"{pool.name}-node-{index + 1}", size, per_node_gpus, *extra))
            remaining -= size
        return result
    return [(f"{pool.name} (budget only)", pool.effective_budget_bytes, pool.gpu_count or UNKNOWN_GPUS, *extra)]


def pod_items(label: str, pool: str, pods: list[PodShape], running: bool, memory: int, gpus: int) -> list[Item]:
    """One Item per pod: the running pods of a running model, else every desired pod.

    A model whose kind gave no pod shapes is one pod of its declared memory and GPUs.
    """
    if not pods:
        return [Item(label, pool, memory, gpus)]
    items = []
    for pod in pods:
        items += [
            Item(
                label,
                pool,
                pod.memory_bytes,
                pod.gpus,
                pod.cpu_millis,
                pod.gpu_memory_bytes,
                pod.accelerator,
                pod.gpu_product,
            )
        ] * (pod.running if running else pod.count)
    return items


def holding_items(holding: Holding, memory: int | None = None) -> list[Item]:
    """The running pods of a holding; ``memory`` (a right-sized total) scales each pod's memory."""
    items = pod_items(holding.label, holding.pool, holding.pods, True, holding.memory_bytes, holding.gpu_count)
    if memory is None or not holding.memory_bytes:
        return items
    return [
        Item(
            i.label,
            i.pool,
            i.memory_bytes * memory // holding.memory_bytes,
            i.gpus,
            i.cpu_millis,
            min(i.gpu_memory_bytes, i.memory_bytes * memory // holding.memory_bytes),
            i.accelerator,
            i.gpu_product,
        )
        for i in items
    ]


def proposal_items(proposal: Proposal) -> list[Item]:
    return pod_items(proposal.label, proposal.pool, proposal.pods, False, proposal.memory_bytes, proposal.gpus)


@dataclass
class Plan:
    cluster: Cluster
    placement: Placement
    models: list[Proposal]
    baseline: list[Holding]
    suggestions: dict[str, dict[str, Any]] = field(default_factory=dict)
    repacked: bool = False
    quota_breaks: list[str] = field(default_factory=list)
    """The team quotas the proposal would break (scheduler.quotas.what_if), each named."""

    @property
    def fits(self) -> bool:
        """The proposal's own fit: every pod of the proposed models (and dependencies) found a node."""
        return not self.placement.misses_of({proposal.label for proposal in self.models})

    @property
    def overcommitted(self) -> list[str]:
        """Running models that do not fit where they are (the pool shrank or is over budget)."""
        proposed = {proposal.label for proposal in self.models}
        misses = self.placement.misses_of({holding.label for holding in self.baseline})
        return sorted({miss.item.label for miss in misses} - proposed)


def dependency_closure(proposals: list[Proposal], holdings: list[Holding]) -> list[Proposal]:
    """The proposals plus every dependency not already running, each model once, dependencies first.

    A dependency names a model of the same cluster and namespace: a proposal's name first, then an
    existing model's object name, then its ``modelName`` (the reference does not say which one a
    dependency names). A missing or cyclic dependency is a ManifestInvalid naming it.
    """
    namespaces = {proposal.namespace for proposal in proposals}
    declared = dependencies_of(proposals[0].cluster_id, namespaces) if proposals else {}
    by_name: dict[tuple[str, str], Proposal | Holding] = {}
    for holding in holdings:
        if holding.namespace in namespaces:
            by_name.setdefault((holding.namespace, holding.model_name), holding)
    for holding in holdings:
        if holding.namespace in namespaces:
            by_name[(holding.namespace, holding.name)] = holding
    for proposal in proposals:
        by_name[(proposal.namespace, proposal.name)] = proposal
    result: dict[ModelKey, Proposal] = {}

    def needs(node: Proposal | Holding) -> list[str]:
        return node.dependencies if isinstance(node, Proposal) else declared.get((node.namespace, node.name), [])

    def visit(node: Proposal | Holding, trail: tuple[str, ...], root: Proposal) -> None:
        if node.name in trail:
            cycle = " -> ".join((*trail[trail.index(node.name) :], node.name))
            rule = f"form a dependency cycle: {cycle}"
            raise ManifestInvalid([FieldError(f"{root.path}.dependencies", list(root.dependencies), rule)])
        if node.key in result:
            return
        for name in needs(node):
            target = by_name.get((node.namespace, name))
            if target is None:
                chain = " -> ".join((*trail, node.name, name))
                rule = f"names no model in namespace {node.namespace} ({chain})"
                raise ManifestInvalid([FieldError(f"{root.path}.dependencies", name, rule)])
            visit(target, (*trail, node.name), root)
        if isinstance(node, Proposal):
            result[node.key] = node
        elif not node.running:
            pods = [replace(pod, running=0) for pod in node.pods]
            result[node.key] = Proposal(
                node.kind,
                node.cluster_id,
                node.namespace,
                node.name,
                node.pool,
                node.memory_bytes,
                node.gpu_count,
                needs(node),
                "dependency",
                root.path,
                pods,
            )

    for proposal in proposals:
        visit(proposal, (), proposal)
    return list(result.values())


def plan(
    cluster: Cluster,
    proposals: list[Proposal],
    include_running: bool = True,
    now: datetime | None = None,
    recommender: Recommender | None = None,
    repack: bool = False,
) -> Plan:
    """Place the proposals and their dependencies beside every model running now (by default).

    Running models keep their place (they are placed first, in their own biggest-first order)
    unless ``repack``: then everything is placed together, biggest first.

    The collector is paused meanwhile (:func:`config.gc_tuning.collector_paused`): placing
    10,000 models allocates as many items and misses while the page's rows stay alive, and each
    full collection walked them all (about a third of ``plan()``'s time).
    """
    with collector_paused():
        return _plan(cluster, proposals, include_running, now or timezone.now(), recommender, repack)


def _plan(
    cluster: Cluster, proposals: list[Proposal], include_running: bool, now: datetime,
    recommender: Recommender | None, repack: bool,
) -> Plan:  # fmt: skip
    holdings = load_holdings(cluster.pk)
    models = dependency_closure(proposals, holdings)
    planned = {proposal.key for proposal in models}
    baseline = [h for h in holdings if h.running and h.key not in planned] if include_running else []
    shapes = PoolShapes(cluster)
    new = [item for proposal in models for item in proposal_items(proposal)]
    running = biggest_first([item for holding in baseline for item in holding_items(holding)])
    placement = place(shapes.spaces(), [*new, *running], ()) if repack else place(shapes.spaces(), new, running)
    result = Plan(
        cluster, placement, models, baseline, repacked=repack, quota_breaks=what_if(cluster.pk, models, baseline)
    )
    proposed = {proposal.label for proposal in models}
    by_pool: dict[str, list[Holding]] = {}
    for holding in baseline:
        by_pool.setdefault(holding.pool, []).append(holding)
    for pool in placement.pools.values():
        if any(miss.item.label in proposed for miss in pool.unplaced):
            mine = [item for item in new if item.pool == pool.name]
            space = partial(shapes.pool, pool.name)
            result.suggestions[pool.name] = suggest(pool, space, mine, by_pool.get(pool.name, []), now, recommender)
    return result


def suggest(
    pool: PoolResult,
    space: Callable[[], PoolSpace],
    proposed: list[Item],
    running: list[Holding],
    now: datetime,
    recommender: Recommender | None,
) -> dict[str, Any]:
    """The cheapest changes that make the proposed pods fit in ``pool``, or what is known when none does.

    Scaling idle models to zero needs no redeploy, so it comes first: the fewest oldest-idle ones
    (a binary search over the prefix, each step one re-placement of this pool only). Then every
    right-sizing saving; then both. Each candidate carries the memory it frees.
    """
    idle = sorted((h for h in running if h.idle_since(now)), key=lambda h: (h.idle_since(now), h.label))
    resized: dict[ModelKey, int] = {}
    for holding in running:
        target = recommended_bytes(holding, recommender)
        if target is not None and target < holding.memory_bytes:
            resized[holding.key] = target
    by_key = {holding.key: holding for holding in running}
    rightsizing = [
        {
            "model": by_key[key].label,
            "from": format_bytes(by_key[key].memory_bytes),
            "to": format_bytes(new),
            "saves_bytes": by_key[key].memory_bytes - new,
        }
        for key, new in resized.items()
    ]
    idle_offer = [
        {"model": h.label, "frees_bytes": h.memory_bytes, "idle_since": h.idle_since(now).isoformat()} for h in idle
    ]

    def fits(dropped: int, sizes: dict[ModelKey, int]) -> bool:
        gone = {h.key for h in idle[:dropped]}
        kept = [item for h in running if h.key not in gone for item in holding_items(h, sizes.get(h.key))]
        return place([space()], proposed, biggest_first(kept)).pools[pool.name].fits

    def fewest_idle(sizes: dict[ModelKey, int]) -> int | None:
        """The smallest prefix of ``idle`` whose scale-to-zero makes room, by bisection."""
        if not fits(len(idle), sizes):
            return None
        low, high = 0, len(idle)
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if fits(middle, sizes) else (middle + 1, high)
        return low

    base = {"idle": idle_offer, "rightsizing": rightsizing}
    count = fewest_idle({}) if idle else None
    if count:
        return {
            **base,
            "fits_after": "scale_to_zero",
            "scale_to_zero": [h.label for h in idle[:count]],
            "frees_bytes": sum(h.memory_bytes for h in idle[:count]),
        }
    if resized and fits(0, resized):
        return {**base, "fits_after": "rightsizing", "scale_to_zero": [], "frees_bytes": 0}
    count = fewest_idle(resized) if idle and resized else None
    if count is not None:
        return {
            **base,
            "fits_after": "both",
            "scale_to_zero": [h.label for h in idle[:count]],
            "frees_bytes": sum(h.memory_bytes for h in idle[:count]),
        }
    return {
        **base,
        "fits_after": None,
        "scale_to_zero": [h.label for h in idle],
        "frees_bytes": sum(h.memory_bytes for h in idle),
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
                "nodes": [_node_dict(node, origins) for node in pool.nodes],
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
    misses = {miss.item.label for miss in result.placement.misses_of(set(origins))}
    nodes_of: dict[str, set[str]] = {label: set() for label in origins}  # one pass over every placed pod
    for pool in result.placement.pools.values():
        for node in pool.nodes:
            for item in node.placed:
                if item.label in nodes_of:
                    nodes_of[item.label].add(node.name)
    return {
        "cluster": result.cluster.name,
        "fits": result.fits,
        "repacked": result.repacked,
        "models": [
            {"model": p.label, "origin": p.origin, "pool": p.pool, "memory_bytes": p.memory_bytes, "gpus": p.gpus}
            for p in result.models
        ],
        "proposal": [
            {"model": p.label, "fits": p.label not in misses, "nodes": sorted(nodes_of[p.label])}
            for p in result.models
        ],
        "running_models": len(result.baseline),
        "overcommitted": result.overcommitted,
        "quota_breaks": result.quota_breaks,
        "pools": pools,
        "unknown_pool": [
            {"model": miss.item.label, "pool": miss.item.pool, "detail": miss.detail}
            for miss in result.placement.unknown_pool
        ],
    }


def _node_dict(node: NodeSpace, origins: dict[str, str]) -> dict[str, Any]:
    return {
        "name": node.name,
        "capacity_bytes": node.capacity_bytes,
        "used_bytes": node.used_bytes,
        "free_bytes": node.free_bytes,
        "gpus": None if node.gpus >= UNKNOWN_GPUS else node.gpus,
        "used_gpus": node.used_gpus,
        "gpu_memory_bytes": node.gpu_memory_bytes or None,
        "gpu_product": node.gpu_product,
        "models": [
            {
                "model": item.label,
                "origin": origins.get(item.label, "running"),
                "memory_bytes": item.memory_bytes,
                "gpus": item.gpus,
                "gpu_memory_bytes": item.gpu_memory_bytes,
            }
            for item in node.placed
        ],
    }


def _gi_floor(amount: int) -> str:
    """A valid ``memory`` quantity no larger than ``amount`` (whole Gi, else whole Mi)."""
    if amount >= 1024**3:
        return f"{amount // 1024**3}Gi"
    return f"{amount // 1024**2}Mi"
