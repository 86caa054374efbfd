"""Write node pools and nodes read from a cluster's Nodes into the database."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from clusters.kube.client import ClusterGateway
from clusters.models import Cluster
from scheduler.models import Node, NodePool
from scheduler.nodes import PoolCapacity, pools_from_nodes


@dataclass
class RefreshReport:
    cluster: str
    pools: int
    nodes: int
    emptied: list[str]

    def __str__(self) -> str:
        text = f"{self.cluster}: {self.pools} pools, {self.nodes} nodes"
        return text + (f"; no nodes left in {', '.join(self.emptied)}" if self.emptied else "")


def refresh_node_pools(cluster: Cluster, gateway: ClusterGateway | None = None) -> RefreshReport:
    """Read the cluster's Nodes and make its pools match them.

    Staff-owned values survive: ``budget_bytes`` is never touched, and a pool's per-GPU memory
    set by staff is kept when no node label says it. A pool read from Nodes earlier whose nodes
    are all gone keeps its row (and budget) with zero capacity, so nothing is admitted into it;
    pools staff created by hand are left alone.
    """
    own_gateway = gateway is None
    gateway = gateway or ClusterGateway(cluster)
    try:
        pools = pools_from_nodes(gateway.list_nodes())
    finally:
        if own_gateway:
            gateway.close()
    return store_pools(cluster, pools)


@transaction.atomic
def store_pools(cluster: Cluster, pools: dict[str, PoolCapacity]) -> RefreshReport:
    now = timezone.now()
    node_total = 0
    for name, capacity in pools.items():
        pool, _ = NodePool.objects.get_or_create(cluster=cluster, name=name)
        pool.source = NodePool.Source.NODES
        pool.node_count = len(capacity.schedulable)
        pool.allocatable_bytes = capacity.allocatable_bytes
        pool.largest_node_bytes = capacity.largest_node_bytes
        pool.gpu_count = capacity.gpu_count
        pool.gpu_memory_bytes = capacity.gpu_memory_bytes or pool.gpu_memory_bytes
        pool.gpu_product = capacity.gpu_product or pool.gpu_product
        pool.accelerator = capacity.accelerator or pool.accelerator
        pool.refreshed_at = now
        pool.save()
        pool.nodes.exclude(name__in=[node.name for node in capacity.nodes]).delete()
        for node in capacity.nodes:
            Node.objects.update_or_create(
                pool=pool,
                name=node.name,
                defaults={
                    "allocatable_bytes": node.allocatable_bytes,
                    "capacity_bytes": node.capacity_bytes,
                    "gpu_count": node.gpu_count,
                    "gpu_memory_bytes": node.gpu_memory_bytes,
                    "gpu_product": node.gpu_product,
                    "accelerator": node.accelerator,
                    "cpu_millis": node.cpu_millis,
                    "schedulable": node.schedulable,
                },
            )
        node_total += len(capacity.nodes)
    gone = NodePool.objects.filter(cluster=cluster, source=NodePool.Source.NODES).exclude(name__in=list(pools))
    emptied = sorted(gone.filter(node_count__gt=0).values_list("name", flat=True))
    Node.objects.filter(pool__in=gone).delete()
    gone.update(node_count=0, allocatable_bytes=0, largest_node_bytes=0, gpu_count=0, refreshed_at=now)
    return RefreshReport(cluster.name, len(pools), node_total, emptied)
