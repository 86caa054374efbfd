"""Per-pool budget accounting: budget, allocated, reserved, observed, free, right-sizing savings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import chain

from django.db.models import Count, Q, QuerySet, Sum, Value
from django.db.models.fields.json import KeyTextTransform

from clusters.models import Cluster
from scheduler.holdings import (
    Holding,
    ModelKey,
    PoolsByState,
    Restrict,
    controlled_pairs,
    holding_rows,
    load_holdings,
    recommended_in_status,
    running_condition,
    serving_models,
)
from scheduler.holdings_cache import ClusterHoldings, managed_kinds_and_kept
from scheduler.models import MemoryReservation, NodePool
from scheduler.pool_totals import pool_totals
from scheduler.savings import Recommender, saving_bytes

Visible = Callable[[int, str], bool]

HOLDERS_SHOWN = 10
"""Holders a page or the API lists per pool (biggest first); the figures always cover every model."""


@dataclass
class PoolAccount:
    """One pool's books. ``budget_bytes`` is None for a pool models name but no NodePool row has;
    ``without_nodes`` such a pool, or one whose Nodes are all gone (``NodePool.without_nodes``):
    shown as such, its memory and GPUs what models declare, none of it capacity."""

    cluster_id: int
    cluster_name: str
    pool: str
    budget_bytes: int | None
    allocated_bytes: int = 0
    reserved_bytes: int = 0
    observed_bytes: int = 0
    rightsizing_savings_bytes: int = 0
    holders: list[Holding] = field(default_factory=list)
    gpus_used: int = 0
    other_team_holders: int = 0
    holders_total: int = 0
    without_nodes: bool = False

    @property
    def committed_bytes(self) -> int:
        """Allocated by running models plus reserved by admitted ones not yet running."""
        return self.allocated_bytes + self.reserved_bytes

    @property
    def free_bytes(self) -> int | None:
        return None if self.budget_bytes is None or self.without_nodes else self.budget_bytes - self.committed_bytes


def reserved_beyond(reservations: dict[ModelKey, int], declared: dict[ModelKey, int]) -> int:
    """Reserved memory beyond what the reserving models, when running, already declare."""
    return sum(max(0, amount - declared.get(key, 0)) for key, amount in reservations.items())


def account(
    holders: list[Holding], reservations: dict[ModelKey, int], recommender: Recommender | None = None
) -> tuple[int, int, int, int]:
    """(allocated, reserved, observed, savings) of one pool from its running models and reservations.

    A reservation of a model that is already running counts only for what it adds beyond the
    running model's declared memory, so nothing is counted twice.
    """
    declared = {holder.key: holder.memory_bytes for holder in holders}
    allocated = sum(declared.values())
    reserved = reserved_beyond(reservations, declared)
    observed = sum(holder.observed_peak_bytes or 0 for holder in holders)
    savings = sum(saving_bytes(holder, recommender) for holder in holders)
    return allocated, reserved, observed, savings


def pool_accounts(
    cluster_id: int | None = None,
    recommender: Recommender | None = None,
    restrict: Restrict | None = None,
    per_pool: int | None = None,
    visible: Visible | None = None,
) -> list[PoolAccount]:
    """Books of every pool (of one cluster, or all): NodePool rows, plus pools only models name.

    Allocated is the declared memory of running models (replicas their cluster reports, else the
    desired ones) plus the GPUs they use, over every model, so a pool's totals are whole whoever
    looks: they come from the totals PostgreSQL keeps as rows change (:mod:`scheduler.pool_totals`),
    not from a sum over the models. Holders (biggest first), observed peaks and right-sizing
    savings are read only for the rows ``restrict`` leaves (a team member's; None: every row, read
    from the kept totals too), counting the others in ``other_team_holders``. ``per_pool`` lists
    only the biggest that many holders per pool, ``holders_total`` saying how many there are; the
    figures stay whole. A pool where only stopped models are is listed, holding nothing: no
    stopped model is read (no page lists them; their biggest per pool were half of the holders'
    reads, in PostgreSQL's time and ours). ``visible``: the rows ``restrict`` leaves, as a
    ``(cluster_id, namespace) -> bool`` predicate; with it, a team member's figures and holders of
    the planned cluster come from the holdings this process keeps, as staff's do (issue 41: three
    scans per kind made a member's what-if 1.6 times staff's CPU).
    """
    # (in no order, the accounts are sorted at the end: the models' orderings joined the clusters'
    # names in, to the reservations too, and were most of Django's time building these queries)
    pools = NodePool.objects.select_related("cluster").order_by()
    if cluster_id is not None:
        pools = pools.filter(cluster_id=cluster_id)
    accounts: dict[tuple[int, str], PoolAccount] = {
        (pool.cluster_id, pool.name): PoolAccount(
            pool.cluster_id, pool.cluster.name, pool.name, pool.effective_budget_bytes, without_nodes=pool.without_nodes
        )
        for pool in pools
    }
    reservations: dict[tuple[int, str], dict[ModelKey, int]] = {}
    rows = MemoryReservation.objects.order_by()
    if cluster_id is not None:
        rows = rows.filter(pool__cluster_id=cluster_id)
    columns = ("kind", "pool__cluster_id", "namespace", "name", "pool__name", "memory_bytes")
    for kind, pool_cluster, namespace, name, pool, memory in rows.values_list(*columns):
        reservations.setdefault((pool_cluster, pool), {})[(kind, pool_cluster, namespace, name)] = memory

    # the clusters' names the NodePool rows brought (their clusters joined in)
    known = {account.cluster_id: account.cluster_name for account in accounts.values()}

    @cache
    def names() -> dict[int, str]:
        """Every cluster's name, read for a pool only models name in a cluster without NodePool
        rows (a what-if's cluster has some: its pool the models alone name cost a query)."""
        return dict(Cluster.objects.order_by().values_list("id", "name"))

    def entry(pool_key: tuple[int, str]) -> PoolAccount:
        if pool_key not in accounts:
            name = known[pool_key[0]] if pool_key[0] in known else names().get(pool_key[0], "?")
            accounts[pool_key] = PoolAccount(pool_key[0], name, pool_key[1], None, without_nodes=True)
        return accounts[pool_key]

    # one cluster's managed kinds (whether its unreported models run) and kept holdings in one read
    state = managed_kinds_and_kept(cluster_id) if cluster_id is not None else None
    controlled = controlled_pairs([(cluster_id, list(state[0]))] if state is not None else None)
    # a member's rows are taken from the kept holdings as staff's are, where the process keeps them
    kept = state[1] if state is not None and (restrict is None or visible is not None) else None
    shown = visible if restrict is not None and kept is not None else None
    totals, figures, pools_of_kind = _pool_figures(cluster_id, restrict, recommender, controlled, kept, shown)
    for _, stopped_in in pools_of_kind.values():
        for pool_key in stopped_in:
            entry(pool_key)
    for holding in _holders(cluster_id, restrict, per_pool, pools_of_kind, kept, shown):
        entry((holding.cluster_id, holding.pool)).holders.append(holding)
    for pool_key, (_, gpus, count) in totals.items():
        account_entry = entry(pool_key)
        account_entry.gpus_used = gpus
        account_entry.holders_total = figures.get(pool_key, (0, 0, 0))[0]
        account_entry.other_team_holders = count - account_entry.holders_total
    reserved_running = _running_reserved(cluster_id, reservations)
    for pool_key, account_entry in accounts.items():
        account_entry.holders.sort(key=lambda h: (-h.memory_bytes, h.label))
        _, account_entry.observed_bytes, account_entry.rightsizing_savings_bytes = figures.get(pool_key, (0, 0, 0))
        declared = {holder.key: holder.memory_bytes for holder in reserved_running.get(pool_key, [])}
        account_entry.reserved_bytes = reserved_beyond(reservations.get(pool_key, {}), declared)
        account_entry.allocated_bytes = totals.get(pool_key, [0])[0]
    return sorted(accounts.values(), key=lambda a: (a.cluster_name, a.pool))


def _holders(
    cluster_id: int | None, restrict: Restrict | None, per_pool: int | None, pools_of_kind: dict[str, PoolsByState],
    kept: ClusterHoldings | None, visible: Visible | None,
) -> Iterable[Holding]:  # fmt: skip
    """The running holders ``pool_accounts`` lists (the ``per_pool`` biggest of each pool and kind):
    from the planned cluster's holdings this process keeps (``kept``, :func:`managed_kinds_and_kept`),
    where it keeps them (only the ``visible`` ones, when given), else read in SQL (three queries
    Django took 11 ms to build and read, on a what-if's page of a 10,000-model cluster)."""
    if kept is not None:
        return kept.biggest_running(per_pool, visible)
    running_in = {kind: (running, set()) for kind, (running, _) in pools_of_kind.items()}
    return load_holdings(cluster_id, running_only=True, restrict=restrict, per_pool=per_pool, pools_of_kind=running_in)


def _running_reserved(
    cluster_id: int | None, reservations: dict[tuple[int, str], dict[ModelKey, int]]
) -> dict[tuple[int, str], list[Holding]]:
    """Running models that also hold a reservation, whoever may see them, so their reservation
    counts only beyond their declared memory (reservations are few: one query per kind)."""
    keys = {key for pool in reservations.values() for key in pool}
    if not keys:
        return {}
    wanted = Q(pk__in=[])
    for _, key_cluster, namespace, name in keys:
        wanted |= Q(cluster_id=key_cluster, namespace=namespace, name=name)
    result: dict[tuple[int, str], list[Holding]] = {}
    for holding in load_holdings(cluster_id, running_only=True, restrict=lambda rows: rows.filter(wanted)):
        if holding.key in keys:
            result.setdefault((holding.cluster_id, holding.pool), []).append(holding)
    return result


def _pool_figures(
    cluster_id: int | None, restrict: Restrict | None, recommender: Recommender | None,
    controlled: set[tuple[int, str]], kept: ClusterHoldings | None = None, visible: Visible | None = None,
) -> tuple[
    dict[tuple[int, str], tuple[int, int, int]],
    dict[tuple[int, str], tuple[int, int, int]],
    dict[str, PoolsByState],
]:
    """Per pool: (memory, GPUs, models) of every running model, and (models, observed peaks,
    right-sizing savings) of the visible ones; per kind, the pools its running and its stopped
    models that ``restrict`` leaves name.

    Every model's figures are the kept totals (a few rows per pool). Without ``restrict`` the
    visible figures are the same totals; with it, one scan of the rows it leaves per kind (a team's
    namespaces), grouped by pool. Savings come from right-sizing's one definition only: rows whose
    status carries its recommendation (or every row with a peak when a ``recommender`` is plugged
    in) are read as five narrow columns (visible ones only) and priced in Python; a model
    right-sizing has not judged saves nothing, and pools where none is advised read no row.
    ``controlled``: the (cluster, kind) pairs the portal controls (:func:`controlled_pairs`), of
    ``cluster_id``'s cluster at least. With ``visible`` (and the cluster's ``kept`` holdings), the
    visible figures are summed from the kept holdings that ``visible`` leaves instead (no scan).
    """
    totals: dict[tuple[int, str], list[int]] = {}
    mine: dict[tuple[int, str], list[int]] = {}
    pools_of_kind: dict[str, PoolsByState] = {model.kube.kind: (set(), set()) for model in serving_models()}
    advised_pools: dict[str, set[tuple[int, str]]] = {kind: set() for kind in pools_of_kind}
    for total in pool_totals(None if cluster_id is None else {cluster_id}):
        pool_key = (total.cluster_id, total.node_pool)
        runs = total.runs((total.cluster_id, total.kind) in controlled)
        if restrict is None:
            pools_of_kind[total.kind][0 if runs else 1].add(pool_key)
        if not runs:
            continue
        figures = totals.setdefault(pool_key, [0, 0, 0])
        figures[0] += total.memory_bytes
        figures[1] += total.gpus
        figures[2] += total.model_count
        if restrict is None:
            seen = mine.setdefault(pool_key, [0, 0, 0])
            seen[0] += total.model_count
            seen[1] += total.observed_peak_bytes
            if total.advised or (recommender is not None and total.observed_peak_bytes):
                advised_pools[total.kind].add(pool_key)
    if visible is not None and kept is not None:
        _kept_figures(kept, visible, recommender, mine, pools_of_kind)
        restrict = None  # every visible figure is summed, the savings too
    for model in serving_models():
        kind = model.kube.kind
        if restrict is None and not advised_pools[kind]:
            continue  # every figure is the kept totals', and no saving to price
        running = running_condition({pk for pk, managed in controlled if managed == kind})
        has_peak = "observed_peak_bytes" in {f.name for f in model._meta.get_fields()}
        advised = Q(status__has_key="recommendation")
        rows = holding_rows(model, cluster_id, None, restrict)
        if restrict is not None:
            sums = {
                "count": Count("id", filter=running), "stopped": Count("id", filter=~running),
                "advised": Count("id", filter=advised & running),
                "peak": Sum("observed_peak_bytes", filter=running) if has_peak else Value(0),
                "peaked": Count("observed_peak_bytes", filter=running) if has_peak else Value(0),
            }  # fmt: skip
            for row in rows.values("cluster_id", "node_pool").order_by().annotate(**sums):
                pool_key = (row["cluster_id"], row["node_pool"])
                if row["stopped"]:
                    pools_of_kind[kind][1].add(pool_key)
                if row["count"]:
                    pools_of_kind[kind][0].add(pool_key)
                    seen = mine.setdefault(pool_key, [0, 0, 0])
                    seen[0] += row["count"]
                    seen[1] += row["peak"] or 0
                    if row["advised"] or (recommender is not None and row["peaked"]):
                        advised_pools[kind].add(pool_key)
        if not advised_pools[kind]:
            continue
        in_pools = Q(pk__in=[])
        for pool_cluster, pool in advised_pools[kind]:
            in_pools |= Q(cluster_id=pool_cluster, node_pool=pool)
        peaked = Q(observed_peak_bytes__isnull=False) if has_peak and recommender is not None else Q(pk__in=[])
        shown = rows.filter(running).filter(in_pools).filter(advised | peaked)
        for pool_key, saved in _python_savings(kind, shown, has_peak, recommender):
            mine.setdefault(pool_key, [0, 0, 0])[2] += saved
    return (
        {key: (memory, gpus, count) for key, (memory, gpus, count) in totals.items()},
        {key: (count, peak, saved) for key, (count, peak, saved) in mine.items()},
        pools_of_kind,
    )


def _kept_figures(
    kept: ClusterHoldings, visible: Visible, recommender: Recommender | None,
    mine: dict[tuple[int, str], list[int]], pools_of_kind: dict[str, PoolsByState],
) -> None:  # fmt: skip
    """The visible figures :func:`_pool_figures` reads in SQL for ``restrict``, summed from the
    kept holdings ``visible`` leaves: per pool (models, observed peaks, right-sizing savings of the
    models the cluster's recommendation or ``recommender`` judged), and each kind's pools of running
    and of stopped models."""
    seen = (holdings for key, holdings in kept.by_namespace.items() if visible(*key))
    for holding in chain.from_iterable(seen):
        pool_key = (holding.cluster_id, holding.pool)
        if not holding.running:
            pools_of_kind[holding.kind][1].add(pool_key)
            continue
        pools_of_kind[holding.kind][0].add(pool_key)
        figures = mine.setdefault(pool_key, [0, 0, 0])
        figures[0] += 1
        figures[1] += holding.observed_peak_bytes or 0
        if holding.status_recommended_bytes is not None or (
                recommender is not None and holding.observed_peak_bytes is not None):
            figures[2] += saving_bytes(holding, recommender)


def _python_savings(
    kind: str, rows: QuerySet, has_peak: bool, recommender: Recommender | None
) -> Iterator[tuple[tuple[int, str], int]]:
    columns = ["cluster_id", "namespace", "name", "node_pool", "memory_bytes"]
    peak = ["observed_peak_bytes"] if has_peak else []
    for values in rows.values(*columns, *peak, advice=KeyTextTransform("recommendation", "status")):
        holding = Holding(
            kind, 0, values["cluster_id"], values["namespace"], values["name"], values["node_pool"],
            values["memory_bytes"] or 0, 1, observed_peak_bytes=values.get("observed_peak_bytes"),
            status_recommended_bytes=recommended_in_status(values["advice"]),
        )  # fmt: skip
        yield (values["cluster_id"], values["node_pool"]), saving_bytes(holding, recommender)
