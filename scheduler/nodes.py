"""Read node pool capacity out of Kubernetes Node objects (plain dicts, as the gateway returns them).

Pure functions, no database: the refresh writes what these return.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from clusters.quantities import quantity_to_int

# Extended resources that count as one accelerator each (device plugins of NVIDIA, AMD, Intel
# Gaudi and Google TPU: the same list ModelService's accelerator types map to).
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "google.com/tpu")

# Per-GPU memory labels. NVIDIA GPU feature discovery sets ``nvidia.com/gpu.memory`` in MiB;
# the portal's own label takes any quantity, for nodes without feature discovery.
GPU_MEMORY_MIB_LABEL = "nvidia.com/gpu.memory"
GPU_MEMORY_LABEL = "inference.eh-ops.io/gpu-memory"


@dataclass(frozen=True)
class NodeCapacity:
    """What one Node offers to models."""

    name: str
    pool: str
    allocatable_bytes: int
    capacity_bytes: int
    gpu_count: int
    gpu_memory_bytes: int
    schedulable: bool


@dataclass
class PoolCapacity:
    """A pool's totals over its schedulable nodes; cordoned nodes are listed but add nothing."""

    name: str
    nodes: list[NodeCapacity] = field(default_factory=list)

    @property
    def schedulable(self) -> list[NodeCapacity]:
        return [node for node in self.nodes if node.schedulable]

    @property
    def allocatable_bytes(self) -> int:
        return sum(node.allocatable_bytes for node in self.schedulable)

    @property
    def largest_node_bytes(self) -> int:
        return max((node.allocatable_bytes for node in self.schedulable), default=0)

    @property
    def gpu_count(self) -> int:
        return sum(node.gpu_count for node in self.schedulable)

    @property
    def gpu_memory_bytes(self) -> int:
        """The smallest known per-GPU memory: a model sized for it fits on any GPU of the pool."""
        known = [node.gpu_memory_bytes for node in self.schedulable if node.gpu_memory_bytes]
        return min(known, default=0)


def gpu_memory_of(labels: dict[str, str]) -> int:
    """Per-GPU memory from node labels, 0 when no label says it."""
    mib = labels.get(GPU_MEMORY_MIB_LABEL, "")
    if mib.isdigit():
        return int(mib) * 1024**2
    return quantity_to_int(labels.get(GPU_MEMORY_LABEL)) or 0


def node_capacity(node: dict[str, Any], pool_label: str | None = None) -> NodeCapacity | None:
    """The capacity of one Node, or None when it carries no pool label (not an inference node)."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    pool = labels.get(pool_label or settings.NODE_POOL_LABEL)
    if not pool:
        return None
    status = node.get("status") or {}
    allocatable, capacity = status.get("allocatable") or {}, status.get("capacity") or {}
    memory = quantity_to_int(allocatable.get("memory")) or 0
    return NodeCapacity(
        name=metadata.get("name", ""),
        pool=pool,
        allocatable_bytes=memory,
        capacity_bytes=quantity_to_int(capacity.get("memory")) or memory,
        gpu_count=sum(quantity_to_int(allocatable.get(resource)) or 0 for resource in GPU_RESOURCES),
        gpu_memory_bytes=gpu_memory_of(labels),
        schedulable=not (node.get("spec") or {}).get("unschedulable", False),
    )


def pools_from_nodes(nodes: list[dict[str, Any]], pool_label: str | None = None) -> dict[str, PoolCapacity]:
    """Group Nodes by the pool label; nodes without it are left out."""
    pools: dict[str, PoolCapacity] = {}
    for node in nodes:
        capacity = node_capacity(node, pool_label)
        if capacity is not None:
            pools.setdefault(capacity.pool, PoolCapacity(capacity.pool)).nodes.append(capacity)
    return pools
