"""Team quotas with borrowing: who owns which share of a pool, and what admission checks for it.

A model belongs to the team that may edit its namespace (:func:`team_resolver`). In a pool where
staff set :class:`scheduler.models.TeamQuota` rows, each team has a guaranteed share (memory and
GPUs) and may go beyond it, borrowing what the other teams leave unused, up to its borrowing limit.
A team without a quota in such a pool (or a namespace no team owns) only borrows, with no limit
but the pool. Pools without quotas are admitted on capacity alone, as before.

Admission (:func:`scheduler.admission.admit.admit`) asks :func:`quota_state` under the pool's row lock,
so the usage it counts (running models plus reservations, by team) cannot change underneath it:
concurrent wakes never over-admit a quota, as they never over-admit the pool. It then

- refuses a demand that would take its team beyond the borrowing limit, naming the quota;
- refuses new borrowing while another team reclaims its guaranteed share (the reclaiming quota's
  ``reclaiming_since`` younger than :data:`RECLAIM_HOLD`), naming that quota;
- offers borrowers' idle models first (oldest idle first) when a demand does not fit the pool, so
  a team wanting its guaranteed share back stops the borrowers before anyone else, and marks the
  team's quota reclaiming when even that does not free enough;
- preempts, when the idle models do not free enough for a demand within its team's guarantee, the
  models that run on borrowed capacity (:meth:`QuotaState.reclaimable`: newest admitted first, never
  a team's guaranteed models), so the guarantee holds within the claimant's own reconcile.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q

from accounts.models import ALL_NAMESPACES, NamespaceGrant
from clusters.validation.quantities import format_bytes
from scheduler.holdings import Holding, Identified, ModelKey, load_holdings
from scheduler.models import NodePool, TeamQuota

_OLDEST = datetime(1970, 1, 1, tzinfo=UTC)
RECLAIM_HOLD = timedelta(minutes=10)
"""How long a refused demand within a guarantee keeps other teams from borrowing: the controller
retries a refused model every pass, renewing the claim; a model deleted meanwhile lets it lapse."""
NO_TEAM = "(no team)"


def team_resolver(cluster_id: int) -> Callable[[str], tuple[int, str] | None]:
    """``namespace -> (team id, team name)`` of the team that may edit it in the cluster, or None.

    The most specific grant wins: this cluster's namespace, every cluster's namespace, this
    cluster's ``*``, every cluster's ``*``; between teams granted alike, the first by name. One query.
    """
    grants = (
        NamespaceGrant.objects.filter(access=NamespaceGrant.Access.EDIT)
        .filter(Q(cluster_id=cluster_id) | Q(cluster__isnull=True))
        .values_list("team_id", "team__name", "cluster_id", "namespace")
    )
    best: dict[str, tuple[int, str, int]] = {}
    for team_id, team_name, grant_cluster, namespace in grants:
        rank = (2 if namespace == ALL_NAMESPACES else 0) + (0 if grant_cluster is not None else 1)
        entry = (rank, team_name, team_id)
        if namespace not in best or entry < best[namespace]:
            best[namespace] = entry

    def resolve(namespace: str) -> tuple[int, str] | None:
        found = min((entry for key in (namespace, ALL_NAMESPACES) if (entry := best.get(key))), default=None)
        return None if found is None else (found[2], found[1])

    return resolve


@dataclass
class Use:
    """Memory and GPUs of one team in one pool."""

    bytes: int = 0
    gpus: int = 0

    def add(self, memory: int, gpus: int) -> None:
        self.bytes += memory
        self.gpus += gpus


@dataclass
class TeamShare:
    """One team's quota and use in a pool (``quota`` None: the team only borrows there)."""

    team_id: int | None
    team: str
    quota: TeamQuota | None
    used: Use = field(default_factory=Use)
    models: list[ModelKey] = field(default_factory=list)

    @property
    def guaranteed(self) -> Use:
        return Use(self.quota.guaranteed_bytes, self.quota.guaranteed_gpus) if self.quota else Use()

    @property
    def borrowed(self) -> Use:
        return borrowed(self.used, self.guaranteed)

    @property
    def name(self) -> str:
        return f"{self.team}/{self.quota.pool.name}" if self.quota else self.team


def borrowed(used: Use, guaranteed: Use) -> Use:
    return Use(max(0, used.bytes - guaranteed.bytes), max(0, used.gpus - guaranteed.gpus))


def reclaiming(quota: TeamQuota, now: datetime) -> bool:
    return quota.reclaiming_since is not None and now - quota.reclaiming_since < RECLAIM_HOLD


def _describe(quota: TeamQuota) -> str:
    limit = quota.borrowing_limit_bytes
    limit_bytes = "unlimited memory" if limit is None else format_bytes(limit)
    limit_gpus = "unlimited GPUs" if quota.borrowing_limit_gpus is None else f"{quota.borrowing_limit_gpus} GPUs"
    return (
        f"quota {quota.team.name}/{quota.pool.name}: guaranteed {format_bytes(quota.guaranteed_bytes)} and "
        f"{quota.guaranteed_gpus} GPUs, borrowing limit {limit_bytes} and {limit_gpus}"
    )


@dataclass
class QuotaState:
    """Every team's share of one pool, as admission sees it under the pool's lock."""

    pool: NodePool
    shares: dict[int | None, TeamShare]
    resolve: Callable[[str], tuple[int, str] | None]

    def share_of(self, namespace: str) -> TeamShare:
        team = self.resolve(namespace)
        team_id = team[0] if team else None
        if team_id not in self.shares:
            self.shares[team_id] = TeamShare(team_id, team[1] if team else NO_TEAM, None)
        return self.shares[team_id]

    @property
    def borrowers(self) -> set[ModelKey]:
        """Models of teams using more than their guarantee: the first to stop for a reclaim."""
        found: set[ModelKey] = set()
        for share in self.shares.values():
            borrowed_now = share.borrowed
            if borrowed_now.bytes or borrowed_now.gpus:
                found.update(share.models)
        return found

    def reclaimable(
        self, holders: dict[ModelKey, Holding], admitted: dict[ModelKey, datetime], claimant: TeamShare | None = None
    ) -> list[tuple[Holding, TeamShare]]:
        """The running models that run on borrowed capacity, each with its team, newest admitted
        first (``admitted``: when admission reserved for it; a model with no reservation counts as
        the oldest): what a team reclaiming its guarantee may preempt, as Kueue's
        ``reclaimWithinCohort`` takes the newest workloads of queues borrowing in the cohort.

        Per team, newest first, a model is taken while the team uses more than its guarantee in
        some dimension (memory, GPUs) and only when stopping it leaves the team at or above its
        guarantee in every dimension it exceeds: a team's guaranteed models are never taken, and a
        preempted model, were it started again, would borrow again (so it cannot preempt back).
        ``claimant``'s own models are never in the list."""
        found: list[tuple[Holding, TeamShare]] = []
        for share in self.shares.values():
            if share is claimant:
                continue
            left, guaranteed = Use(share.used.bytes, share.used.gpus), share.guaranteed
            mine = sorted((holders[key] for key in share.models if key in holders),
                          key=lambda h: (admitted.get(h.key, _OLDEST), h.label), reverse=True)  # fmt: skip
            for holder in mine:
                over_bytes, over_gpus = left.bytes > guaranteed.bytes, left.gpus > guaranteed.gpus
                if not (over_bytes or over_gpus):
                    break
                frees = (over_bytes and holder.memory_bytes > 0) or (over_gpus and holder.gpu_count > 0)
                keeps = (not over_bytes or left.bytes - holder.memory_bytes >= guaranteed.bytes) and (
                    not over_gpus or left.gpus - holder.gpu_count >= guaranteed.gpus
                )
                if frees and keeps:
                    found.append((holder, share))
                    left.add(-holder.memory_bytes, -holder.gpu_count)
        found.sort(key=lambda pair: (admitted.get(pair[0].key, _OLDEST), pair[0].label), reverse=True)
        return found

    def borrowing_words(self, share: TeamShare) -> str:
        """What ``share`` borrows in the pool, in words, naming its quota (the Borrowing condition)."""
        over = share.borrowed
        quota = f" ({_describe(share.quota)})" if share.quota else " (no quota there: it only borrows)"
        return (
            f"team {share.team} uses {format_bytes(share.used.bytes)} and {share.used.gpus} GPUs in pool "
            f"{self.pool.name}, {format_bytes(over.bytes)} and {over.gpus} GPUs beyond its guarantee{quota}"
        )

    def within_guarantee(self, demands: Iterable[Identified], asks: Callable[[Identified], Use]) -> TeamShare | None:
        """The demands' team when all of them fit its unused guarantee (their team's, one team), else None."""
        shares = {id(self.share_of(d.namespace)): self.share_of(d.namespace) for d in demands}
        if len(shares) != 1:
            return None
        (share,) = shares.values()
        if share.quota is None:
            return None
        wanted = Use()
        for demand in demands:
            wanted.add(asks(demand).bytes, asks(demand).gpus)
        guaranteed = share.guaranteed
        fits = share.used.bytes + wanted.bytes <= guaranteed.bytes and share.used.gpus + wanted.gpus <= guaranteed.gpus
        return share if fits else None

    def refusal(self, demands: list[Identified], asks: Callable[[Identified], Use], now: datetime) -> str | None:
        """Why the demands may not borrow what they would, naming the quota; None when they may."""
        by_team: dict[int, tuple[TeamShare, Use, list[str]]] = {}
        for demand in demands:
            share = self.share_of(demand.namespace)
            _, wanted, names = by_team.setdefault(id(share), (share, Use(), []))
            wanted.add(asks(demand).bytes, asks(demand).gpus)
            names.append(demand.label)
        for share, wanted, names in by_team.values():
            after = Use(share.used.bytes + wanted.bytes, share.used.gpus + wanted.gpus)
            before, beyond = share.borrowed, borrowed(after, share.guaranteed)
            if beyond.bytes <= before.bytes and beyond.gpus <= before.gpus:
                continue  # within the guarantee: nothing new is borrowed
            who = ", ".join(names)
            quota = share.quota
            if quota is not None:
                over_bytes = quota.borrowing_limit_bytes is not None and beyond.bytes > quota.borrowing_limit_bytes
                over_gpus = quota.borrowing_limit_gpus is not None and beyond.gpus > quota.borrowing_limit_gpus
                if over_bytes or over_gpus:
                    return (
                        f"{who} would borrow {format_bytes(beyond.bytes)} and {beyond.gpus} GPUs in pool "
                        f"{self.pool.name} beyond team {share.team}'s guarantee, over its borrowing limit "
                        f"({_describe(quota)}; team {share.team} uses {format_bytes(share.used.bytes)} and "
                        f"{share.used.gpus} GPUs there)"
                    )
            claim = next(
                (other.quota for other in self.shares.values()
                 if other is not share and other.quota is not None and reclaiming(other.quota, now)),
                None,
            )  # fmt: skip
            if claim is not None:
                return (
                    f"{who} would borrow beyond team {share.team}'s guarantee in pool {self.pool.name}, but team "
                    f"{claim.team.name} is reclaiming its guaranteed share: no new borrowing there until it is "
                    f"admitted ({_describe(claim)})"
                )
        return None

    def breaks(self, additions: list[Identified], asks: Callable[[Identified], Use]) -> list[str]:
        """Which quotas running ``additions`` beside what is counted now would break: a team past
        its borrowing limit, or a team's unused guarantee no longer free in the pool. Each named."""
        before = {key: (share.borrowed, self._short(share)) for key, share in self.shares.items()}
        names: dict[int | None, list[str]] = defaultdict(list)
        for item in additions:
            share = self.share_of(item.namespace)
            share.used.add(asks(item).bytes, asks(item).gpus)
            names[share.team_id].append(item.label)
        found = []
        for key, share in sorted(self.shares.items(), key=lambda item: item[0] not in names):  # the movers first
            borrowed_before, short_before = before.get(key, (Use(), Use()))
            now_borrowed, quota = share.borrowed, share.quota
            over = _past_limit(quota, now_borrowed, borrowed_before) if key in names and quota else []
            if over:
                found.append(
                    f"{', '.join(names[key])} would take team {share.team} past its borrowing limit in pool "
                    f"{self.pool.name}: borrowing {' and '.join(over)} ({_describe(quota)})"
                )
            short = self._short(share)
            worse = short.bytes > short_before.bytes or short.gpus > short_before.gpus
            if quota is not None and key not in names and worse:
                others = ", ".join(label for labels in names.values() for label in labels)
                found.append(
                    f"{others} would leave team {share.team}'s unused guarantee short by {format_bytes(short.bytes)} "
                    f"and {short.gpus} GPUs in pool {self.pool.name} ({_describe(quota)})"
                )
        return found

    def _short(self, share: TeamShare) -> Use:
        """How much of ``share``'s unused guarantee the pool could not give it now."""
        used = Use()
        for other in self.shares.values():
            used.add(other.used.bytes, other.used.gpus)
        unused = Use(max(0, share.guaranteed.bytes - share.used.bytes), max(0, share.guaranteed.gpus - share.used.gpus))
        free = Use(self.pool.effective_budget_bytes - used.bytes, self.pool.gpu_count - used.gpus)
        return Use(max(0, unused.bytes - max(0, free.bytes)), max(0, unused.gpus - max(0, free.gpus)))


def _past_limit(quota: TeamQuota, now: Use, before: Use) -> list[str]:
    """What a team borrows past its limits that it did not before, as words (memory, then GPUs)."""
    over = []
    if quota.borrowing_limit_bytes is not None and now.bytes > max(quota.borrowing_limit_bytes, before.bytes):
        over.append(f"{format_bytes(now.bytes)} of {format_bytes(quota.borrowing_limit_bytes)}")
    if quota.borrowing_limit_gpus is not None and now.gpus > max(quota.borrowing_limit_gpus, before.gpus):
        over.append(f"{now.gpus} of {quota.borrowing_limit_gpus} GPUs")
    return over


def quota_state(
    pool: NodePool,
    running: list[Holding],
    reserved_bytes: dict[ModelKey, int],
    reserved_gpus: dict[ModelKey, int],
    skip: set[ModelKey],
) -> QuotaState | None:
    """Each team's use of ``pool`` (running models, then reservations of models not running yet),
    leaving out the models in ``skip`` (the ones being decided); None when the pool has no quotas."""
    quotas = list(TeamQuota.objects.filter(pool=pool).select_related("team", "pool"))
    if not quotas:
        return None
    resolve = team_resolver(pool.cluster_id)
    state = QuotaState(pool, {quota.team_id: TeamShare(quota.team_id, quota.team.name, quota) for quota in quotas},
                       resolve)  # fmt: skip
    counted: set[ModelKey] = set()
    for holder in running:
        if holder.key in skip:
            continue
        share = state.share_of(holder.namespace)
        share.used.add(holder.memory_bytes, holder.gpu_count)
        share.models.append(holder.key)
        counted.add(holder.key)
    declared = {holder.key: holder.memory_bytes for holder in running}
    for key in (set(reserved_bytes) | set(reserved_gpus)) - skip:
        beyond = max(0, reserved_bytes.get(key, 0) - declared.get(key, 0))
        gpus = 0 if key in counted else reserved_gpus.get(key, 0)
        state.share_of(key[2]).used.add(beyond, gpus)
    return state


def mark_reclaiming(share: TeamShare, now: datetime) -> str:
    """Record that the team wants its guaranteed share back; the words a refusal adds about it."""
    quota = share.quota
    assert quota is not None
    TeamQuota.objects.filter(pk=quota.pk).update(reclaiming_since=now)
    return (
        f"; within team {share.team}'s guaranteed share: no new borrowing in pool {quota.pool.name} until it is "
        f"admitted ({_describe(quota)})"
    )


def clear_reclaiming(share: TeamShare) -> None:
    if share.quota is not None and share.quota.reclaiming_since is not None:
        TeamQuota.objects.filter(pk=share.quota.pk).update(reclaiming_since=None)


@dataclass(frozen=True)
class QuotaRow:
    """One team's line of the planning page's quota table (and chart)."""

    cluster: str
    pool: str
    team: str
    guaranteed: Use
    used: Use
    borrowed: Use
    quota: TeamQuota | None


def quota_rows(cluster_ids: set[int] | None, team_ids: set[int] | None) -> list[QuotaRow]:
    """Each team's guaranteed, used and borrowed memory and GPUs in every pool with quotas of the
    clusters (None: all); ``team_ids`` keeps the rows of those teams only (None: staff, every team)."""
    pools = NodePool.objects.filter(quotas__isnull=False).select_related("cluster").distinct()
    if cluster_ids is not None:
        pools = pools.filter(cluster_id__in=cluster_ids)
    by_cluster: dict[int, list[NodePool]] = defaultdict(list)
    for pool in pools.order_by("cluster__name", "name"):
        by_cluster[pool.cluster_id].append(pool)
    rows = []
    for cluster_id, cluster_pools in by_cluster.items():
        running = load_holdings(cluster_id, pools=[pool.name for pool in cluster_pools], running_only=True)
        for pool in cluster_pools:
            reserved_bytes, reserved_gpus = pool.reserved()
            in_pool = [holder for holder in running if holder.pool == pool.name]
            state = quota_state(pool, in_pool, reserved_bytes, reserved_gpus, set())
            shares = sorted(state.shares.values(), key=lambda share: share.team) if state else []
            rows.extend(
                QuotaRow(
                    pool.cluster.name, pool.name, share.team, share.guaranteed, share.used, share.borrowed, share.quota
                )
                for share in shares
                if team_ids is None or share.team_id in team_ids
            )
    return rows


def asks(item: Any) -> Use:
    """What a demand or a proposal asks of its pool (both carry ``memory_bytes`` and ``gpus``)."""
    return Use(item.memory_bytes or 0, item.gpus or 0)


def what_if(cluster_id: int, proposals: list[Any], running: list[Holding]) -> list[str]:
    """The quotas the proposals would break beside the ``running`` models (the plan's baseline),
    pool by pool: the planning page's and API's answer to "which quota does this change break"."""
    names = {proposal.pool for proposal in proposals}
    pools = NodePool.objects.filter(cluster_id=cluster_id, name__in=names, quotas__isnull=False).distinct()
    found = []
    for pool in pools.order_by("name"):
        state = quota_state(pool, [h for h in running if h.pool == pool.name], {}, {}, set())
        if state is not None:
            found.extend(state.breaks([p for p in proposals if p.pool == pool.name], asks))
    return found
