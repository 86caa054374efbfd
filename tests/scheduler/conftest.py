"""Fixtures for the scheduler: pools with budgets and serving models in given states."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from clusters.models import Cluster, SyncState
from clusters.validation.quantities import quantity_to_int
from models_app.models import InferenceModel
from scheduler.models import Node, NodePool
from scheduler.planning.pages import Answer, long_lists
from scheduler.rightsizing.policy import evaluate

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
GI = 1024**3


def make_pool(cluster: Cluster, name: str, budget: str | None = None, nodes: list[str] = (), gpus: int = 0) -> NodePool:
    """A pool whose nodes have the given allocatable memory; budget empty means allocatable."""
    sizes = [quantity_to_int(size) for size in nodes]
    pool = NodePool.objects.create(
        cluster=cluster,
        name=name,
        source=NodePool.Source.NODES if nodes else NodePool.Source.MANUAL,
        node_count=len(sizes),
        allocatable_bytes=sum(sizes),
        largest_node_bytes=max(sizes, default=0),
        gpu_count=gpus * len(sizes),
        budget_bytes=quantity_to_int(budget) if budget else None,
    )
    for index, size in enumerate(sizes):
        Node.objects.create(
            pool=pool, name=f"{name}-{index}", allocatable_bytes=size, capacity_bytes=size, gpu_count=gpus
        )
    return pool


def make_model(
    cluster: Cluster,
    name: str,
    memory: str,
    pool: str = "gpu",
    replicas: int | None = 1,
    peak: str | None = None,
    last_request: datetime | None = None,
    cooldown: str = "10m",
    dependencies: list[str] = (),
    namespace: str = "default",
    gpu: str | None = None,
    **status: Any,
) -> InferenceModel:
    """An InferenceModel row as the sync would store it; ``replicas`` is status.replicas (None: unknown)."""
    spec: dict[str, Any] = {
        "modelName": name,
        "memory": memory,
        "backendUrl": f"http://{name}:8000",
        "nodeSelector": {"inference-pool": pool},
        "cooldownPeriod": cooldown,
        "maxReplicas": 1,
        "dependencies": list(dependencies),
    }
    if gpu:
        spec["resources"] = {"requests": {"gpu": gpu}, "limits": {"gpu": gpu}}
    if replicas is not None:
        status["replicas"] = replicas
    if peak:
        # as a right-sizing refresh leaves it: the observed peak and the policy's verdict on it
        status["observedPeakMemory"] = peak
        verdict = evaluate(quantity_to_int(memory), quantity_to_int(peak))
        status.setdefault("recommendation", verdict.recommendation)
    annotations = {"inference.eh-ops.io/last-request-time": last_request.isoformat()} if last_request else {}
    row = InferenceModel(
        cluster=cluster,
        namespace=namespace,
        name=name,
        spec=spec,
        status=status,
        annotations=annotations,
        sync_state=SyncState.SYNCED,
    )
    row.save()
    return row


def whole(answer: Answer) -> dict[str, Any]:
    """A plan's answer with every long list built whole, as plain values to compare."""
    for _, owner, key in long_lists(answer):
        owner[key] = list(owner[key])
    return dict(answer)


@pytest.fixture
def gpu_pool(cluster) -> NodePool:
    """Budget 100Gi over two 64Gi nodes."""
    return make_pool(cluster, "gpu", budget="100Gi", nodes=["64Gi", "64Gi"])
