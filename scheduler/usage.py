"""Pool usage totals straight from SQL: budget, allocated, reserved and observed per node pool.

``scheduler.accounting.pool_accounts`` builds the full books (every holder, right-sizing savings)
from ``load_holdings``, which decodes the spec, status and annotations of every serving model:
seconds at 100,000 models. A page that only shows totals (the dashboard) needs none of that:
the same rules as SQL aggregates answer in one query per serving kind, whatever the row count.

The rules are ``load_holdings``'s and ``account``'s, expressed in SQL (a test checks both agree):
- rows deleted in the cluster and rows without declared memory hold nothing;
- a model runs when ``status.replicas`` is an integer above zero; when it is not an integer its
  desired ``replicas`` decide, and so they do when it is missing, except where the portal controls
  the kind in that cluster (the model does not run until it reports replicas);
- allocated is the declared memory of running models, observed their observed peaks;
- a reservation counts for what it adds beyond the same model's declared memory when running in
  the pool.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Func, IntegerField, Q, QuerySet, Sum, Value

from clusters.models import Cluster, KubeObject, SyncState
from scheduler.accounting import PoolAccount
from scheduler.holdings import serving_models
from scheduler.models import MemoryReservation, NodePool

PoolKey = tuple[int, str]


class JSONInteger(Func):
    """``column[key]`` when it is a JSON integer (as ``isinstance(value, int)`` reads it), else NULL.

    Booleans, floats (``2.0``), strings and missing keys are NULL, as ``running_replicas`` ignores them.
    """

    output_field = IntegerField()

    def __init__(self, column: str, key: str) -> None:
        super().__init__(column, Value(key))

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        column, column_params = compiler.compile(self.source_expressions[0])
        key = self.source_expressions[1].value
        sql = (
            f"CASE WHEN jsonb_typeof({column} -> %s) = 'number' AND ({column} ->> %s) ~ '^-?[0-9]+$' "
            f"THEN ({column} ->> %s)::numeric END"
        )
        return sql, [*column_params, key, *column_params, key, *column_params, key]

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        column, column_params = compiler.compile(self.source_expressions[0])
        path = f"$.{self.source_expressions[1].value}"
        sql = f"CASE WHEN json_type({column}, %s) = 'integer' THEN json_extract({column}, %s) END"
        return sql, [*column_params, path, *column_params, path]


def running_rows(model: type[KubeObject], controlled_clusters: list[int]) -> QuerySet:
    """Rows of ``model`` that hold memory because they run (see the module docstring)."""
    desired_counts = ~Q(cluster_id__in=controlled_clusters) | Q(status__has_key="replicas")
    runs = Q(reported_replicas__gt=0) | (Q(reported_replicas__isnull=True) & Q(replicas__gt=0) & desired_counts)
    return (
        model.objects.order_by()
        .exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
        .filter(memory_bytes__isnull=False)
        .alias(reported_replicas=JSONInteger("status", "replicas"))
        .filter(runs)
    )


def _has_field(model: type[KubeObject], name: str) -> bool:
    return any(field.name == name for field in model._meta.get_fields())


def pool_usage(cluster_ids: set[int] | None = None) -> list[PoolAccount]:
    """Totals of every pool of the ``cluster_ids`` (None: all), sorted by cluster name and pool.

    The accounts carry no holders and no right-sizing savings: only what SQL totals answer.
    """
    clusters = Cluster.objects.order_by()
    if cluster_ids is not None:
        clusters = clusters.filter(pk__in=cluster_ids)
    cluster_rows = list(clusters.only("id", "name", "managed_kinds"))
    names = {cluster.pk: cluster.name for cluster in cluster_rows}
    accounts: dict[PoolKey, PoolAccount] = {
        (pool.cluster_id, pool.name): PoolAccount(
            pool.cluster_id, names[pool.cluster_id], pool.name, pool.effective_budget_bytes
        )
        for pool in NodePool.objects.order_by().filter(cluster_id__in=names)
    }
    reservations: dict[str, list[MemoryReservation]] = defaultdict(list)
    for reservation in MemoryReservation.objects.order_by().filter(pool__cluster_id__in=names).select_related("pool"):
        reservations[reservation.kind].append(reservation)
    for model in serving_models():
        controlled = [cluster.pk for cluster in cluster_rows if cluster.manages(model.kube.kind)]
        rows = running_rows(model, controlled).filter(cluster_id__in=names)
        observed = Sum("observed_peak_bytes") if _has_field(model, "observed_peak_bytes") else Value(0)
        totals = rows.values("cluster_id", "node_pool").annotate(allocated=Sum("memory_bytes"), observed=observed)
        for total in totals:
            key = (total["cluster_id"], total["node_pool"])
            if key not in accounts:
                accounts[key] = PoolAccount(key[0], names[key[0]], key[1], None)
            accounts[key].allocated_bytes += total["allocated"] or 0
            accounts[key].observed_bytes += total["observed"] or 0
        _add_reservations(accounts, rows, reservations.get(model.kube.kind, []))
    return sorted(accounts.values(), key=lambda entry: (entry.cluster_name, entry.pool))


def _add_reservations(
    accounts: dict[PoolKey, PoolAccount], running: QuerySet, reservations: list[MemoryReservation]
) -> None:
    """Each reservation beyond its model's declared memory when that model runs in the same pool."""
    if not reservations:
        return
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
