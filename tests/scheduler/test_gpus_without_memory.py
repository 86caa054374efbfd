"""One rule for what a running model holds: its declared memory (0 when it declares none) and its
GPUs. A ModelService whose pods declare GPUs but no memory, or a KubeAI Model whose resource
profile names no memory, holds those GPUs for planning, admission, the usage totals and the
calculator alike."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, SyncState
from clusters.validation.schemas import ManifestInvalid
from models_app.models import KubeAIModel, ModelService
from scheduler.admission.accounting import pool_accounts
from scheduler.admission.admit import Demand, admit
from scheduler.admission.usage import pool_usage
from scheduler.calculator.fit import pool_gpu_capacity
from scheduler.holdings import load_holdings
from scheduler.models import NodePool
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.proposals import Proposal, proposal_from_request
from tests.scheduler.conftest import GI, NOW, make_model, make_pool

GPU_ONLY_PROFILES = {"gpu-only": {"limits": {"nvidia.com/gpu": "1"}, "nodeSelector": {"inference-pool": "gpu"}}}


def gpu_service(cluster: Cluster, name: str, replicas: int = 1, tensor: int = 2, **status) -> ModelService:
    """A ModelService whose decode pods ask for GPUs (tensor-parallel) and no memory."""
    row = ModelService(cluster=cluster, namespace="default", name=name, sync_state=SyncState.SYNCED, status=status,
                       spec={"model": {"name": "m"}, "accelerator": {"type": "nvidia"},
                             "decode": {"replicas": replicas, "parallelism": {"tensor": tensor},
                                        "nodeSelector": {"inference-pool": "gpu"}}})  # fmt: skip
    row.save()
    return row


def gpu_kubeai(cluster: Cluster, name: str, count: int, running: int) -> KubeAIModel:
    row = KubeAIModel(cluster=cluster, namespace="default", name=name, sync_state=SyncState.SYNCED,
                      spec={"url": "hf://x/y", "engine": "VLLM", "features": ["TextGeneration"],
                            "resourceProfile": f"gpu-only:{count}", "minReplicas": 0},
                      status={"replicas": {"all": running, "ready": running}})  # fmt: skip
    row.save()
    return row


@pytest.fixture
def gpu_only(cluster, settings) -> Cluster:
    """Pool gpu: 2 nodes x 4 GPUs. Held without declared memory: a ModelService (1 pod x 2 GPUs)
    and a KubeAI Model (1 replica x 3 GPUs); beside them an InferenceModel with memory, no GPU."""
    settings.KUBEAI_RESOURCE_PROFILES = GPU_ONLY_PROFILES
    pool = make_pool(cluster, "gpu", nodes=["64Gi", "64Gi"], gpus=4)
    NodePool.objects.filter(pk=pool.pk).update(gpu_memory_bytes=24 * GI)  # as the Nodes' GFD labels give it
    service = gpu_service(cluster, "svc", decodeReplicas=1)
    kubeai = gpu_kubeai(cluster, "kai", count=3, running=1)
    assert (service.memory_bytes, service.gpu_count, kubeai.memory_bytes, kubeai.gpu_count) == (None, 2, None, 3)
    make_model(cluster, "plain", "10Gi")
    return cluster


def test_models_without_declared_memory_hold_their_gpus(gpu_only):
    held = {(h.kind, h.name): (h.memory_bytes, h.gpu_count) for h in load_holdings(gpu_only.pk, running_only=True)}
    assert held == {
        ("ModelService", "svc"): (0, 2), ("Model", "kai"): (0, 3), ("InferenceModel", "plain"): (10 * GI, 0)
    }  # fmt: skip


def test_admission_counts_the_gpus_of_models_without_declared_memory(gpu_only):
    decision = admit(Demand(gpu_only.pk, "gpu", "InferenceModel", "default", "new", GI, gpus=4), now=NOW)
    assert not decision.fits
    assert decision.message == (
        "insufficient GPUs in pool gpu for InferenceModel default/new: requested 4, free 3 of 8 "
        "(5 held by running models, 0 reserved by models starting); no idle model to scale to zero"
    )
    assert admit(Demand(gpu_only.pk, "gpu", "InferenceModel", "default", "new", GI, gpus=3), now=NOW).fits


def test_books_totals_and_calculator_agree_on_the_gpus_held(gpu_only):
    (books,) = pool_accounts(gpu_only.pk)
    (totals,) = pool_usage({gpu_only.pk})
    (calculator,) = pool_gpu_capacity({gpu_only.pk})
    assert (books.gpus_used, totals.gpus_used, calculator.gpus_held) == (5, 5, 5)
    assert (books.allocated_bytes, totals.allocated_bytes) == (10 * GI, 10 * GI)
    assert books.holders_total == 3
    # biggest first; a model that declares no memory comes after every one that does
    assert [h.name for h in books.holders] == ["plain", "kai", "svc"]



def test_pages_list_the_biggest_holders_first_and_those_without_memory_last(gpu_only):
    """Pages rank each kind's holders per pool in SQL: no declared memory ranks below any."""
    sized = ModelService(cluster=gpu_only, namespace="default", name="sized", sync_state=SyncState.SYNCED,
                         spec={"model": {"name": "m"}, "accelerator": {"type": "cpu"},
                               "decode": {"resources": {"requests": {"memory": "1Gi"}},
                                          "nodeSelector": {"inference-pool": "gpu"}}})  # fmt: skip
    sized.save()
    (page,) = pool_accounts(gpu_only.pk, per_pool=1)
    assert ([h.name for h in page.holders], page.holders_total, page.gpus_used) == (["plain", "sized", "kai"], 4, 5)


def test_the_calculator_counts_only_what_the_planner_counts(gpu_only):
    """Deleted in the cluster, or admitted by the portal but not reported running: no GPU held."""
    gone = gpu_service(gpu_only, "gone", tensor=4)
    ModelService.objects.filter(pk=gone.pk).update(sync_state=SyncState.DELETED_IN_CLUSTER)
    managed = Cluster.objects.create(name="managed", server_url="https://10.0.0.2:6443",
                                     managed_kinds=["ModelService"])  # fmt: skip
    NodePool.objects.filter(pk=make_pool(managed, "gpu", nodes=["64Gi"], gpus=4).pk).update(gpu_memory_bytes=24 * GI)
    gpu_service(managed, "unreported", tensor=4)
    by_pool = {(p.cluster, p.pool): p.gpus_held for p in pool_gpu_capacity()}
    books = {(a.cluster_name, a.pool): a.gpus_used for a in pool_accounts()}
    assert by_pool == books == {("prod", "gpu"): 5, ("managed", "gpu"): 0}


def test_planning_places_the_gpu_pods_of_models_without_declared_memory(gpu_only):
    # two nodes of 4 GPUs: the KubeAI pod takes 3 of one, the ModelService pod 2 of the other
    wide = Proposal("Estimate", gpu_only.pk, "default", "wide", "gpu", GI, gpus=3, origin="estimate")
    result = plan_to_dict(plan(gpu_only, [wide], now=NOW))
    assert result["fits"] is False
    (miss,) = result["pools"][0]["unplaced"]
    assert miss["model"] == "Estimate default/wide" and miss["detail"].startswith("GPUs: needs 3")
    narrow = Proposal("Estimate", gpu_only.pk, "default", "narrow", "gpu", GI, gpus=2, origin="estimate")
    assert plan_to_dict(plan(gpu_only, [narrow], now=NOW))["fits"] is True


def test_the_dashboard_and_the_planning_page_show_the_gpus_used(admin_client, gpu_only):
    page = admin_client.get("/")
    (account,) = page.context["accounts"]
    assert account.gpus_used == 5
    assert "<th>GPUs used</th>" in page.content.decode() and "<td>5</td>" in page.content.decode()
    planning = admin_client.get("/planning/").content.decode()
    assert "default/plain (10.0 GiB), default/kai (0.0 GiB, 3 GPUs), default/svc (0.0 GiB, 2 GPUs)" in planning


def test_a_stopped_model_without_declared_memory_is_planned_by_its_gpus(gpu_only):
    stopped = gpu_service(gpu_only, "stopped", tensor=4, decodeReplicas=0)
    proposal = proposal_from_request({"kind": "ModelService", "id": stopped.pk}, 0, gpu_only)
    assert (proposal.memory_bytes, [(pod.count, pod.gpus) for pod in proposal.pods]) == (0, [(1, 4)])
    (miss,) = plan_to_dict(plan(gpu_only, [proposal], now=NOW))["pools"][0]["unplaced"]
    assert miss["model"] == "ModelService default/stopped" and miss["detail"].startswith("GPUs: needs 4")

    nothing = ModelService(cluster=gpu_only, namespace="default", name="nothing", sync_state=SyncState.SYNCED,
                           spec={"model": {"name": "m"}, "accelerator": {"type": "cpu"}, "decode": {}})  # fmt: skip
    nothing.save()
    with pytest.raises(ManifestInvalid) as refused:
        proposal_from_request({"kind": "ModelService", "id": nothing.pk}, 0, gpu_only)
    assert refused.value.errors[0].rule.startswith("declares neither memory nor GPUs")
