"""Where a calculator result fits: how many GPUs of each common type, and which pools hold it now.

GPU memories are what GPU feature discovery reports in ``nvidia.com/gpu.memory`` (MiB) for the
NVIDIA parts, and the vendors' published HBM size for AMD and Gaudi, so a pool labelled by GFD and
a row of this table agree. Pools are read through :func:`pool_gpu_capacity` only, the one place
that knows where the pools keep their GPU figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Max, Q

from scheduler.admission.usage import gpus_held
from scheduler.calculator.memory import Estimate, GPUSplit, gpus_needed, usable_bytes
from scheduler.models import NodePool

MI = 1024**2


@dataclass(frozen=True)
class GPUType:
    name: str
    memory_bytes: int
    accelerator: str  # ModelService spec.accelerator.type
    kubeai_profile: str  # KubeAI's default resourceProfiles name


GPU_TYPES = (
    GPUType("NVIDIA L4 24GB", 23034 * MI, "nvidia", "nvidia-gpu-l4"),
    GPUType("NVIDIA A10G 24GB", 23028 * MI, "nvidia", "nvidia-gpu-a10g"),
    GPUType("NVIDIA L40S 48GB", 46068 * MI, "nvidia", "nvidia-gpu-l40s"),
    GPUType("NVIDIA A100 40GB", 40960 * MI, "nvidia", "nvidia-gpu-a100-40gb"),
    GPUType("NVIDIA A100 80GB", 81920 * MI, "nvidia", "nvidia-gpu-a100-80gb"),
    GPUType("NVIDIA H100 80GB", 81559 * MI, "nvidia", "nvidia-gpu-h100"),
    GPUType("NVIDIA H200 141GB", 143771 * MI, "nvidia", "nvidia-gpu-h200"),
    GPUType("AMD MI300X 192GB", 196608 * MI, "amd", "amd-gpu-mi300x"),
    GPUType("Intel Gaudi 2 96GB", 98304 * MI, "intel-gaudi", "intel-gaudi2"),
)


@dataclass(frozen=True)
class TypeFit:
    gpu: GPUType
    split: GPUSplit | None


@dataclass(frozen=True)
class PoolGPUs:
    """A pool's GPU figures as the calculator needs them."""

    cluster: str
    pool: str
    gpu_memory_bytes: int
    gpu_count: int
    gpus_per_node: int
    gpus_held: int
    nodes: int = 1  # its nodes with GPUs: as many pipeline stages as a split may take there

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpu_count - self.gpus_held)


@dataclass(frozen=True)
class PoolFit:
    pool: PoolGPUs
    split: GPUSplit | None

    @property
    def holds_now(self) -> bool:
        return self.split is not None and self.split.gpus <= self.pool.gpus_free


def fit_per_gpu_type(result: Estimate, attention_heads: int = 0) -> list[TypeFit]:
    usable = {gpu: usable_bytes(gpu.memory_bytes, result.gpu_utilization) for gpu in GPU_TYPES}
    return [TypeFit(gpu, gpus_needed(result, usable[gpu], attention_heads)) for gpu in GPU_TYPES]


def pool_gpu_capacity(cluster_ids: set[int] | None = None) -> list[PoolGPUs]:
    """Pools with GPUs of known memory, with the GPUs every serving kind already holds there.

    Held is what the planner and admission count (:func:`scheduler.admission.usage.gpus_held`): the GPUs of
    running models, whether or not they declare memory. A constant number of queries.
    """
    pools = NodePool.objects.filter(gpu_count__gt=0, gpu_memory_bytes__gt=0).select_related("cluster")
    if cluster_ids is not None:
        pools = pools.filter(cluster_id__in=cluster_ids)
    pools = pools.annotate(per_node=Max("nodes__gpu_count"),
                           gpu_nodes=Count("nodes", filter=Q(nodes__gpu_count__gt=0))).order_by("cluster__name", "name")
    held = gpus_held(cluster_ids)
    return [
        PoolGPUs(
            cluster=pool.cluster.name,
            pool=pool.name,
            gpu_memory_bytes=pool.gpu_memory_bytes,
            gpu_count=pool.gpu_count,
            gpus_per_node=pool.per_node or pool.gpu_count,
            gpus_held=held.get((pool.cluster_id, pool.name), 0),
            nodes=pool.gpu_nodes or 1,  # no node rows: its GPUs count as one node's (gpus_per_node above)
        )
        for pool in pools
    ]


def fit_in_pools(result: Estimate, pools: list[PoolGPUs], attention_heads: int = 0) -> list[PoolFit]:
    """Each pool's split of ``result`` (within its largest node, over no more nodes than it has) and
    whether its free GPUs take it now."""
    return [
        PoolFit(
            pool,
            gpus_needed(
                result,
                usable_bytes(pool.gpu_memory_bytes, result.gpu_utilization),
                attention_heads,
                max_per_node=pool.gpus_per_node,
                max_nodes=pool.nodes,
            ),
        )
        for pool in pools
    ]
