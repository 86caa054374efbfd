"""Node pools read from a cluster's Nodes on the real control plane, over real HTTP.

The session's simulated nodes (devstack/control_plane.NODE_POOLS) are there for every test;
these tests add Nodes in pools of their own (unique names) and remove them afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes
import pytest
from django.core.management import call_command

from clusters.validation.quantities import quantity_to_int
from devstack.control_plane import NODE_POOLS
from scheduler.models import NodePool
from scheduler.refresh import refresh_node_pools
from scheduler.tasks import refresh_node_pools_task

GI = 1024**3
SESSION_NODES = sum(pool["count"] for pool in NODE_POOLS.values())


def node(name: str, memory: str, labels: dict[str, str], gpus: int = 0, unschedulable: bool = False) -> dict:
    allocatable = {"cpu": "32", "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    capacity = {**allocatable, "memory": f"{quantity_to_int(memory) // 1024 + 1024**2}Ki"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": allocatable, "capacity": capacity},
    }


class CreatedNodes:
    """Nodes of two pools of this test's own, created in the real API server (status as given)."""

    def __init__(self, kube) -> None:
        self.core = kubernetes.client.CoreV1Api(kube.api_client)
        suffix = uuid.uuid4().hex[:6]
        self.gpu, self.cpu = f"gpu-{suffix}", f"cpu-{suffix}"
        self.names: list[str] = []
        a100 = {"inference-pool": self.gpu, "nvidia.com/gpu.memory": "81920"}
        for item in (
            node(f"{self.gpu}-1", "80Gi", a100, gpus=2),
            node(f"{self.gpu}-2", "120Gi", a100, gpus=4),
            node(f"{self.gpu}-3", "200Gi", a100, gpus=8, unschedulable=True),
            node(f"{self.cpu}-1", "32Gi", {"inference-pool": self.cpu}),
            node(f"{self.cpu}-2", "31876564Ki", {"inference-pool": self.cpu}),
        ):
            self.core.create_node(item)
            self.names.append(item["metadata"]["name"])

    def delete(self, *names: str) -> None:
        for name in names:
            self.core.delete_node(name)
            self.names.remove(name)


@pytest.fixture
def nodes(kube) -> Iterator[CreatedNodes]:
    created = CreatedNodes(kube)
    yield created
    created.delete(*list(created.names))


def test_pools_from_nodes_group_by_pool_label(db, kube, nodes):
    cluster = kube.register()
    report = refresh_node_pools(cluster)

    assert (report.pools, report.nodes) == (len(NODE_POOLS) + 2, SESSION_NODES + 5)
    a100 = NodePool.objects.get(cluster=cluster, name=nodes.gpu)
    assert a100.source == NodePool.Source.NODES
    assert a100.node_count == 2  # the cordoned node is listed, not counted
    assert a100.allocatable_bytes == 200 * GI
    assert a100.largest_node_bytes == 120 * GI
    assert a100.gpu_count == 6
    assert a100.gpu_memory_bytes == 80 * GI
    assert {n.name: (n.allocatable_bytes, n.gpu_count, n.schedulable) for n in a100.nodes.all()} == {
        f"{nodes.gpu}-1": (80 * GI, 2, True),
        f"{nodes.gpu}-2": (120 * GI, 4, True),
        f"{nodes.gpu}-3": (200 * GI, 8, False),
    }
    cpu = NodePool.objects.get(cluster=cluster, name=nodes.cpu)
    assert cpu.allocatable_bytes == 32 * GI + 31876564 * 1024
    assert (cpu.gpu_count, cpu.gpu_memory_bytes) == (0, 0)
    session_gpu = NodePool.objects.get(cluster=cluster, name="gpu-a100")
    assert session_gpu.gpu_count == 4 * NODE_POOLS["gpu-a100"]["count"]
    # GPU feature discovery's labels: product and per-GPU memory (MiB), per pool and per node
    l4 = NodePool.objects.get(cluster=cluster, name="gpu-l4")
    assert (l4.gpu_count, l4.gpu_product, l4.accelerator) == (4, "NVIDIA-L4", "nvidia")
    assert l4.gpu_memory_bytes == 23034 * 1024**2
    assert {(n.gpu_product, n.cpu_millis, n.gpu_count) for n in l4.nodes.all()} == {("NVIDIA-L4", 24000, 2)}
    assert (session_gpu.gpu_product, session_gpu.gpu_memory_bytes) == ("NVIDIA-A100-SXM4-80GB", 80 * GI)


def test_refresh_keeps_staff_budget_and_empties_vanished_pools(db, kube, nodes):
    cluster = kube.register()
    refresh_node_pools(cluster)
    NodePool.objects.filter(name=nodes.gpu).update(budget_bytes=150 * GI)
    NodePool.objects.filter(name=nodes.cpu).update(gpu_memory_bytes=24 * GI)  # set by staff
    nodes.delete(f"{nodes.gpu}-1", f"{nodes.gpu}-2", f"{nodes.gpu}-3")

    report = refresh_node_pools(cluster)

    a100 = NodePool.objects.get(name=nodes.gpu)
    assert report.emptied == [nodes.gpu]
    assert (a100.budget_bytes, a100.allocatable_bytes, a100.node_count, a100.nodes.count()) == (150 * GI, 0, 0, 0)
    assert NodePool.objects.get(name=nodes.cpu).gpu_memory_bytes == 24 * GI


def test_command_and_task_refresh_every_cluster(db, kube, nodes, capsys):
    cluster = kube.register()
    summary = f"test: {len(NODE_POOLS) + 2} pools, {SESSION_NODES + 5} nodes"
    call_command("refresh_node_pools", "--cluster", cluster.name)
    assert summary in capsys.readouterr().out
    NodePool.objects.all().delete()

    assert refresh_node_pools_task.delay().get() == {"test": summary}
    assert NodePool.objects.filter(cluster=cluster).count() == len(NODE_POOLS) + 2


def test_command_names_an_unknown_cluster(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--cluster: no cluster named 'nope'"):
        call_command("refresh_node_pools", "--cluster", "nope")
