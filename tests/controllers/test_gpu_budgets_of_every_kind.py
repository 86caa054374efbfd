"""KubeAI Models and ModelServices hold GPUs on the real control plane: written to the API server as
KubeAI's and llm-d's controllers would (replicas through the ``/status`` subresource), synced into the
portal, then counted by admission of a managed InferenceModel, by planning and by the pool figures.

The pool is the session's ``gpu-a100`` (devstack/control_plane.NODE_POOLS: 2 kwok nodes x 4
GPUs), read from the Nodes by :func:`scheduler.refresh.refresh_node_pools`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils.dateparse import parse_datetime

from models_app.controller import ready_replicas
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel, KubeAIModel, ModelService
from scheduler.admission.accounting import pool_accounts
from scheduler.calculator.fit import pool_gpu_capacity
from scheduler.models import MemoryReservation, NodePool
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.proposals import Proposal
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import sample_manifest, wait_for
from tests.support.clusters import reconcile_cluster

GI = 1024**3
POOL = "gpu-a100"
# Shaped like KubeAI's own resourceProfiles (its helm chart's values): one unit of the profile.
PROFILES = {
    "a100-test": {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "40Gi"},
        "nodeSelector": {"inference-pool": POOL},
    }
}


def kubeai_model(replicas_running: int) -> dict:
    """2 GPUs and 80Gi per pod (``a100-test:2``); the replicas its controller reports in status."""
    return {
        "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "qwen"},
        "spec": {"url": "hf://Qwen/Qwen2.5-7B-Instruct", "engine": "VLLM", "features": ["TextGeneration"],
                 "resourceProfile": "a100-test:2", "minReplicas": 0, "maxReplicas": 4},
        "status": {"replicas": {"all": replicas_running, "ready": replicas_running}},
    }  # fmt: skip


def model_service() -> dict:
    """Decode: 1 pod x tensor 2 = 2 GPUs; prefill: 1 pod x tensor 1 = 1 GPU; NVIDIA, in the pool."""
    return {
        "apiVersion": "model.otterscale.io/v1alpha1", "kind": "ModelService", "metadata": {"name": "llama-pd"},
        "spec": {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "image": "registry.example.com/llama:v1"},
                 "engine": {"image": "vllm/vllm-openai:v0.8.0"}, "accelerator": {"type": "nvidia"},
                 "decode": {"replicas": 1, "parallelism": {"tensor": 2},
                            "resources": {"requests": {"cpu": "8", "memory": "64Gi"}},
                            "nodeSelector": {"inference-pool": POOL}},
                 "prefill": {"replicas": 1, "parallelism": {"tensor": 1},
                             "resources": {"requests": {"cpu": "4", "memory": "32Gi"}}}},
        "status": {"phase": "Ready", "decodeReplicas": 1, "decodeReady": 1, "prefillReplicas": 1, "prefillReady": 1},
    }  # fmt: skip


def inference_model(gpus: int) -> dict:
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml")
    manifest["spec"]["resources"]["requests"]["gpu"] = manifest["spec"]["resources"]["limits"]["gpu"] = str(gpus)
    return manifest  # 16Gi in gpu-a100: memory is plenty, GPUs decide


def ready_condition(kube) -> dict:
    status = kube.read(InferenceModel.kube, "llama-2-7b")["status"]
    return next(c for c in status["conditions"] if c["type"] == "Ready")


@pytest.fixture
def held(managed, settings):
    """Both kinds written to the API server and synced: 4 + 3 of the pool's 8 GPUs held."""
    settings.KUBEAI_RESOURCE_PROFILES = PROFILES
    kube, cluster = managed
    refresh_node_pools(cluster)
    assert NodePool.objects.get(cluster=cluster, name=POOL).gpu_count == 8
    kube.write(kubeai_model(replicas_running=2))
    kube.write(model_service())
    kube.sync()
    kubeai = KubeAIModel.objects.get(cluster=cluster, name="qwen")
    assert (kubeai.node_pool, kubeai.running_replicas, kubeai.gpu_count, kubeai.memory_bytes) == (POOL, 2, 4, 160 * GI)
    service = ModelService.objects.get(cluster=cluster, name="llama-pd")
    assert (service.node_pool, service.running_replicas, service.gpu_count, service.accelerator) == (
        POOL, 2, 3, "nvidia")  # fmt: skip
    return kube, cluster


def test_admission_refuses_a_managed_model_the_other_kinds_gpus_leave_no_room_for(held):
    kube, cluster = held
    kube.write(inference_model(gpus=2))
    kube.sync()
    denied = ready_condition(kube)
    assert denied["reason"] == "InsufficientGPU"
    assert denied["message"] == (
        f"insufficient GPUs in pool {POOL} for InferenceModel {kube.namespace}/llama-2-7b: requested 2, "
        "free 1 of 8 (7 held by running models, 0 reserved by models starting); no idle model to scale to zero"
    )
    assert kube.get("apps/v1", "Deployment", "llama-2-7b")["spec"]["replicas"] == 0
    assert not MemoryReservation.objects.filter(name="llama-2-7b").exists()
    kube.sync()  # kept at zero, it still asks for its 2 GPUs on the next pass
    assert ready_condition(kube)["message"] == denied["message"]

    # KubeAI's autoscaler scales down (status, not spec): its GPUs are free on the next pass
    kube.write(kubeai_model(replicas_running=1))
    kube.sync()
    assert KubeAIModel.objects.get(cluster=cluster, name="qwen").gpu_count == 2
    assert ready_condition(kube)["reason"] != "InsufficientGPU"
    assert MemoryReservation.objects.get(name="llama-2-7b").gpus == 2


def test_planning_and_pool_figures_count_the_gpus_of_every_kind(held, api_as):
    _, cluster = held
    (account,) = [a for a in pool_accounts(cluster.pk) if a.pool == POOL]
    assert (account.gpus_used, account.allocated_bytes) == (7, (160 + 64 + 32) * GI)
    (pool,) = [p for p in pool_gpu_capacity({cluster.pk}) if p.pool == POOL]
    assert (pool.gpus_held, pool.gpus_free) == (7, 1)
    (api,) = [p for p in api_as(staff=True).get("/api/planning/pools/").json() if p["pool"] == POOL]
    assert api["gpus_used"] == 7
    namespace = cluster.namespaces[0]
    assert api["holders"] == [
        {"model": f"Model {namespace}/qwen", "memory_bytes": 160 * GI, "gpus": 4},
        {"model": f"ModelService {namespace}/llama-pd", "memory_bytes": 96 * GI, "gpus": 3},
    ]

    def proposal(gpus: int) -> dict:
        estimate = Proposal("Estimate", cluster.pk, "default", f"new-{gpus}", POOL, 16 * GI, gpus, origin="estimate")
        return plan_to_dict(plan(cluster, [estimate]))

    refused = proposal(2)
    assert refused["fits"] is False
    (miss,) = next(p for p in refused["pools"] if p["name"] == POOL)["unplaced"]
    assert miss["detail"].startswith("GPUs: needs 2")
    assert proposal(1)["fits"] is True


def test_an_idle_model_holding_the_gpus_is_scaled_to_zero_for_a_refused_one_in_the_same_pass(held):
    """The GPU refusal offers the idle GPU holders as the memory refusal does, so the controller
    stops them and starts the refused model in one reconcile pass instead of waiting with the
    pool's GPUs held by a model nobody calls. Of the 8 GPUs, the other kinds hold 7; the managed
    model ``llama-2-7b`` takes the last one and goes idle."""
    kube, cluster = held
    holder = inference_model(gpus=1)
    holder["spec"]["cooldownPeriod"] = "15m"
    created = kube.write(holder)
    kube.sync()
    wait_for(lambda: ready_replicas(kube.get("apps/v1", "Deployment", "llama-2-7b")) == 1, timeout=30,
             message="the holder's pods ready")  # fmt: skip
    kube.sync()  # its reported replicas mirrored: it holds the last GPU
    later = parse_datetime(created["metadata"]["creationTimestamp"]) + timedelta(minutes=16)
    newcomer = inference_model(gpus=1)
    newcomer["metadata"]["name"] = newcomer["spec"]["modelName"] = "newcomer"
    newcomer["metadata"]["annotations"] = {LAST_REQUEST_ANNOTATION: later.isoformat()}  # called then
    kube.write(newcomer)
    kube.sync()
    assert kube.get("apps/v1", "Deployment", "newcomer")["spec"]["replicas"] == 0  # no GPU free, none idle

    reconcile_cluster(cluster, now=later)  # the holder idle: 16 minutes without a request, cooldown 15

    assert kube.get("apps/v1", "Deployment", "llama-2-7b")["spec"]["replicas"] == 0
    assert kube.get("apps/v1", "Deployment", "newcomer")["spec"]["replicas"] == 1
    assert MemoryReservation.objects.get(name="newcomer").gpus == 1
