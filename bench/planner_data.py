"""Rows for the planner benchmarks: a cluster of 50 GPU pools x 20 nodes and serving models in bulk.

Rows go in with ``bulk_create`` after each kind's own ``project()``, so they hold exactly the
columns a sync would store (pods, running replicas, last activity) at a fraction of the time.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from clusters.models import Cluster, SyncState
from models_app.models import InferenceModel
from scheduler.models import Node, NodePool

GI = 1024**3
POOLS, NODES = 50, 20
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NODE_MEMORY, NODE_GPUS, GPU_MEMORY, NODE_CPU = 640 * GI, 8, 80 * GI, 128_000
SIZES_GI = (2, 4, 8, 16, 24, 48, 80)


def make_cluster(name: str, pools: int = POOLS, nodes: int = NODES) -> Cluster:
    """A cluster whose pools ``pool-<i>`` have ``nodes`` nodes of 640Gi and 8 x 80Gi GPUs."""
    cluster = Cluster.objects.create(name=name, server_url=f"https://{name}:6443")
    rows = NodePool.objects.bulk_create(
        NodePool(cluster=cluster, name=f"pool-{p}", source=NodePool.Source.NODES, node_count=nodes,
                 allocatable_bytes=nodes * NODE_MEMORY, largest_node_bytes=NODE_MEMORY, gpu_count=nodes * NODE_GPUS,
                 gpu_memory_bytes=GPU_MEMORY, gpu_product="NVIDIA-A100-SXM4-80GB", accelerator="nvidia")
        for p in range(pools)
    )  # fmt: skip
    Node.objects.bulk_create(
        Node(pool=pool, name=f"{pool.name}-node-{n}", allocatable_bytes=NODE_MEMORY, capacity_bytes=NODE_MEMORY,
             gpu_count=NODE_GPUS, gpu_memory_bytes=GPU_MEMORY, cpu_millis=NODE_CPU, accelerator="nvidia",
             gpu_product="NVIDIA-A100-SXM4-80GB")
        for pool in rows
        for n in range(nodes)
    )  # fmt: skip
    return cluster


def add_models(cluster: Cluster, count: int, seed: int, start: int = 0, pools: int = POOLS, teams: int = 10) -> None:
    """``count`` InferenceModels spread over the pools and ``teams`` namespaces: 80 % running, a
    third of those idle for an hour, half with an observed peak, one GPU for the bigger ones.

    ``project()`` runs once per distinct shape and its columns are copied to the rows sharing it
    (setting up 100,000 rows then takes seconds, not minutes); names are set per row.
    """
    rng = random.Random(seed)
    projected: dict[tuple, dict] = {}
    rows = []
    for index in range(start, start + count):
        size, pool = rng.choice(SIZES_GI), f"pool-{rng.randrange(pools)}"
        running, idle, peaked = rng.random() < 0.8, rng.random() < 0.33, rng.random() < 0.5
        shape = (size, pool, running, idle, peaked)
        if shape not in projected:
            projected[shape] = _projected(*shape)
        columns = projected[shape]
        rows.append(InferenceModel(cluster=cluster, namespace=f"team-{index % teams}", name=f"m-{index}",
                                   sync_state=SyncState.SYNCED, **{**columns, "model_name": f"m-{index}"}))  # fmt: skip
    InferenceModel.objects.bulk_create(rows, batch_size=2000)


def _projected(size: int, pool: str, running: bool, idle: bool, peaked: bool) -> dict:
    status: dict = {"replicas": 1 if running else 0}
    if peaked:
        status["observedPeakMemory"] = f"{max(1, size * 3 // 4)}Gi"
    last = NOW - (timedelta(hours=1) if idle else timedelta(seconds=30))
    spec = {"modelName": "m", "memory": f"{size}Gi", "backendUrl": "http://m:8000",
            "nodeSelector": {"inference-pool": pool}, "cooldownPeriod": "10m", "maxReplicas": 1,
            "dependencies": []}  # fmt: skip
    if size >= 16:
        spec["resources"] = {"requests": {"cpu": "4", "gpu": "1"}, "limits": {"gpu": "1"}}
    annotations = {"inference.eh-ops.io/last-request-time": last.isoformat()}
    row = InferenceModel(spec=spec, status=status, annotations=annotations)
    row.project()
    fields = ["spec", "status", "annotations", *InferenceModel.projected_fields()]
    return {field: getattr(row, field) for field in fields}
