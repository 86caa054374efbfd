"""Right-sizing of every serving kind on a real Prometheus: GPU framebuffer summed over a pod's
tensor-parallel GPUs, vLLM's KV cache turned into --gpu-memory-utilization or fewer GPUs, an OOM
kill raising the memory recommendation, and CPU requests at p95 (see conftest.py's history)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from clusters.web.services import request_delete
from models_app.models import InferenceModel, KubeAIModel, ModelService
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.refresh import refresh_cluster
from tests.rightsizing.factories import make_cluster, reference_models
from tests.rightsizing.prometheus_server import GI, MI

pytestmark = pytest.mark.django_db


def _serving_objects(cluster):
    kubeai = KubeAIModel(cluster=cluster, namespace="ml", name="kubeai-qwen", spec={
        "url": "hf://Qwen/Qwen2.5-7B-Instruct", "engine": "VLLM", "features": ["TextGeneration"],
        "resourceProfile": "nvidia-gpu-h100:2", "minReplicas": 1})  # fmt: skip
    kubeai.clean()
    kubeai.save()
    service = ModelService(cluster=cluster, namespace="ml", name="ms-llama", spec={
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "image": "registry.example.com/llama:v1"},
        "engine": {"image": "vllm/vllm-openai:v0.8.0"}, "accelerator": {"type": "nvidia"},
        "decode": {"replicas": 1, "parallelism": {"tensor": 2},
                   "resources": {"requests": {"memory": "64Gi", "cpu": "8"}}}})  # fmt: skip
    service.clean()
    service.save()
    return kubeai, service


def test_every_serving_kind_is_judged_with_gpu_kv_oom_and_cpu(prometheus, end):
    cluster = make_cluster(prometheus.url)
    models = reference_models(cluster)
    kubeai, service = _serving_objects(cluster)
    refresh = refresh_cluster(cluster, at=end)
    assert refresh.ok and refresh.models_seen == len(models) + 2
    latest = {(o.kind, o.name): o for o in Observation.objects.filter(is_latest=True)}

    # the seed's example is exactly as before
    seed = Observation.objects.get(is_latest=True, kind="InferenceModel", object_id=models["default/llama-2-70b"].pk)
    assert seed.recommendation == "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)"
    assert seed.freed_bytes == 2 * GI

    qwen = latest[("Model", "kubeai-qwen")]
    assert (qwen.object_id, qwen.gpus_per_pod) == (kubeai.pk, 2)
    assert qwen.gpu_memory_peak_bytes == (72000 + 71000) * MI  # summed over the pod's two GPUs
    assert qwen.gpu_capacity_bytes == 2 * 80 * GI
    # KubeAI declares a profile, not memory: nvidia-gpu-h100 x 2 asks 2 x 120Gi (KUBEAI_RESOURCE_PROFILES)
    assert qwen.declared_bytes == 240 * GI
    assert qwen.recommendation == (
        "Consider reducing memory from 240Gi to 42Gi (observed peak 40Gi, 83% overprovisioned)"
    )
    assert qwen.gpu_recommendation == (
        "GPU memory peak 139.7Gi of 160Gi on 2 GPUs; KV cache peaked at 20%: lower --gpu-memory-utilization "
        "from 0.90 to 0.28, or serve on 1 GPU, or on 2 x NVIDIA A100 40GB"
    )

    llama = latest[("ModelService", "ms-llama")]
    assert (llama.kind, llama.object_id) == ("ModelService", service.pk)
    assert llama.oom_killed and llama.declared_bytes == 64 * GI and llama.peak_bytes == 70 * GI
    # the OOM kill cut the peak short: at least 64Gi + 25%, never a reduction
    assert llama.recommended_bytes == 80 * GI and llama.freed_bytes == -16 * GI
    assert llama.recommendation.startswith("Consider increasing memory from 64Gi to 80Gi: OOM-killed in the window")
    assert llama.cpu_p95_millicores == 2000 and llama.recommended_cpu_millicores == 2000
    assert llama.cpu_recommendation == "Consider reducing the CPU request from 8 to 2 (p95 of CPU usage over 7d is 2)"
    assert llama.gpu_recommendation.endswith(
        "KV cache peaked at 95%: raise --gpu-memory-utilization from 0.90 to 0.95 or add a GPU"
    )


def test_without_the_oom_kill_the_same_peak_is_an_ordinary_increase(prometheus, end, settings):
    settings.RIGHTSIZING = {"OOM_METRIC": 'kube_pod_container_status_last_terminated_reason{reason="Evicted"}'}
    cluster = make_cluster(prometheus.url)
    _serving_objects(cluster)
    assert refresh_cluster(cluster, at=end).ok
    llama = Observation.objects.get(is_latest=True, kind="ModelService")
    assert not llama.oom_killed and llama.recommended_bytes == 73 * GI  # 70Gi x 1.04 -> 73Gi


def test_refresh_sql_statements_do_not_grow_with_models(prometheus, end):
    cluster = make_cluster(prometheus.url)
    reference_models(cluster)
    _serving_objects(cluster)
    with CaptureQueriesContext(connection) as few:
        refresh_cluster(cluster, at=end)
    for index in range(40):
        InferenceModel.objects.create(cluster=cluster, name=f"extra-{index}", spec={
            "modelName": f"extra-{index}", "memory": "8Gi", "backendUrl": "http://x:8000"})  # fmt: skip
    with CaptureQueriesContext(connection) as many:
        refresh_cluster(cluster, at=end)
    assert len(many.captured_queries) == len(few.captured_queries)


@pytest.fixture
def judged(prometheus, end):
    """Every kind refreshed once against the history of conftest.py."""
    cluster = make_cluster(prometheus.url)
    models = reference_models(cluster)
    kubeai, service = _serving_objects(cluster)
    assert refresh_cluster(cluster, at=end).ok
    return cluster, models, kubeai, service


def test_a_model_service_recommendation_is_applied_to_its_pods_memory(judged, make_user):
    _, _, _, service = judged
    url = f"/rightsizing/modelservices/{service.pk}/"
    inference_editor = Client()
    inference_editor.force_login(make_user("im-editor", perms=["models_app.change_inferencemodel"]))
    assert inference_editor.post(f"{url}apply/").status_code == 403  # the kind's own right
    editor = Client()
    editor.force_login(make_user("ms-editor", perms=["models_app.change_modelservice"]))
    page = editor.get(url).content.decode()
    assert f'action="{url}apply/"' in page  # the page offers apply for this kind
    report = editor.get("/rightsizing/").content.decode()
    assert f'action="{url}apply/"' in report  # and none for the kinds this user may not change:
    assert re.search(r'action="/rightsizing/inferencemodels/\d+/apply/"', report) is None

    done = editor.post(f"{url}apply/", follow=True).content.decode()
    assert "spec.decode.resources.requests.memory set to 80Gi" in done
    service.refresh_from_db()
    assert service.spec["decode"]["resources"]["requests"] == {"memory": "80Gi", "cpu": "8"}
    assert service.memory_bytes == 80 * GI
    entry = AuditEntry.objects.get(kind="ModelService", object_id=service.pk)
    assert entry.changes == [{"path": "spec.decode.resources.requests.memory", "old": "64Gi", "new": "80Gi"}]
    latest = Observation.objects.get(kind="ModelService", object_id=service.pk, is_latest=True)
    # re-judged against the new declaration at once (the OOM kill in the window still asks for more)
    assert latest.declared_bytes == 80 * GI and latest.recommendation.startswith("Consider increasing memory from 80Gi")


def test_the_api_applies_and_lists_history_for_every_kind(judged, api_as):
    _, models, kubeai, service = judged
    editor = api_as(perms=["models_app.change_modelservice", "models_app.change_kubeaimodel"])
    for slug, obj in (("kubeai-models", kubeai), ("modelservices", service)):
        (entry,) = editor.get(f"/api/rightsizing/{slug}/{obj.pk}/history/").json()
        assert (entry["kind"], entry["object_id"]) == (obj.kube.kind, obj.pk)
    assert api_as().post(f"/api/rightsizing/modelservices/{service.pk}/apply/").status_code == 403
    applied = editor.post(f"/api/rightsizing/modelservices/{service.pk}/apply/")
    assert applied.status_code == 200
    assert applied.json()["spec"]["decode"]["resources"]["requests"]["memory"] == "80Gi"
    refused = editor.post(f"/api/rightsizing/kubeai-models/{kubeai.pk}/apply/")
    assert refused.status_code == 400
    assert refused.json() == {
        "kind": ['kind: "Model" declares its pods\' memory outside its spec: right-sizing can recommend, not apply']
    }
    unknown = editor.get(f"/api/rightsizing/pods/{service.pk}/history/")
    assert unknown.status_code == 404
    old_url = editor.get(f"/api/rightsizing/models/{models['default/llama-2-70b'].pk}/history/")
    assert old_url.status_code == 200 and old_url.json()[0]["kind"] == "InferenceModel"


def test_removing_an_object_of_any_kind_removes_its_history(judged, make_user):
    cluster, models, kubeai, service = judged
    llama = models["default/llama-2-70b"]
    user = make_user("remover")
    actor = Actor(user.username, "portal", user)
    for obj in (kubeai, service, llama):
        key = {"kind": obj.kube.kind, "object_id": obj.pk}
        assert Observation.objects.filter(**key).exists()
        assert request_delete(obj, actor)  # a snapshot cluster's row: removed at once
        assert not Observation.objects.filter(**key).exists()
    assert Observation.objects.filter(kind="InferenceModel").exists()  # the others' stays
    cluster.delete()
    assert not Observation.objects.exists()
