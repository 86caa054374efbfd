"""Read node pool capacity out of Kubernetes Node objects (plain dicts, as the gateway returns them).

Pure functions, no database: the refresh writes what these return.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from clusters.validation.quantities import quantity_to_int
from scheduler.consumption import ACCELERATOR_BY_GPU_RESOURCE, GPU_RESOURCE_BY_ACCELERATOR, cpu_millis_of

# Extended resources that count as one accelerator each (device plugins of NVIDIA, AMD, Intel
# Gaudi and Google TPU: the same list ModelService's accelerator types map to).
GPU_RESOURCES = tuple(GPU_RESOURCE_BY_ACCELERATOR.values())

# Product and per-GPU memory labels, per device resource, as each vendor's feature discovery sets
# them: NVIDIA GPU feature discovery (``gpu.memory`` in MiB), AMD's node labeller (``gpu.vram``,
# a quantity such as ``192G``), GKE's TPU label (no memory label). Gaudi's plugin labels
# neither. The portal's own labels fill any gap, for nodes without feature discovery.
PRODUCT_LABELS = {
    "nvidia.com/gpu": ("nvidia.com/gpu.product",),
    "amd.com/gpu": ("amd.com/gpu.product-name",),
    "google.com/tpu": ("cloud.google.com/gke-tpu-accelerator",),
}
MEMORY_MIB_LABELS = {"nvidia.com/gpu": "nvidia.com/gpu.memory"}
MEMORY_QUANTITY_LABELS = {"amd.com/gpu": "amd.com/gpu.vram"}
GPU_PRODUCT_LABEL = "inference.eh-ops.io/gpu-product"
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
    cpu_millis: int = 0
    gpu_product: str = ""
    accelerator: str = ""


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

    @property
    def gpu_product(self) -> str:
        """The GPU products of the pool's nodes, comma-separated (most pools have one)."""
        return ", ".join(sorted({node.gpu_product for node in self.schedulable if node.gpu_product}))

    @property
    def accelerator(self) -> str:
        return ", ".join(sorted({node.accelerator for node in self.schedulable if node.accelerator}))


def gpu_resource_of(allocatable: dict[str, Any]) -> str:
    """The device resource the node offers (the first with a count), "" for a node without GPUs."""
    return next((r for r in GPU_RESOURCES if (quantity_to_int(allocatable.get(r)) or 0) > 0), "")


def gpu_memory_of(labels: dict[str, str], resource: str = "nvidia.com/gpu") -> int:
    """Per-GPU memory from node labels, 0 when no label says it."""
    mib = labels.get(MEMORY_MIB_LABELS.get(resource, ""), "")
    if mib.isdigit():
        return int(mib) * 1024**2
    vram = labels.get(MEMORY_QUANTITY_LABELS.get(resource, ""))
    if vram:
        # AMD writes "192G" meaning GiB of VRAM; a Kubernetes quantity would read it as 10^9.
        return quantity_to_int(vram.removesuffix("G") + "Gi" if vram.endswith("G") else vram) or 0
    return quantity_to_int(labels.get(GPU_MEMORY_LABEL)) or 0


def gpu_product_of(labels: dict[str, str], resource: str) -> str:
    for label in PRODUCT_LABELS.get(resource, ()):
        if labels.get(label):
            return labels[label]
    return labels.get(GPU_PRODUCT_LABEL, "")


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
    resource = gpu_resource_of(allocatable)
    cpu = allocatable.get("cpu")
    return NodeCapacity(
        name=metadata.get("name", ""),
        pool=pool,
        allocatable_bytes=memory,
        capacity_bytes=quantity_to_int(capacity.get("memory")) or memory,
        gpu_count=sum(quantity_to_int(allocatable.get(resource)) or 0 for resource in GPU_RESOURCES),
        gpu_memory_bytes=gpu_memory_of(labels, resource or "nvidia.com/gpu"),
        schedulable=not (node.get("spec") or {}).get("unschedulable", False),
        cpu_millis=cpu_millis_of(cpu),
        gpu_product=gpu_product_of(labels, resource) if resource else "",
        accelerator=ACCELERATOR_BY_GPU_RESOURCE.get(resource, ""),
    )


def pools_from_nodes(nodes: list[dict[str, Any]], pool_label: str | None = None) -> dict[str, PoolCapacity]:
    """Group Nodes by the pool label; nodes without it are left out."""
    pools: dict[str, PoolCapacity] = {}
    for node in nodes:
        capacity = node_capacity(node, pool_label)
        if capacity is not None:
            pools.setdefault(capacity.pool, PoolCapacity(capacity.pool)).nodes.append(capacity)
    return pools
