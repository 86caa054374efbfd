"""What placement is given, read from the rows: each pool's budget and nodes, each model's pods.

:mod:`scheduler.planning.planner` places proposals beside the running models with these, and
:mod:`scheduler.planning.baseline` places the running models alone, ahead of any plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clusters.models import Cluster
from scheduler.consumption import PodShape
from scheduler.holdings import Holding
from scheduler.holdings_cache import ClusterHoldings
from scheduler.models import Node, NodePool
from scheduler.planning.placement import Item, NodeSpace, PoolSpace, biggest_first
from scheduler.planning.proposals import Proposal

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
    is one node the size of its budget, so only the budget limits it; a pool read from Nodes with
    none left (``NodePool.without_nodes``) has no node.
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
    if pool.without_nodes:
        return []  # nothing to place on: not a node the size of a budget staff set
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


def pod_items(label: str, pool: str, pods: Sequence[PodShape], running: bool, memory: int, gpus: int) -> list[Item]:
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


def fixed_items(running: Iterable[Holding]) -> list[Item]:
    """The pods of running models in the order a plan places them, ahead of any proposal: biggest first."""
    return biggest_first([item for holding in running for item in holding_items(holding)])


def running_pods(kept: ClusterHoldings) -> dict[str, list[Item]]:
    """Each pool's running pods at their declared sizes, biggest first (:func:`fixed_items`),
    worked out once per set of kept holdings (:meth:`ClusterHoldings.derive`)."""
    return kept.derive("running_pods", _running_pods)


def _running_pods(kept: ClusterHoldings) -> dict[str, list[Item]]:
    by_pool: dict[str, list[Item]] = {}
    for item in fixed_items(kept.running):
        by_pool.setdefault(item.pool, []).append(item)
    return by_pool


def proposal_items(proposal: Proposal) -> list[Item]:
    return pod_items(proposal.label, proposal.pool, proposal.pods, False, proposal.memory_bytes, proposal.gpus)
