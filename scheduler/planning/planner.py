"""What-if planning: proposed models plus their dependencies, placed beside what already runs.

Reads the database once (pools, nodes, serving models' narrow columns, the latter kept between
plans while the cluster's rows are unchanged: :mod:`scheduler.holdings_cache`), then works on
plain objects: the dependency closure, :func:`scheduler.planning.placement.place` with the running models kept
where they are (placed first; re-packed with the proposals only when asked), the proposal's own
fit, and for each pool where a proposal does not fit the cheapest changes that would make room:
idle models to scale to zero (oldest idle first, each with the memory it frees), right-sizings to
apply, or both.

Cost: the first placement is n log n, its running models' part kept between plans
(:mod:`scheduler.planning.baseline`); the search for the fewest idle models re-places only the
pool concerned, log k times (a binary search over the oldest-idle prefix), never the whole cluster.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache, partial
from operator import itemgetter
from typing import Any, NamedTuple

from django.utils import timezone

from clusters.models import Cluster
from clusters.validation.quantities import format_bytes
from clusters.validation.schemas import FieldError, ManifestInvalid
from common.gc_tuning import collector_paused
from scheduler.admission.quotas import what_if
from scheduler.holdings import Holding, ModelKey, dependencies_of, with_last_requests
from scheduler.holdings_cache import cluster_holdings
from scheduler.planning.baseline import running_placed
from scheduler.planning.inputs import UNKNOWN_GPUS, PoolShapes, fixed_items, holding_items, proposal_items, running_pods
from scheduler.planning.pages import Answer, Entries, Sorted
from scheduler.planning.placement import (
    Item,
    NodeSpace,
    Placement,
    PoolResult,
    PoolSpace,
    Unplaced,
    biggest_first,
    place,
)
from scheduler.planning.placement import fits as pool_fits
from scheduler.planning.proposals import Proposal
from scheduler.savings import Recommender, recommended_bytes


@dataclass
class Plan:
    cluster: Cluster
    placement: Placement
    models: list[Proposal]
    baseline: list[Holding]
    suggestions: dict[str, dict[str, Any]] = field(default_factory=dict)
    repacked: bool = False
    quota_breaks: list[str] = field(default_factory=list)
    """The team quotas the proposal would break (scheduler.admission.quotas.what_if), each named."""
    version: str = ""
    """A digest of what the plan was computed from (:func:`plan_version`): equal versions, equal plans."""

    @property
    def missed(self) -> set[str]:
        """The models (labels) with a pod that found no node, proposed or running."""
        return self.placement.missed

    @property
    def fits(self) -> bool:
        """The proposal's own fit: every pod of the proposed models (and dependencies) found a node."""
        return self.missed.isdisjoint(proposal.label for proposal in self.models)

    @property
    def overcommitted(self) -> Sorted:
        """Running models that do not fit where they are (the pool shrank or is over budget), by label.

        Every pod placed is a proposed model's or a running one's, so the running models that
        missed are the models that missed less the proposed ones: no set of the 10,000 running
        models' labels is needed to find them.
        """
        return Sorted(self.missed.difference(proposal.label for proposal in self.models))


def dependency_closure(proposals: list[Proposal], holdings: Sequence[Holding]) -> list[Proposal]:
    """The proposals plus every dependency not already running, each model once, dependencies first.

    A dependency names a model of the same cluster and namespace: a proposal's name first, then an
    existing model's object name, then its ``modelName`` (the reference does not say which one a
    dependency names). A missing or cyclic dependency is a ManifestInvalid naming it.

    The existing models' names and declared dependencies (a query) are read on the first
    dependency looked up: most plans propose models without any, and need neither.
    """
    namespaces = {proposal.namespace for proposal in proposals}

    @cache
    def declared() -> dict[tuple[str, str], list[str]]:
        return dependencies_of(proposals[0].cluster_id, namespaces)

    @cache
    def by_name() -> dict[tuple[str, str], Proposal | Holding]:
        found: dict[tuple[str, str], Proposal | Holding] = {}
        for holding in holdings:
            if holding.namespace in namespaces:
                found.setdefault((holding.namespace, holding.model_name), holding)
        for holding in holdings:
            if holding.namespace in namespaces:
                found[(holding.namespace, holding.name)] = holding
        for proposal in proposals:
            found[(proposal.namespace, proposal.name)] = proposal
        return found

    result: dict[ModelKey, Proposal] = {}

    def needs(node: Proposal | Holding) -> list[str]:
        return node.dependencies if isinstance(node, Proposal) else declared().get((node.namespace, node.name), [])

    def visit(node: Proposal | Holding, trail: tuple[str, ...], root: Proposal) -> None:
        if node.name in trail:
            cycle = " -> ".join((*trail[trail.index(node.name) :], node.name))
            rule = f"form a dependency cycle: {cycle}"
            raise ManifestInvalid([FieldError(f"{root.path}.dependencies", list(root.dependencies), rule)])
        if node.key in result:
            return
        for name in needs(node):
            target = by_name().get((node.namespace, name))
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

    The collector is paused meanwhile (:func:`common.gc_tuning.collector_paused`): placing
    10,000 models allocates as many items and misses while the page's rows stay alive, and each
    full collection walked them all (about a third of ``plan()``'s time).
    """
    with collector_paused():
        return _plan(cluster, proposals, include_running, now or timezone.now(), recommender, repack)


def _plan(
    cluster: Cluster, proposals: list[Proposal], include_running: bool, now: datetime,
    recommender: Recommender | None, repack: bool,
) -> Plan:  # fmt: skip
    read = cluster_holdings(cluster.pk)
    holdings = read.holdings
    models = dependency_closure(proposals, holdings)
    planned = {proposal.key for proposal in models}
    # a key is built only for a running model named as a planned one (most plans name none)
    clash = {key[3] for key in planned} & read.running_names if include_running else set()

    def kept(running: Sequence[Holding]) -> list[Holding]:
        """The running models that keep running beside the plan: all but those it plans anew."""
        return [h for h in running if h.name not in clash or h.key not in planned] if clash else list(running)

    running = read.running if include_running else ()
    baseline = kept(running)
    shapes = PoolShapes(cluster)
    new = [item for proposal in models for item in proposal_items(proposal)]
    if include_running and not repack and len(baseline) == len(running):
        placer = running_placed(cluster.pk, holdings, shapes)  # every running model, placed first
        placer.add(biggest_first(new))
        placement = placer.placement
    else:
        fixed = fixed_items(baseline)
        placement = place(shapes.spaces(), [*new, *fixed], ()) if repack else place(shapes.spaces(), new, fixed)
    result = Plan(
        cluster, placement, models, baseline, repacked=repack, quota_breaks=what_if(cluster.pk, models, baseline)
    )
    # a proposed model misses in its own pool only: no walk of the thousands of running models' misses
    proposed = {proposal.label for proposal in models}  # a running model planned anew keeps no pod
    names = {proposal.pool for proposal in models if proposal.label in result.missed}
    short = [pool for pool in placement.pools.values() if pool.name in names]
    by_pool: dict[str, list[Holding]] = {}
    # the last requests of every pool's running models at once: kept holdings' may be old
    running_by_pool, pods_by_pool = (read.running_by_pool, running_pods(read)) if include_running else ({}, {})
    here = [holding for pool in short for holding in kept(running_by_pool.get(pool.name, ()))]
    for holding in with_last_requests(here):
        by_pool.setdefault(holding.pool, []).append(holding)
    idle_by_pool: dict[str, list[Idle]] = {}
    for pool in short:
        mine = [item for item in new if item.pool == pool.name]
        space = partial(shapes.pool, pool.name)
        running_here = by_pool.get(pool.name, [])
        pods = [item for item in pods_by_pool.get(pool.name, ()) if item.label not in proposed]
        idle = idle_by_pool[pool.name] = idle_order(running_here, now)
        result.suggestions[pool.name] = suggest(pool, space, mine, running_here, pods, idle, recommender)
    result.version = plan_version(read.version, shapes, models, include_running, repack, result.quota_breaks,
                                  idle_by_pool)  # fmt: skip
    return result


def plan_version(
    holdings: str, shapes: PoolShapes, models: list[Proposal], include_running: bool, repack: bool,
    quota_breaks: list[str], idle_by_pool: dict[str, list[Idle]],
) -> str:  # fmt: skip
    """A digest of what a plan is computed from, so that two plans with the same version are the
    same plan (what a paging cursor checks), at the cost of a few short reprs, not of the answer.

    A plan is a function of the cluster's holdings (``holdings``: their version,
    :class:`scheduler.holdings_cache.ClusterHoldings`), its pools' budgets and nodes, the proposed
    models as the request resolved them (with their dependencies), the two options, and, read
    afresh by each plan, the quotas (their verdict is short: it is digested itself) and the idle
    models that the suggestions offer, which the last requests and ``now`` decide (digested as
    what they decided: which models, idle since when). The recommender is the caller's (the page
    and the API use none).
    """
    digest = hashlib.blake2b(digest_size=12)
    digest.update(repr((holdings, shapes.shapes, models, include_running, repack, quota_breaks)).encode())
    for pool, idle in sorted(idle_by_pool.items()):
        digest.update(f"\n{pool}\n".encode())
        digest.update("\n".join([entry.label for entry in idle]).encode())
        digest.update(array("d", [entry.since.timestamp() for entry in idle]).tobytes())  # a repr of each was 2 ms
    return digest.hexdigest()


class Idle(NamedTuple):
    """An idle model, since when, and its label (formatted once: the order, the bisection of the
    suggestions and the plan's version all read it, and formatting 2,000 labels thrice was 3 ms)."""

    holding: Holding
    since: datetime
    label: str


def idle_order(running: list[Holding], now: datetime) -> list[Idle]:
    """The idle models of ``running``, each with when it became idle, oldest idle first (then by label)."""
    idle = [
        Idle(holding, since, holding.label) for holding in running if (since := holding.idle_since(now)) is not None
    ]
    idle.sort(key=itemgetter(1, 2))
    return idle


def suggest(
    pool: PoolResult,
    space: Callable[[], PoolSpace],
    proposed: list[Item],
    running: list[Holding],
    pods: list[Item],
    idle_since: list[Idle],
    recommender: Recommender | None,
) -> dict[str, Any]:
    """The cheapest changes that make the proposed pods fit in ``pool``, or what is known when none does.

    ``running`` are the models running in the pool beside the proposal, ``pods`` their pods at
    their declared sizes, biggest first.

    Scaling idle models to zero needs no redeploy, so it comes first: the fewest oldest-idle ones
    (``idle_since``, :func:`idle_order`; a binary search over the prefix, each step one
    re-placement of this pool only). Then every right-sizing saving; then both. Each candidate
    carries the memory it frees. The lists offered are :class:`Entries`, built where read.
    """
    idle = [entry.holding for entry in idle_since]
    idle_labels = [entry.label for entry in idle_since]
    changes = [
        (holding, target)
        for holding in running
        if (target := recommended_bytes(holding, recommender)) is not None and target < holding.memory_bytes
    ]
    resized: dict[ModelKey, int] = {holding.key: target for holding, target in changes}
    rightsizing = Entries(changes, _rightsizing_entry)
    idle_offer = Entries(idle_since, _idle_entry)

    def fits(dropped: int, sizes: dict[ModelKey, int]) -> bool:
        """Whether the proposal fits beside the running pods less the ``dropped`` oldest idle
        models', at ``sizes``: placed only as far as the first pod that finds no node."""
        gone = set(idle_labels[:dropped])
        kept: Iterable[Item]
        if sizes:
            kept = biggest_first(
                [item for h in running if h.label not in gone for item in holding_items(h, sizes.get(h.key))]
            )
        else:  # a sorted list filtered stays sorted (filtered as far as it is read)
            kept = (item for item in pods if item.label not in gone)
        return pool_fits(space(), proposed, kept)

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
            "scale_to_zero": Entries(idle[:count], _label),
            "frees_bytes": sum(h.memory_bytes for h in idle[:count]),
        }
    if resized and fits(0, resized):
        return {**base, "fits_after": "rightsizing", "scale_to_zero": Entries([]), "frees_bytes": 0}
    count = fewest_idle(resized) if idle and resized else None
    if count is not None:
        return {
            **base,
            "fits_after": "both",
            "scale_to_zero": Entries(idle[:count], _label),
            "frees_bytes": sum(h.memory_bytes for h in idle[:count]),
        }
    return {
        **base,
        "fits_after": None,
        "scale_to_zero": Entries(idle, _label),
        "frees_bytes": sum(h.memory_bytes for h in idle),
        "message": "even scaling every idle model to zero and applying every right-sizing saving is not enough",
    }


def _label(holding: Holding) -> str:
    return holding.label


def _idle_entry(entry: Idle) -> dict[str, Any]:
    return {"model": entry.label, "frees_bytes": entry.holding.memory_bytes, "idle_since": entry.since.isoformat()}


def _rightsizing_entry(change: tuple[Holding, int]) -> dict[str, Any]:
    holding, new = change
    return {
        "model": holding.label,
        "from": format_bytes(holding.memory_bytes),
        "to": format_bytes(new),
        "saves_bytes": holding.memory_bytes - new,
    }


def plan_to_dict(result: Plan) -> Answer:
    """The plan as JSON for the API and the page, its long lists :class:`Entries` (built where read)."""
    origins = {proposal.label: proposal.origin for proposal in result.models}

    def placed(item: Item) -> dict[str, Any]:
        return {
            "model": item.label,
            "origin": origins.get(item.label, "running"),
            "memory_bytes": item.memory_bytes,
            "gpus": item.gpus,
            "gpu_memory_bytes": item.gpu_memory_bytes,
        }

    def unplaced(miss: Unplaced) -> dict[str, Any]:
        return {
            "model": miss.item.label,
            "origin": origins.get(miss.item.label, "running"),
            "memory_bytes": miss.item.memory_bytes,
            "reason": miss.reason,
            "detail": miss.detail,
        }

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
                "nodes": [_node_dict(node, placed) for node in pool.nodes],
                "unplaced": Entries(pool.unplaced, unplaced),
                "suggestions": result.suggestions.get(pool.name),
            }
        )
    nodes_of: dict[str, set[str]] = {label: set() for label in origins}  # one pass over every placed pod
    for pool in result.placement.pools.values():
        for node in pool.nodes:
            for item in node.placed:
                if item.label in nodes_of:
                    nodes_of[item.label].add(node.name)
    body = {
        "cluster": result.cluster.name,
        "fits": result.fits,
        "repacked": result.repacked,
        "models": [
            {"model": p.label, "origin": p.origin, "pool": p.pool, "memory_bytes": p.memory_bytes, "gpus": p.gpus}
            for p in result.models
        ],
        "proposal": [
            {"model": p.label, "fits": p.label not in result.missed, "nodes": sorted(nodes_of[p.label])}
            for p in result.models
        ],
        "running_models": len(result.baseline),
        "overcommitted": Entries(result.overcommitted),
        "quota_breaks": result.quota_breaks,
        "pools": pools,
        "unknown_pool": Entries(result.placement.unknown_pool, _unknown_pool_entry),
    }
    return Answer(body, result.version)


def _unknown_pool_entry(miss: Unplaced) -> dict[str, Any]:
    return {"model": miss.item.label, "pool": miss.item.pool, "detail": miss.detail}


def _node_dict(node: NodeSpace, placed: Callable[[Item], dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": node.name,
        "capacity_bytes": node.capacity_bytes,
        "used_bytes": node.used_bytes,
        "free_bytes": node.free_bytes,
        "gpus": None if node.gpus >= UNKNOWN_GPUS else node.gpus,
        "used_gpus": node.used_gpus,
        "gpu_memory_bytes": node.gpu_memory_bytes or None,
        "gpu_product": node.gpu_product,
        "models": Entries(node.placed, placed),
    }


def _gi_floor(amount: int) -> str:
    """A valid ``memory`` quantity no larger than ``amount`` (whole Gi, else whole Mi)."""
    if amount >= 1024**3:
        return f"{amount // 1024**3}Gi"
    return f"{amount // 1024**2}Mi"
