"""Admission counts what the pool's Nodes carry, not only what the portal mirrors (issue 44, item 2):
pods of a namespace the portal does not sync hold the pool's GPUs and memory on the real control
plane (kwok nodes, the real kube-scheduler), and a managed InferenceModel is refused instead of
admitted into a Pending pod. A pod the scheduler cannot place for another reason (CPU, which
admission does not count) shows as ``FailedScheduling`` on the model within one reconcile, not
after the Deployment's 10-minute progress deadline."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from models_app.models import InferenceModel
from scheduler.models import MemoryReservation
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import sample_manifest, wait_for

POOL_LABEL = "inference-pool"


def model(pool: str, gpus: int = 1, memory: str = "16Gi", cpu: str = "4") -> dict:
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml")
    spec = manifest["spec"]
    spec["nodeSelector"] = {POOL_LABEL: pool}
    spec["memory"] = memory
    spec["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi", "gpu": str(gpus)},
                         "limits": {"cpu": cpu, "memory": "1Gi", "gpu": str(gpus)}}  # fmt: skip
    if not gpus:
        for part in spec["resources"].values():
            del part["gpu"]
    return manifest


def ready_condition(kube) -> dict:
    status = kube.read(InferenceModel.kube, "llama-2-7b")["status"]
    return next(c for c in status["conditions"] if c["type"] == "Ready")


@pytest.fixture
def elsewhere(kube) -> Iterator[str]:
    """A namespace the portal does not sync (another team's), deleted afterwards."""
    core = kubernetes.client.CoreV1Api(kube.api_client)
    name = f"{kube.namespace}-other"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def run_elsewhere(kube, namespace: str, pool: str, replicas: int, requests: dict[str, str]) -> None:
    """A Deployment of ``replicas`` pods with ``requests`` in ``pool``, made outside the portal; waits
    until the scheduler has bound exactly that many pods to nodes."""
    apps, core = kubernetes.client.AppsV1Api(kube.api_client), kubernetes.client.CoreV1Api(kube.api_client)
    labels = {"app": "batch-training"}
    body = {"metadata": {"name": "batch-training"}, "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"nodeSelector": {POOL_LABEL: pool},
            "containers": [{"name": "t", "image": "trainer", "resources": {"requests": requests,
                                                                            "limits": requests}}]}}}}  # fmt: skip
    try:
        apps.create_namespaced_deployment(namespace, body)
    except kubernetes.client.ApiException as error:
        assert error.status == 409, error.body
        apps.patch_namespaced_deployment_scale("batch-training", namespace, {"spec": {"replicas": replicas}})

    def bound() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="app=batch-training").items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        return len(live) == replicas and all(p.spec.node_name for p in live)

    wait_for(bound, timeout=30, message=f"{replicas} pods of batch-training bound to {pool} nodes")
    for pod in core.list_namespaced_pod(namespace, label_selector="app=batch-training").items:
        kube.informed("v1", "Pod", pod.metadata.name, namespace)  # admission reads pods through an informer


def test_gpus_held_by_pods_of_an_unsynced_namespace_are_not_admitted(managed, elsewhere) -> None:
    kube, cluster = managed
    refresh_node_pools(cluster)
    run_elsewhere(kube, elsewhere, "gpu-l4", 4, {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"})  # all 4 GPUs
    kube.write(model("gpu-l4", gpus=1))
    kube.sync()
    denied = ready_condition(kube)
    assert denied["reason"] == "InsufficientGPU", denied
    assert denied["message"].startswith(
        f"insufficient GPUs in pool gpu-l4 for InferenceModel {kube.namespace}/llama-2-7b: requested 1, free 0 of 4 "
        f"(0 held by running models, 0 reserved by models starting; 4 by pods the portal does not mirror: "
        f"{elsewhere}/batch-training-"
    ), denied["message"]
    assert kube.get("apps/v1", "Deployment", "llama-2-7b")["spec"]["replicas"] == 0
    assert not MemoryReservation.objects.filter(name="llama-2-7b").exists()

    run_elsewhere(kube, elsewhere, "gpu-l4", 3, {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"})  # one freed
    kube.sync()
    assert ready_condition(kube)["reason"] != "InsufficientGPU"
    assert kube.get("apps/v1", "Deployment", "llama-2-7b")["spec"]["replicas"] == 1
    assert MemoryReservation.objects.get(name="llama-2-7b").gpus == 1


def test_memory_requested_by_pods_of_an_unsynced_namespace_counts_against_the_pool(managed, elsewhere) -> None:
    kube, cluster = managed
    refresh_node_pools(cluster)  # default: 2 CPU nodes of 64Gi
    run_elsewhere(kube, elsewhere, "default", 2, {"cpu": "1", "memory": "60Gi"})
    kube.write(model("default", gpus=0, memory="16Gi"))
    kube.sync()
    denied = ready_condition(kube)
    assert denied["reason"] == "InsufficientMemory", denied
    assert "by pods the portal does not mirror" in denied["message"] and elsewhere in denied["message"], denied
    assert "120Gi by pods" in denied["message"], denied["message"]


def test_a_pod_the_scheduler_cannot_place_shows_failed_scheduling_within_one_reconcile(managed) -> None:
    kube, cluster = managed
    refresh_node_pools(cluster)
    kube.write(model("gpu-a100", gpus=1, cpu="1000"))  # admitted (admission counts GPUs and memory), never placed
    kube.sync()
    core = kubernetes.client.CoreV1Api(kube.api_client)

    def unschedulable() -> bool:
        pods = core.list_namespaced_pod(kube.namespace, label_selector="app.kubernetes.io/name=llama-2-7b").items
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for p in pods
                   for c in p.status.conditions or [])  # fmt: skip

    wait_for(unschedulable, timeout=30, message="the scheduler to mark the model's pod Unschedulable")
    kube.sync()  # one reconcile
    failed = ready_condition(kube)
    assert failed["reason"] == "FailedScheduling", failed
    assert failed["message"].startswith("pod llama-2-7b-") and "Insufficient cpu" in failed["message"], failed
    events = kube.list("v1", "Event")
    assert any(e["reason"] == "FailedScheduling" and e["involvedObject"]["kind"] == "InferenceModel" for e in events)
