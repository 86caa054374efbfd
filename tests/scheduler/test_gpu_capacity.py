"""GPUs in capacity: node labels, per-pod placement by memory, CPU, GPU count and per-GPU memory,
every serving kind's budget through the registry, one definition of idle, and the what-if's own fit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from clusters.models import SyncState
from models_app.models import KubeAIModel, ModelService
from scheduler.admission.admit import Demand, admit, release
from scheduler.holdings import load_holdings
from scheduler.models import Node, NodePool
from scheduler.nodes import node_capacity
from scheduler.planning.placement import NO_SUCH_GPU, TOO_BIG, Item, NodeSpace, PoolSpace, place
from tests.scheduler.conftest import GI, NOW, make_model, make_pool

MI = 1024**2


def node(labels: dict, allocatable: dict) -> dict:
    return {"metadata": {"name": "n", "labels": {"inference-pool": "p", **labels}},
            "status": {"allocatable": allocatable, "capacity": allocatable}}  # fmt: skip


@pytest.mark.parametrize(
    ("labels", "allocatable", "expected"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.memory": "23034"},
         {"memory": "96Gi", "cpu": "24", "nvidia.com/gpu": "2"}, (2, "NVIDIA-L4", 23034 * MI, "nvidia", 24000)),
        ({"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "amd.com/gpu.vram": "192G"},
         {"memory": "1Ti", "cpu": "96", "amd.com/gpu": "8"}, (8, "AMD_Instinct_MI300X_OAM", 192 * GI, "amd", 96000)),
        ({"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
          "inference.eh-ops.io/gpu-memory": "16Gi"},
         {"memory": "192Gi", "cpu": "500m", "google.com/tpu": "4"},
         (4, "tpu-v5-lite-podslice", 16 * GI, "google", 500)),
        ({"inference.eh-ops.io/gpu-product": "HL-225", "inference.eh-ops.io/gpu-memory": "96Gi"},
         {"memory": "1Ti", "habana.ai/gaudi": "8"}, (8, "HL-225", 96 * GI, "intel-gaudi", 0)),
        ({}, {"memory": "64Gi", "cpu": "16"}, (0, "", 0, "", 16000)),
    ],
)  # fmt: skip
def test_node_capacity_reads_each_vendors_feature_discovery_labels(labels, allocatable, expected):
    capacity = node_capacity(node(labels, allocatable))
    got = (capacity.gpu_count, capacity.gpu_product, capacity.gpu_memory_bytes, capacity.accelerator)
    assert (*got, capacity.cpu_millis) == expected


def l4_and_a100() -> list[PoolSpace]:
    return [
        PoolSpace("l4", None, [NodeSpace("l4-0", 96 * GI, 2, 24000, 24 * GI, "nvidia", "NVIDIA-L4")]),
        PoolSpace("a100", None, [NodeSpace("a100-0", 512 * GI, 4, 64000, 80 * GI, "nvidia", "NVIDIA-A100")]),
    ]


def test_weights_and_kv_cache_must_fit_the_gpus_the_pod_gets():
    result = place(l4_and_a100(), [
        Item("big on l4", "l4", 80 * GI, gpus=1, gpu_memory_bytes=80 * GI, accelerator="nvidia"),
        Item("big on a100", "a100", 80 * GI, gpus=1, gpu_memory_bytes=80 * GI, accelerator="nvidia"),
        Item("split on l4", "l4", 40 * GI, gpus=2, gpu_memory_bytes=40 * GI, accelerator="nvidia"),
    ])  # fmt: skip
    (miss,) = result.pools["l4"].unplaced
    assert (miss.item.label, miss.reason) == ("big on l4", TOO_BIG)
    assert miss.detail == (
        "GPU memory: weights and KV cache need 80.0Gi; 1 GPU(s) of at most 24.0Gi each give 24.0Gi"
    )
    assert result.pools["a100"].nodes[0].items == ["big on a100"]
    assert result.pools["l4"].nodes[0].items == ["split on l4"]  # 2 x 24Gi hold 40Gi


def test_gpu_type_cpu_and_gpu_count_are_named_with_their_numbers():
    result = place(l4_and_a100(), [
        Item("amd", "a100", GI, gpus=1, accelerator="amd"),
        Item("h100", "a100", GI, gpus=1, accelerator="nvidia", gpu_product="NVIDIA-H100"),
        Item("cpu hungry", "l4", GI, cpu_millis=32000),
        Item("wide", "l4", GI, gpus=4),
        Item("first", "a100", GI, gpus=3, cpu_millis=1000),
        Item("second", "a100", GI, gpus=2, cpu_millis=1000),
    ])  # fmt: skip
    misses = {m.item.label: (m.reason, m.detail) for pool in result.pools.values() for m in pool.unplaced}
    assert misses["amd"] == (NO_SUCH_GPU, "GPU type: needs 1 amd GPU(s); the pool's nodes have NVIDIA-A100 (nvidia)")
    assert misses["h100"][0] == NO_SUCH_GPU and "NVIDIA-H100" in misses["h100"][1]
    assert misses["cpu hungry"] == (TOO_BIG, "CPU: needs 32; the pool's nodes have at most 24")
    assert misses["wide"] == (TOO_BIG, "GPUs: needs 4 on one node; the pool's nodes have at most 2")
    assert misses["second"][1] == "GPUs: needs 2, a100-0 has 1; no node of the pool has room left"


def test_kubeai_model_holds_its_resource_profile_times_the_replicas_its_status_reports(cluster):
    model = KubeAIModel(cluster=cluster, namespace="default", name="llama", sync_state=SyncState.SYNCED,
                        spec={"url": "hf://x/y", "engine": "VLLM", "features": ["TextGeneration"],
                              "resourceProfile": "nvidia-gpu-l4:2", "minReplicas": 0},
                        status={"replicas": {"all": 1, "ready": 1}})  # fmt: skip
    model.save()
    assert (model.node_pool, model.replicas, model.gpu_count, model.accelerator) == ("gpu-l4", 1, 2, "nvidia")
    assert model.memory_bytes == 48 * GI  # the chart's nvidia-gpu-l4 asks 24Gi per unit
    (holding,) = load_holdings(cluster.pk, running_only=True)
    assert (holding.kind, holding.pool, holding.gpu_count, holding.memory_bytes) == ("Model", "gpu-l4", 2, 48 * GI)
    model.status = {"replicas": {"all": 0, "ready": 0}}
    model.save()
    assert load_holdings(cluster.pk, running_only=True) == [] and model.gpu_count == 0


def model_service(cluster, name: str, **status) -> ModelService:
    row = ModelService(cluster=cluster, namespace="default", name=name, sync_state=SyncState.SYNCED, status=status,
                       spec={"model": {"name": "m", "image": "i"}, "engine": {"image": "v"},
                             "accelerator": {"type": "nvidia"},
                             "decode": {"replicas": 1, "parallelism": {"tensor": 4, "dataLocal": 2},
                                        "resources": {"requests": {"cpu": "32", "memory": "40Gi"}},
                                        "nodeSelector": {"inference-pool": "gpu"}},
                             "prefill": {"replicas": 2, "parallelism": {"tensor": 2},
                                         "resources": {"requests": {"memory": "20Gi"}}}})  # fmt: skip
    row.save()
    return row


def test_model_service_pods_and_gpus_per_role_and_admission_counts_them(cluster):
    make_pool(cluster, "gpu", nodes=["64Gi", "64Gi"], gpus=8)
    row = model_service(cluster, "pd", decodeReplicas=1, prefillReplicas=2, phase="Running")
    assert row.gpu_count == 1 * 8 + 2 * 2 and row.memory_bytes == 80 * GI and row.phase == "Running"
    assert [(p["role"], p["count"], p["gpus"], p["cpu_millis"]) for p in row.pods] == [
        ("decode", 1, 8, 32000), ("prefill", 2, 2, 0)]  # fmt: skip

    memory = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "im", 60 * GI), now=NOW)
    assert not memory.fits and "held by default/pd (80Gi)" in memory.message
    gpus = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "im", GI, gpus=5), now=NOW)
    assert not gpus.fits
    assert gpus.message == (
        "insufficient GPUs in pool gpu for InferenceModel default/im: requested 5, free 4 of 16 "
        "(12 held by running models, 0 reserved by models starting); no idle model to scale to zero"
    )


def test_gpus_promised_to_a_starting_model_are_not_promised_twice(cluster):
    make_pool(cluster, "gpu", nodes=["256Gi"], gpus=4)
    first = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "first", 16 * GI, gpus=3), now=NOW)
    assert first.fits  # admitted: it holds a reservation, its pods are not running yet
    again = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "first", 16 * GI, gpus=3), now=NOW)
    assert again.fits  # its own reservation never counts against itself
    second = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "second", 16 * GI, gpus=2), now=NOW)
    assert not second.fits
    assert second.message == (
        "insufficient GPUs in pool gpu for InferenceModel default/second: requested 2, free 1 of 4 "
        "(0 held by running models, 3 reserved by models starting); no idle model to scale to zero"
    )
    release(cluster.pk, "InferenceModel", "default", "first")
    assert admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "second", 16 * GI, gpus=2), now=NOW).fits


def test_a_never_requested_model_is_idle_after_its_cooldown_from_creation(cluster, gpu_pool):
    old = make_model(cluster, "never-asked", "70Gi")
    type(old).objects.filter(pk=old.pk).update(cluster_created_at=NOW - timedelta(hours=1))
    old.refresh_from_db()
    old.save()  # the sync re-projects: last active is the creation

    decision = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "new", 40 * GI), now=NOW)

    assert not decision.fits and decision.frees_enough
    assert [h.name for h in decision.idle_candidates] == ["never-asked"]


def test_load_holdings_filters_visibility_in_sql(cluster, gpu_pool):
    make_model(cluster, "mine", "1Gi", namespace="team-a")
    make_model(cluster, "theirs", "1Gi", namespace="team-b")
    shown = load_holdings(cluster.pk, restrict=lambda rows: rows.filter(namespace="team-a"))
    assert [h.name for h in shown] == ["mine"]


@pytest.fixture
def client(api_as):
    return api_as()


def estimate(name: str, memory: str, pool: str = "gpu", **extra) -> dict:
    return {"estimate": {"name": name, "pool": pool, "memory": memory, **extra}}


def post(client, models, **extra):
    return client.post("/api/planning/plan/", {"models": models, "now": NOW.isoformat(), **extra}, format="json")


def test_running_models_stay_put_and_the_plan_reports_the_proposals_own_fit(client, cluster):
    make_pool(cluster, "gpu", nodes=["40Gi", "40Gi"])
    make_model(cluster, "a", "30Gi", last_request=NOW)
    make_model(cluster, "b", "20Gi", last_request=NOW)
    make_model(cluster, "c", "20Gi", last_request=NOW)

    kept = post(client, [estimate("new", "10Gi")]).json()  # a on node 0 (10Gi free), b+c fill node 1
    assert kept["fits"] is True and kept["overcommitted"] == []
    (proposal,) = kept["proposal"]
    assert proposal == {"model": "Estimate default/new", "fits": True, "nodes": ["gpu-0"]}

    refused = post(client, [estimate("wide", "25Gi")]).json()
    assert refused["fits"] is False and refused["overcommitted"] == []  # running ones are not blamed
    gpu = refused["pools"][0]
    assert [m["model"] for m in gpu["unplaced"]] == ["Estimate default/wide"]
    assert gpu["suggestions"]["fits_after"] is None and gpu["suggestions"]["idle"] == []


def test_estimates_from_the_calculator_are_validated_field_by_field(client, cluster, gpu_pool):
    response = post(client, [estimate("x", "lots", gpus=-1, accelerator="quantum")])
    assert response.status_code == 400
    body = response.json()
    assert "models[0].estimate.memory" in body and "models[0].estimate.gpus" in body
    assert "must be one of nvidia, amd, intel-gaudi, google" in str(body["models[0].estimate.accelerator"])


def test_the_planning_page_lists_each_error_once(admin_client, cluster, gpu_pool):
    models = "- estimate: {name: x, pool: gpu, memory: 16GB}"
    page = admin_client.post("/planning/", {"cluster": cluster.name, "models": models})
    assert page.status_code == 200
    assert page.content.decode().count("16GB&quot; must be a non-negative quantity") == 1


def test_repack_is_asked_for_and_the_pools_gpu_product_limits_an_estimate(client, cluster):
    pool = make_pool(cluster, "gpu", nodes=["40Gi", "40Gi"], gpus=1)
    Node.objects.filter(pool=pool).update(gpu_memory_bytes=24 * GI, gpu_product="NVIDIA-L4", accelerator="nvidia")
    for name, memory in (("a", "20Gi"), ("b", "15Gi"), ("c", "10Gi"), ("d", "10Gi")):
        make_model(cluster, name, memory, last_request=NOW)

    body = post(client, [estimate("e", "25Gi")]).json()
    assert body["fits"] is False  # where they run: a+b on node 0 (5Gi free), c+d on node 1 (20Gi free)
    assert post(client, [estimate("e", "25Gi")], repack=True).json()["fits"] is True  # e+b | a+c+d
    gpu_heavy = post(client, [estimate("g", "30Gi", gpus=1, gpu_memory="30Gi")], repack=True).json()
    (miss,) = gpu_heavy["pools"][0]["unplaced"]
    assert miss["detail"].startswith("GPU memory: weights and KV cache need 30.0Gi; 1 GPU(s) of at most 24.0Gi")
    assert NodePool.objects.get(pk=pool.pk).gpu_count == 2


def test_a_gpu_refusal_offers_the_idle_models_holding_gpus_oldest_idle_first(cluster):
    """Short of GPUs, admission names the idle models whose scale-to-zero frees enough of them, as
    it does for memory, so the controller can make room in the same pass; a model holding no GPU
    is never offered, however long idle."""
    make_pool(cluster, "gpu", nodes=["512Gi"], gpus=8)
    make_model(cluster, "busy", "10Gi", gpu="4", last_request=NOW - timedelta(minutes=1))
    make_model(cluster, "idle-recent", "10Gi", gpu="2", last_request=NOW - timedelta(minutes=30))
    make_model(cluster, "idle-oldest", "10Gi", gpu="1", last_request=NOW - timedelta(hours=5))
    make_model(cluster, "idle-no-gpu", "10Gi", last_request=NOW - timedelta(hours=9))

    refused = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "new", GI, gpus=3), now=NOW)

    assert not refused.fits and refused.frees_enough
    assert [h.name for h in refused.idle_candidates] == ["idle-oldest", "idle-recent"]  # 3 GPUs, 2 short
    assert refused.message == (
        "insufficient GPUs in pool gpu for InferenceModel default/new: requested 3, free 1 of 8 "
        "(7 held by running models, 0 reserved by models starting); "
        "scaling idle default/idle-oldest, default/idle-recent to zero would make room"
    )
    too_many = admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "new", GI, gpus=6), now=NOW)
    assert not too_many.frees_enough and too_many.message.endswith(
        "; even scaling every idle model to zero frees only 3 GPUs"
    )
    assert admit(Demand(cluster.pk, "gpu", "InferenceModel", "default", "new", GI, gpus=3), now=NOW,
                 stopping={h.key for h in refused.idle_candidates}).fits  # fmt: skip
