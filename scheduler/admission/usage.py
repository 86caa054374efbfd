"""Pool usage totals: budget, allocated, reserved and observed per node pool.

``scheduler.admission.accounting.pool_accounts`` builds the full books (holders, savings, per-team figures).
A page that only shows totals (the dashboard) needs none of that: the totals PostgreSQL keeps as
rows change (:mod:`scheduler.pool_totals`) answer in one small query, whatever the row count,
with the planner's own rules (a test checks both agree):
- rows deleted in the cluster hold nothing;
- a model runs by :func:`scheduler.holdings.running_condition` (the replicas its cluster reports,
  else the desired ones where the portal is not its controller);
- allocated is the declared memory of running models (none declared: none counted), GPUs used
  their GPUs (counted whether or not they declare memory), observed their observed peaks;
- a reservation counts for what it adds beyond the same model's declared memory when running in
  the pool.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Q, QuerySet

from clusters.models import Cluster, KubeObject
from scheduler.admission.accounting import PoolAccount
from scheduler.holdings import controlled_pairs, holding_rows, running_condition, serving_models
from scheduler.models import MemoryReservation, NodePool
from scheduler.pool_totals import pool_totals

PoolKey = tuple[int, str]
USAGE_CLUSTER_COLUMNS = ("id", "name", "managed_kinds")  # what the totals need of a cluster


def running_rows(model: type[KubeObject], controlled_clusters: set[int]) -> QuerySet:
    """Rows of ``model`` that hold memory because they run: the planner's own rule
    (:func:`scheduler.holdings.running_condition`), so both always agree."""
    return holding_rows(model, None, None, None).order_by().filter(running_condition(controlled_clusters))


def gpus_held(cluster_ids: set[int] | None = None) -> dict[PoolKey, int]:
    """GPUs running models hold per (cluster id, pool): the pools' totals (:func:`pool_usage`),
    so the calculator counts exactly what the dashboard and the planner count."""
    return {(account.cluster_id, account.pool): account.gpus_used for account in pool_usage(cluster_ids)}


def pool_usage(cluster_ids: set[int] | None = None) -> list[PoolAccount]:
    """Totals of every pool of the ``cluster_ids`` (None: all), sorted by cluster name and pool:
    memory allocated, reserved and observed, and GPUs used.

    Read from the kept totals (:mod:`scheduler.pool_totals`: a few rows per pool, whatever the
    number of models), the running rule applied per cluster and kind. The accounts carry no
    holders and no right-sizing savings: only what totals answer.
    """
    clusters = Cluster.objects.order_by()
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=cluster_ids)
    return pool_usage_of(clusters.only(*USAGE_CLUSTER_COLUMNS))


def pool_usage_of(clusters: Iterable[Cluster]) -> list[PoolAccount]:
    """:func:`pool_usage` of these clusters, read already with (at least) ``USAGE_CLUSTER_COLUMNS``:
    a page that lists the clusters too (the dashboard) reads them once for both."""
    cluster_rows = list(clusters)
    names = {cluster.pk: cluster.name for cluster in cluster_rows}
    controlled = controlled_pairs((cluster.pk, cluster.managed_kinds) for cluster in cluster_rows)
    accounts: dict[PoolKey, PoolAccount] = {
        (pool.cluster_id, pool.name): PoolAccount(pool.cluster_id, names[pool.cluster_id], pool.name,
                                                  pool.effective_budget_bytes, without_nodes=pool.without_nodes)
        for pool in NodePool.objects.order_by().filter(cluster_id__in=names)
    }  # fmt: skip
    for total in pool_totals(names):
        if not total.runs((total.cluster_id, total.kind) in controlled):
            continue
        key = (total.cluster_id, total.node_pool)
        if key not in accounts:
            accounts[key] = PoolAccount(key[0], names[key[0]], key[1], None, without_nodes=True)
        accounts[key].allocated_bytes += total.memory_bytes
        accounts[key].gpus_used += total.gpus
        accounts[key].observed_bytes += total.observed_peak_bytes
    reservations: dict[str, list[MemoryReservation]] = defaultdict(list)
    for reservation in MemoryReservation.objects.order_by().filter(pool__cluster_id__in=names).select_related("pool"):
        reservations[reservation.kind].append(reservation)
    for model in serving_models():
        if reservations.get(model.kube.kind):
            kind_controlled = {pk for pk, kind in controlled if kind == model.kube.kind}
            rows = running_rows(model, kind_controlled).filter(cluster_id__in=names)
            _add_reservations(accounts, rows, reservations[model.kube.kind])
    return sorted(accounts.values(), key=lambda entry: (entry.cluster_name, entry.pool))


def _add_reservations(
    accounts: dict[PoolKey, PoolAccount], running: QuerySet, reservations: list[MemoryReservation]
) -> None:
    """Each reservation beyond its model's declared memory when that model runs in the same pool."""
    same_model = Q()
    for reservation in reservations:
        same_model |= Q(
            cluster_id=reservation.pool.cluster_id,
            node_pool=reservation.pool.name,
            namespace=reservation.namespace,
            name=reservation.name,
        )
    declared = {
        (row["cluster_id"], row["node_pool"], row["namespace"], row["name"]): row["memory_bytes"]
        for row in running.filter(same_model).values("cluster_id", "node_pool", "namespace", "name", "memory_bytes")
    }
    for reservation in reservations:
        pool = reservation.pool
        held = declared.get((pool.cluster_id, pool.name, reservation.namespace, reservation.name), 0)
        account = accounts[(pool.cluster_id, pool.name)]
        account.reserved_bytes += max(0, reservation.memory_bytes - held)
