"""Node pools read from a cluster's Nodes through the test API server, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.management import call_command

from clusters.quantities import quantity_to_int
from scheduler.models import NodePool
from scheduler.refresh import refresh_node_pools
from scheduler.tasks import refresh_node_pools_task
from tests.support.clusters import EmulatedCluster

GI = 1024**3


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


@pytest.fixture
def emulated() -> Iterator[EmulatedCluster]:
    cluster = EmulatedCluster()
    yield cluster
    cluster.close()


@pytest.fixture
def nodes(emulated) -> EmulatedCluster:
    a100 = {"inference-pool": "gpu-a100", "nvidia.com/gpu.memory": "81920"}
    for item in (
        node("a100-1", "80Gi", a100, gpus=2),
        node("a100-2", "120Gi", a100, gpus=4),
        node("a100-3", "200Gi", a100, gpus=8, unschedulable=True),
        node("cpu-1", "32Gi", {"inference-pool": "default"}),
        node("cpu-2", "31876564Ki", {"inference-pool": "default"}),
        node("control-plane", "16Gi", {"node-role.kubernetes.io/control-plane": ""}),
    ):
        emulated.server.put_object(item)
    return emulated


def test_pools_from_nodes_group_by_pool_label(db, nodes):
    cluster = nodes.register()
    report = refresh_node_pools(cluster)

    assert (report.pools, report.nodes) == (2, 5)
    a100 = NodePool.objects.get(cluster=cluster, name="gpu-a100")
    assert a100.source == NodePool.Source.NODES
    assert a100.node_count == 2  # the cordoned node is listed, not counted
    assert a100.allocatable_bytes == 200 * GI
    assert a100.largest_node_bytes == 120 * GI
    assert a100.gpu_count == 6
    assert a100.gpu_memory_bytes == 80 * GI
    assert {n.name: (n.allocatable_bytes, n.gpu_count, n.schedulable) for n in a100.nodes.all()} == {
        "a100-1": (80 * GI, 2, True),
        "a100-2": (120 * GI, 4, True),
        "a100-3": (200 * GI, 8, False),
    }
    default = NodePool.objects.get(cluster=cluster, name="default")
    assert default.allocatable_bytes == 32 * GI + 31876564 * 1024
    assert (default.gpu_count, default.gpu_memory_bytes) == (0, 0)


def test_refresh_keeps_staff_budget_and_empties_vanished_pools(db, nodes):
    cluster = nodes.register()
    refresh_node_pools(cluster)
    NodePool.objects.filter(name="gpu-a100").update(budget_bytes=150 * GI)
    NodePool.objects.filter(name="default").update(gpu_memory_bytes=24 * GI)  # set by staff
    nodes.server.delete_object("", "v1", "nodes", None, "a100-1")
    nodes.server.delete_object("", "v1", "nodes", None, "a100-2")
    nodes.server.delete_object("", "v1", "nodes", None, "a100-3")

    report = refresh_node_pools(cluster)

    a100 = NodePool.objects.get(name="gpu-a100")
    assert report.emptied == ["gpu-a100"]
    assert (a100.budget_bytes, a100.allocatable_bytes, a100.node_count, a100.nodes.count()) == (150 * GI, 0, 0, 0)
    assert NodePool.objects.get(name="default").gpu_memory_bytes == 24 * GI


def test_command_and_task_refresh_every_cluster(db, nodes, capsys):
    cluster = nodes.register()
    call_command("refresh_node_pools", "--cluster", cluster.name)
    assert "test: 2 pools, 5 nodes" in capsys.readouterr().out
    NodePool.objects.all().delete()

    assert refresh_node_pools_task.delay().get() == {"test": "test: 2 pools, 5 nodes"}
    assert NodePool.objects.filter(cluster=cluster).count() == 2


def test_command_names_an_unknown_cluster(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--cluster: no cluster named 'nope'"):
        call_command("refresh_node_pools", "--cluster", "nope")
