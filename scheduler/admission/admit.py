"""Memory-budget admission for the controllers: may this model (and its dependencies) start now?

The controller builds a plain :class:`Demand` (no model import either way) and calls
:func:`admit`; when the model scales to zero or is deleted it calls :func:`release`.

Consistency: a decision locks the pool rows it touches (``SELECT ... FOR UPDATE``, in pool id
order so two decisions never deadlock), counts running models plus the reservation table, and
writes its own reservation before the transaction commits. A second decision on the same pool
waits for the lock and then sees the first one's reservation, so two models racing for the last
free bytes cannot both be admitted. (SQLite has no row locks; the project's SQLite settings open
every transaction with ``BEGIN IMMEDIATE``, which serializes writers the same way.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters.kube.client import ClusterGateway
from clusters.validation.quantities import format_bytes, quantity_to_int
from scheduler.admission.accounting import account
from scheduler.admission.cluster_pods import PodRequests, pods_on_pools, unmirrored
from scheduler.admission.quotas import (
    QuotaState,
    TeamShare,
    asks,
    clear_reclaiming,
    mark_reclaiming,
    quota_state,
)
from scheduler.holdings import Holding, Identified, ModelKey, load_holdings
from scheduler.models import MemoryReservation, NodePool

DEFAULT_MAX_MODEL_MEMORY = "96Gi"
INSUFFICIENT_MEMORY = "InsufficientMemory"
INSUFFICIENT_GPU = "InsufficientGPU"
OVER_QUOTA = "OverQuota"


def max_model_memory_bytes() -> int | None:
    """The global per-model cap, ``MAX_MODEL_MEMORY`` (a quantity or bytes; default 96Gi, empty disables).

    The public InferenceModel controller enforces this one cap; here it applies on top of budgets.
    """
    value = getattr(settings, "MAX_MODEL_MEMORY", DEFAULT_MAX_MODEL_MEMORY)
    return quantity_to_int(value) if value not in (None, "") else None


@dataclass
class Demand(Identified):
    """What a model asks of a pool. ``dependencies`` are the demands of models that must run first."""

    cluster_id: int
    pool: str
    kind: str
    namespace: str
    name: str
    memory_bytes: int
    dependencies: list[Demand] = field(default_factory=list)
    gpus: int = 0

    def closure(self) -> list[Demand]:
        """This demand and every dependency's, dependencies first, each model once."""
        seen: dict[ModelKey, Demand] = {}

        def visit(demand: Demand, path: tuple[ModelKey, ...]) -> None:
            if demand.key in path:
                raise ValueError("dependency cycle: " + " -> ".join(k[3] for k in (*path, demand.key)))
            for dependency in demand.dependencies:
                visit(dependency, (*path, demand.key))
            seen.setdefault(demand.key, demand)

        visit(self, ())
        return list(seen.values())


@dataclass
class AdmissionDecision:
    """The answer for one pool (the first that does not fit, else the demand's own pool)."""

    fits: bool
    pool: str
    requested_bytes: int
    available_bytes: int | None
    budget_bytes: int | None
    holders: list[Holding]
    idle_candidates: list[Holding]
    message: str
    reason: str = ""
    admitted: list[str] = field(default_factory=list)
    frees_enough: bool = False
    """Scaling ``idle_candidates`` (and ``preempt``) to zero would make room (the controller may do it at once)."""
    short_bytes: int = 0
    short_gpus: int = 0
    """How much memory and how many GPUs the pool lacks for the demands (0: not what refused them)."""
    preempt: list[Holding] = field(default_factory=list)
    """Models running on borrowed capacity to stop for a demand within its team's guarantee."""
    preempted_words: dict[ModelKey, str] = field(default_factory=dict)
    """Per model of ``preempt``: why, naming the team that reclaims (its ``Preempted`` condition and Event)."""


NEVER_FITS = "more than the pool holds in all, so it never fits there"
"""Said in a refusal whose demand exceeds the pool's whole capacity (GPUs or memory): no freed
capacity can admit it, only a change to the model (or a larger pool), so a caller that would wait
for capacity (the gateway's wake) answers at once (``models_app.wake``)."""


def _never_fits(wanted: int, total: int, shown: Callable[[int], str]) -> str:
    """The refusal's tail when ``wanted`` exceeds the pool's ``total``, else ""."""
    return f"; {shown(wanted)} is {NEVER_FITS} ({shown(total)})" if wanted > total else ""


def _idle_to_scale(
    others: list[Holding],
    held: Callable[[Holding], int],
    shortfall: int,
    now: datetime,
    shown: Callable[[int], str],
    first: set[ModelKey] = frozenset(),
) -> tuple[list[Holding], int, str]:
    """The idle models (oldest idle first, by :mod:`scheduler.idle`; those in ``first``, the models
    of teams borrowing beyond their quota, before all others) whose scale-to-zero frees
    ``shortfall`` of what ``held`` measures (memory or GPUs), what they free, and the refusal's
    words about them (amounts written by ``shown``). A model that holds none of it is never
    offered: it would stop for nothing."""
    idle = sorted(
        (h for h in others if held(h) and h.idle_since(now) is not None),
        key=lambda h: (h.key not in first, h.idle_since(now), h.label),
    )
    candidates, freed = [], 0
    for holder in idle:
        if freed >= shortfall:
            break
        candidates.append(holder)
        freed += held(holder)
    if candidates and freed >= shortfall:
        idle_names = ", ".join(f"{h.namespace}/{h.name}" for h in candidates)
        return candidates, freed, f"; scaling idle {idle_names} to zero would make room"
    if candidates:
        return candidates, freed, f"; even scaling every idle model to zero frees only {shown(freed)}"
    return candidates, freed, "; no idle model to scale to zero"


def _gpu_decision(
    pool: NodePool | None,
    demands: list[Demand],
    others: list[Holding],
    reserved_gpus: dict[ModelKey, int],
    now: datetime,
    first: set[ModelKey] = frozenset(),
    foreign: list[PodRequests] = (),
) -> AdmissionDecision | None:
    """A refusal when the pool's GPUs (known from its Nodes) cannot hold the demands' GPUs, else None.

    Held are the GPUs of running models, those promised to models admitted but not running yet
    (their reservations), as memory is counted: under the pool's lock, so of two GPU models
    racing for the last GPUs only one is admitted; and those of ``foreign`` pods, which no mirrored
    model accounts for (``cluster_pods``). Idle models holding GPUs are offered to scale to zero,
    as for memory, so the controller can make room in the same pass."""
    wanted = sum(demand.gpus for demand in demands)
    if pool is None or not pool.gpu_count or not wanted:
        return None
    held = sum(holder.gpu_count for holder in others)
    ignore = {demand.key for demand in demands} | {holder.key for holder in others}
    reserved = sum(gpus for key, gpus in reserved_gpus.items() if key not in ignore)
    outside = [pod for pod in foreign if pod.gpus]
    by_pods = sum(pod.gpus for pod in outside)
    free = pool.gpu_count - held - reserved - by_pods
    if wanted <= free:
        return None
    names = ", ".join(demand.label for demand in demands)
    candidates, freed, idle_text = _idle_to_scale(
        others, lambda h: h.gpu_count, wanted - free, now, "{} GPUs".format, first
    )
    return AdmissionDecision(
        False, pool.name, 0, None, pool.effective_budget_bytes, others, candidates,
        f"insufficient GPUs in pool {pool.name} for {names}: requested {wanted}, free {max(free, 0)} of "
        f"{pool.gpu_count} ({held} held by running models, {reserved} reserved by models starting"
        f"{_by_pods(outside, by_pods, str)})"
        f"{_never_fits(wanted, pool.gpu_count, '{} GPUs'.format)}{idle_text}",
        INSUFFICIENT_GPU, frees_enough=bool(candidates) and freed >= wanted - free, short_gpus=wanted - free,
    )  # fmt: skip


def _pool_decision(
    pool_name: str,
    budget: int | None,
    demands: list[Demand],
    holders: list[Holding],
    reservations: dict[ModelKey, int],
    now: datetime,
    first: set[ModelKey] = frozenset(),
    foreign: list[PodRequests] = (),
) -> AdmissionDecision:
    keys = {demand.key for demand in demands}
    others = [holder for holder in holders if holder.key not in keys]
    others.sort(key=lambda h: (-h.memory_bytes, h.label))
    other_reservations = {key: amount for key, amount in reservations.items() if key not in keys}
    allocated, reserved, _, _ = account(others, other_reservations)
    outside = [pod for pod in foreign if pod.memory_bytes]
    by_pods = sum(pod.memory_bytes for pod in outside)
    allocated += by_pods
    requested = sum(demand.memory_bytes for demand in demands)
    names = ", ".join(demand.label for demand in demands)
    # Models starting up hold the pool through their reservation before they report replicas.
    starting = [
        (key[2], key[3], amount)
        for key, amount in other_reservations.items()
        if key not in {holder.key for holder in others}
    ]
    holder_text = (
        ", ".join(
            [
                *(f"{h.namespace}/{h.name} ({format_bytes(h.memory_bytes)})" for h in others if h.memory_bytes),
                *(f"{ns}/{name} ({format_bytes(amount)}, starting)" for ns, name, amount in starting),
            ]
        )
        or "none"
    )
    if budget is None:
        return AdmissionDecision(
            True, pool_name, requested, None, None, others, [],
            f"{names}: pool {pool_name} has no budget (no labelled Nodes, none set by staff); "
            f"only the per-model cap applies",
        )  # fmt: skip
    available = budget - allocated - reserved
    if requested <= available:
        return AdmissionDecision(
            True, pool_name, requested, available, budget, others, [],
            f"{names} fit in pool {pool_name}: requested {format_bytes(requested)}, "
            f"available {format_bytes(max(available, 0))} of {format_bytes(budget)}",
        )  # fmt: skip
    shortfall = requested - available
    candidates, freed, idle_text = _idle_to_scale(others, lambda h: h.memory_bytes, shortfall, now, format_bytes, first)
    return AdmissionDecision(
        False, pool_name, requested, available, budget, others, candidates,
        f"insufficient memory in pool {pool_name} for {names}: requested {format_bytes(requested)}, "
        f"available {format_bytes(max(available, 0))} of {format_bytes(budget)}; held by {holder_text}"
        f"{_by_pods(outside, by_pods, format_bytes)}{_never_fits(requested, budget, format_bytes)}{idle_text}",
        INSUFFICIENT_MEMORY, frees_enough=bool(candidates) and freed >= shortfall, short_bytes=shortfall,
    )  # fmt: skip


def _by_pods(pods: list[PodRequests], amount: int, shown: Callable[[int], str], named: int = 3) -> str:
    """The refusal's words about what pods no mirrored model accounts for hold: the amount and the
    first few pods by name."""
    if not pods:
        return ""
    names = ", ".join(pod.label for pod in pods[:named])
    if len(pods) > named:
        names += f" and {len(pods) - named} more"
    return f"; {shown(amount)} by pods the portal does not mirror: {names}"


def admit(
    demand: Demand,
    now: datetime | None = None,
    stopping: set[ModelKey] = frozenset(),
    gateway: ClusterGateway | None = None,
    hold_for_preemption: bool = False,
) -> AdmissionDecision:
    """Admit ``demand`` and its dependencies that are not running yet, all or nothing.

    On success every admitted model holds a reservation until :func:`release`; on failure
    nothing is written and the decision names the requested and available memory, the holders
    (biggest first) and the idle models (oldest idle first) whose scale-to-zero would make room.
    Calling it again for an admitted or running model is harmless: its own memory never counts
    against itself. ``stopping`` names models being scaled to zero right now (their status still
    says running): they hold nothing. Every serving kind's running models count (KubeAI Models and
    ModelServices too, through the registry); GPUs are checked where the pool's Nodes give a count.
    With the cluster's ``gateway``, what the pods on the pools' nodes that serve no mirrored model
    request counts too (``cluster_pods``: read before the pools are locked, so no lock waits on
    the API server).

    ``hold_for_preemption`` (a caller that stops the decision's ``preempt`` models at once, as the
    controllers do through ``models_app.preemption``): a refusal that preemption resolves reserves the demand's room
    now, under the pool's lock, before its victims stop, as Kueue admits a workload before its
    victims are evicted. Otherwise the room the victims free is anyone's until the caller asks
    again: a victim's own reconcile, run just after its preemption, found it free and started the
    victim again with the newest reservation. The caller's next ``admit`` (with ``stopping``) keeps
    that reservation; a plan that ends refused releases it.
    """
    now = now or timezone.now()
    group = demand.closure()
    strangers = [d.label for d in group if d.cluster_id != demand.cluster_id]
    if strangers:
        raise ValueError(f"dependencies must be in the demand's cluster: {', '.join(strangers)} are not")
    cap = max_model_memory_bytes()
    over_cap = [d for d in group if cap is not None and d.memory_bytes > cap]
    if over_cap:
        first = over_cap[0]
        return AdmissionDecision(
            False, first.pool, first.memory_bytes, cap, None, [], [],
            f"{first.label} declares {format_bytes(first.memory_bytes)}, over the per-model cap "
            f"MAX_MODEL_MEMORY={format_bytes(cap)}",
            INSUFFICIENT_MEMORY,
        )  # fmt: skip
    by_pool: dict[tuple[int, str], list[Demand]] = {}
    for item in group:
        by_pool.setdefault((item.cluster_id, item.pool), []).append(item)
    on_nodes = pods_on_pools(gateway, demand.cluster_id, {pool for _, pool in by_pool}) if gateway else {}
    with transaction.atomic():
        pools = _lock_pools(list(by_pool))
        pool_names = sorted({pool_name for _, pool_name in by_pool})
        running = {
            h.key: h
            for h in load_holdings(demand.cluster_id, pools=pool_names, running_only=True)
            if h.key not in stopping
        }
        # Dependencies already running need no new memory; the demand itself is always (re)checked.
        pending = {
            key: [d for d in items if d is demand or d.key not in running or running[d.key].pool != d.pool]
            for key, items in by_pool.items()
        }
        decisions, guaranteed = [], []
        for (cluster_id, pool_name), items in sorted(pending.items(), key=lambda kv: kv[0][1] != demand.pool):
            pool = pools.get((cluster_id, pool_name))
            holders = [h for h in running.values() if h.cluster_id == cluster_id and h.pool == pool_name]
            reservations, reserved_gpus = pool.reserved() if pool else ({}, {})
            budget = pool.effective_budget_bytes if pool else None
            keys = {item.key for item in items}
            others = [holder for holder in holders if holder.key not in keys]
            shares = quota_state(pool, holders, reservations, reserved_gpus, keys) if pool else None
            first = shares.borrowers if shares else frozenset()
            mirrored = {(key[2], key[3]) for key in [*running, *reservations, *stopping, *(d.key for d in group)]}
            foreign = unmirrored(on_nodes.get(pool_name, []), mirrored)
            decision = (
                _quota_decision(shares, pool_name, items, others, now)
                or _gpu_decision(pool, items, others, reserved_gpus, now, first, foreign)
                or _pool_decision(pool_name, budget, items, holders, reservations, now, first, foreign)
            )
            owner = shares.within_guarantee(items, asks) if shares else None
            if owner is not None:
                guaranteed.append(owner)
                short = decision.reason in (INSUFFICIENT_MEMORY, INSUFFICIENT_GPU)
                if not decision.fits and not decision.frees_enough and short:
                    preempted = _preempt(pool, shares, owner, others, decision) if pool else False
                    if not preempted:
                        decision.message += mark_reclaiming(owner, now)
            decisions.append(decision)
        failed = next((d for d in decisions if not d.fits), None)
        if failed:
            if hold_for_preemption and all(d.fits or d.preempt for d in decisions):
                _reserve_pending(pending, pools)
            return failed
        for owner in guaranteed:
            clear_reclaiming(owner)
        decision = decisions[0]
        decision.admitted = _reserve_pending(pending, pools)
        return decision


def _reserve_pending(pending: dict[tuple[int, str], list[Demand]], pools: dict[tuple[int, str], NodePool]) -> list[str]:
    """Reserve every pending demand in its (locked) pool; their labels."""
    admitted = []
    for (cluster_id, pool_name), items in pending.items():
        pool = pools.get((cluster_id, pool_name))
        for item in items:
            _reserve(pool, item)
            admitted.append(item.label)
    return admitted


def release(cluster_id: int, kind: str, namespace: str, name: str) -> int:
    """Forget the reservations of one model (scaled to zero or deleted); returns how many were removed."""
    deleted, _ = MemoryReservation.objects.filter(
        pool__cluster_id=cluster_id, kind=kind, namespace=namespace, name=name
    ).delete()
    return deleted


def _quota_decision(
    shares: QuotaState | None, pool_name: str, items: list[Demand], others: list[Holding], now: datetime
) -> AdmissionDecision | None:
    """A refusal when the demands would borrow beyond their team's limit, or while another team
    reclaims its guaranteed share (:mod:`scheduler.admission.quotas`); None when the quotas allow them."""
    refusal = shares.refusal(items, asks, now) if shares else None
    if refusal is None:
        return None
    requested = sum(item.memory_bytes for item in items)
    return AdmissionDecision(False, pool_name, requested, None, None, others, [], refusal, OVER_QUOTA)


def _preempt(pool: NodePool, shares: QuotaState, owner: TeamShare, others: list[Holding],
             decision: AdmissionDecision) -> bool:
    """Name in ``decision`` the borrowed models to stop for ``owner``'s demand within its guarantee
    (newest admitted first, :meth:`QuotaState.reclaimable`), enough to cover what the pool lacks;
    False (nothing named) when even all of them would not. Runs under the pool's lock, so two
    claimants never pick the same shortfall twice: the second sees the first's reservation."""
    admitted = _admitted_at(pool)
    chosen, freed_bytes, freed_gpus = [], 0, 0
    for holder, share in shares.reclaimable({h.key: h for h in others}, admitted, claimant=owner):
        if freed_bytes >= decision.short_bytes and freed_gpus >= decision.short_gpus:
            break
        if (decision.short_gpus and holder.gpu_count) or (decision.short_bytes and holder.memory_bytes):
            chosen.append((holder, share))
            freed_bytes, freed_gpus = freed_bytes + holder.memory_bytes, freed_gpus + holder.gpu_count
    if not chosen or freed_bytes < decision.short_bytes or freed_gpus < decision.short_gpus:
        return False
    names = ", ".join(f"{h.namespace}/{h.name}" for h, _ in chosen)
    decision.preempt = [holder for holder, _ in chosen]
    decision.preempted_words = {
        holder.key: f"preempted in pool {pool.name}: team {owner.team} reclaims its guaranteed share; "
                    f"{shares.borrowing_words(share)}"
        for holder, share in chosen
    }  # fmt: skip
    decision.frees_enough = True
    decision.message += (
        f"; within team {owner.team}'s guaranteed share: preempting {names}, borrowed beyond their teams' "
        f"guarantees (newest first)"
    )
    return True


def _admitted_at(pool: NodePool) -> dict[ModelKey, datetime]:
    """When admission reserved for each model of the pool (a reservation lives from the model's
    admission to its scale-to-zero): the order "newest first" preempts in. One query."""
    return {
        (kind, pool.cluster_id, namespace, name): created
        for kind, namespace, name, created in pool.reservations.values_list("kind", "namespace", "name", "created_at")
    }


def borrowing(cluster_id: int, pool_name: str) -> dict[ModelKey, str]:
    """The running models of the pool that run on borrowed capacity (the ones a reclaim would take
    first, :meth:`QuotaState.reclaimable`), each with its team's borrowing in words; empty where the
    pool has no quotas (one query then). What the controller shows as the ``Borrowing`` condition."""
    pool = NodePool.objects.filter(cluster_id=cluster_id, name=pool_name, quotas__isnull=False).first()
    if pool is None:
        return {}
    holders = load_holdings(cluster_id, pools=[pool_name], running_only=True)
    reservations, reserved_gpus = pool.reserved()
    shares = quota_state(pool, holders, reservations, reserved_gpus, set())
    if shares is None:
        return {}
    admitted = _admitted_at(pool)
    return {
        holder.key: shares.borrowing_words(share)
        for holder, share in shares.reclaimable({h.key: h for h in holders}, admitted)
    }


def _lock_pools(keys: list[tuple[int, str]]) -> dict[tuple[int, str], NodePool]:
    """Lock the pool rows in id order (a fixed order: no deadlock between two decisions)."""
    query = Q(pk__in=[])
    for cluster_id, name in keys:
        query |= Q(cluster_id=cluster_id, name=name)
    locked = NodePool.objects.select_for_update().filter(query).order_by("pk")
    return {(pool.cluster_id, pool.name): pool for pool in locked}


def _reserve(pool: NodePool | None, demand: Demand) -> None:
    """Hold ``demand``'s memory in its pool and drop any reservation it had in another pool."""
    MemoryReservation.objects.filter(
        pool__cluster_id=demand.cluster_id, kind=demand.kind, namespace=demand.namespace, name=demand.name
    ).exclude(pool=pool).delete()
    if pool is not None:
        MemoryReservation.objects.update_or_create(
            pool=pool,
            kind=demand.kind,
            namespace=demand.namespace,
            name=demand.name,
            defaults={"memory_bytes": demand.memory_bytes, "gpus": demand.gpus},
        )
