"""Per-pool budget accounting: budget, allocated, reserved, observed, free, right-sizing savings."""

from __future__ import annotations

from dataclasses import dataclass, field

from clusters.models import Cluster
from scheduler.holdings import Holding, ModelKey, load_holdings
from scheduler.models import MemoryReservation, NodePool
from scheduler.savings import Recommender, saving_bytes


@dataclass
class PoolAccount:
    """One pool's books. ``budget_bytes`` is None for a pool models name but no NodePool row has."""

    cluster_id: int
    cluster_name: str
    pool: str
    budget_bytes: int | None
    allocated_bytes: int = 0
    reserved_bytes: int = 0
    observed_bytes: int = 0
    rightsizing_savings_bytes: int = 0
    holders: list[Holding] = field(default_factory=list)
    stopped: list[Holding] = field(default_factory=list)

    @property
    def committed_bytes(self) -> int:
        """Allocated by running models plus reserved by admitted ones not yet running."""
        return self.allocated_bytes + self.reserved_bytes

    @property
    def free_bytes(self) -> int | None:
        return None if self.budget_bytes is None else self.budget_bytes - self.committed_bytes


def account(
    holders: list[Holding], reservations: dict[ModelKey, int], recommender: Recommender | None = None
) -> tuple[int, int, int, int]:
    """(allocated, reserved, observed, savings) of one pool from its running models and reservations.

    A reservation of a model that is already running counts only for what it adds beyond the
    running model's declared memory, so nothing is counted twice.
    """
    declared = {holder.key: holder.memory_bytes for holder in holders}
    allocated = sum(declared.values())
    reserved = sum(max(0, amount - declared.get(key, 0)) for key, amount in reservations.items())
    observed = sum(holder.observed_peak_bytes or 0 for holder in holders)
    savings = sum(saving_bytes(holder, recommender) for holder in holders)
    return allocated, reserved, observed, savings


def pool_accounts(cluster_id: int | None = None, recommender: Recommender | None = None) -> list[PoolAccount]:
    """Books of every pool (of one cluster, or all): NodePool rows, plus pools only models name.

    Allocated is the declared memory of models with replicas > 0 (InferenceModel: ``status.replicas``
    when the cluster reported it, else ``spec.maxReplicas``); observed is the sum of the observed
    peaks known for those models; holders are listed biggest first.
    """
    pools = NodePool.objects.select_related("cluster")
    if cluster_id is not None:
        pools = pools.filter(cluster_id=cluster_id)
    accounts: dict[tuple[int, str], PoolAccount] = {
        (pool.cluster_id, pool.name): PoolAccount(
            pool.cluster_id, pool.cluster.name, pool.name, pool.effective_budget_bytes
        )
        for pool in pools
    }
    reservations: dict[tuple[int, str], dict[ModelKey, int]] = {}
    rows = MemoryReservation.objects.select_related("pool")
    if cluster_id is not None:
        rows = rows.filter(pool__cluster_id=cluster_id)
    for row in rows:
        key = (row.kind, row.pool.cluster_id, row.namespace, row.name)
        reservations.setdefault((row.pool.cluster_id, row.pool.name), {})[key] = row.memory_bytes
    names = dict(Cluster.objects.values_list("id", "name"))
    for holding in load_holdings(cluster_id):
        pool_key = (holding.cluster_id, holding.pool)
        if pool_key not in accounts:
            accounts[pool_key] = PoolAccount(holding.cluster_id, names.get(holding.cluster_id, "?"), holding.pool, None)
        (accounts[pool_key].holders if holding.running else accounts[pool_key].stopped).append(holding)
    for pool_key, entry in accounts.items():
        entry.holders.sort(key=lambda h: (-h.memory_bytes, h.label))
        entry.allocated_bytes, entry.reserved_bytes, entry.observed_bytes, entry.rightsizing_savings_bytes = account(
            entry.holders, reservations.get(pool_key, {}), recommender
        )
    return sorted(accounts.values(), key=lambda a: (a.cluster_name, a.pool))
