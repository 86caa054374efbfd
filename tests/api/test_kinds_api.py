"""REST API for mirrored kinds: manifest shape in and out, permissions, filters, field-level errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from clusters.models import Cluster, SyncState
from inference_gateway.models import SharedGatewayId
from models_app.models import InferenceModel
from tests.conftest import ENDPOINTS, load_samples

SAMPLES = load_samples()
SAMPLE = dict(SAMPLES)["inferencemodel-llama-2-70b.yaml"]


def is_subset(small: Any, big: Any) -> bool:
    """Everything in ``small`` is in ``big`` (extra keys in ``big``, such as defaults, allowed)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(key in big and is_subset(value, big[key]) for key, value in small.items())
    return small == big


@pytest.mark.parametrize(("file_name", "manifest"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_every_sample_round_trips_through_the_api(editor, cluster, file_name: str, manifest: dict[str, Any]) -> None:
    url = ENDPOINTS[manifest["kind"]]
    created = editor.post(url, manifest, format="json")
    assert created.status_code == 201, created.json()
    fetched = editor.get(f"{url}{created.json()['id']}/").json()
    for key in ("apiVersion", "kind", "spec"):
        assert is_subset(manifest[key], fetched[key]), key
    assert is_subset(manifest["metadata"], fetched["metadata"])
    assert fetched["cluster"] == "prod"
    assert fetched["sync"]["state"] == SyncState.PENDING_APPLY


def test_defaults_come_back(editor, cluster) -> None:
    body = {
        "apiVersion": "inference.eh-ops.io/v1alpha1",
        "kind": "InferenceModel",
        "metadata": {"name": "tiny"},
        "spec": {"modelName": "tiny", "memory": "1Gi", "backendUrl": "http://tiny:8000"},
    }
    spec = editor.post(ENDPOINTS["InferenceModel"], body, format="json").json()["spec"]
    assert spec["cooldownPeriod"] == "10m" and spec["nodeSelector"] == {"inference-pool": "default"}


def test_kubectl_get_output_can_be_posted_as_is(editor, cluster) -> None:
    manifest = copy.deepcopy(SAMPLE)
    manifest["metadata"].update(
        uid="abc",
        resourceVersion="123",
        creationTimestamp="2024-01-01T00:00:00Z",
        managedFields=[{"manager": "kubectl"}],
        generation=4,
    )
    manifest["status"] = {"ready": True, "replicas": 1}
    response = editor.post(ENDPOINTS["InferenceModel"], manifest, format="json")
    assert response.status_code == 201, response.json()
    row = InferenceModel.objects.get()
    assert row.status == {} and row.uid == "" and row.resource_version == ""


def test_invalid_input_is_a_field_level_400_and_nothing_is_stored(editor, cluster) -> None:
    manifest = copy.deepcopy(SAMPLE)
    manifest["spec"]["memory"] = "16GB"
    manifest["spec"]["maxReplicas"] = 2
    response = editor.post(ENDPOINTS["InferenceModel"], manifest, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "spec.maxReplicas": ["spec.maxReplicas: 2 is greater than the maximum 1"],
        "spec.memory": [
            'spec.memory: "16GB" is not a Kubernetes quantity such as 16Gi (a whole number of Ki, Mi, Gi or Ti)'
        ],
    }
    assert not InferenceModel.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        [],
        "text",
        {"metadata": "x"},
        {"metadata": {"name": "x"}, "spec": [1]},
        {"metadata": {"name": "x"}, "kind": "Pod"},
    ],
)
def test_malformed_bodies_are_400_not_500(editor, cluster, body: Any) -> None:
    response = editor.post(ENDPOINTS["InferenceModel"], body, format="json")
    assert response.status_code == 400, response.content


def test_wrong_kind_for_endpoint(editor, cluster) -> None:
    response = editor.post(ENDPOINTS["Model"], SAMPLE, format="json")
    assert response.status_code == 400
    assert "apiVersion" in response.json() and "kind" in response.json()


def test_duplicate_name_in_same_cluster_is_refused_but_other_cluster_is_fine(editor, cluster) -> None:
    assert editor.post(ENDPOINTS["InferenceModel"], SAMPLE, format="json").status_code == 201
    again = editor.post(ENDPOINTS["InferenceModel"], SAMPLE, format="json")
    assert again.status_code == 400
    assert again.json() == {"metadata.name": ['metadata.name: "llama-2-70b" already exists in prod/default']}
    staging = Cluster.objects.create(name="staging", server_url="https://10.0.0.2:6443")
    # the same model in another cluster serves the same gateway id: staff share it first
    SharedGatewayId.objects.create(cluster=staging, gateway_id="default/llama-2-70b")
    other = editor.post(ENDPOINTS["InferenceModel"] + "?cluster=staging", SAMPLE, format="json")
    assert other.status_code == 201
    assert InferenceModel.objects.count() == 2


def test_cluster_must_be_named_when_several_exist(editor, cluster) -> None:
    Cluster.objects.create(name="staging", server_url="https://10.0.0.2:6443")
    response = editor.post(ENDPOINTS["InferenceModel"], SAMPLE, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "cluster": ["cluster: null is required when several clusters exist; known: prod, staging"]
    }
    unknown = editor.post(ENDPOINTS["InferenceModel"] + "?cluster=nope", SAMPLE, format="json")
    assert unknown.json() == {"cluster": ['cluster: "nope" is not a registered cluster; known: prod, staging']}


def test_patch_is_a_merge_patch_and_put_cannot_rename(editor, cluster) -> None:
    url = (
        ENDPOINTS["InferenceModel"] + f"{editor.post(ENDPOINTS['InferenceModel'], SAMPLE, format='json').json()['id']}/"
    )
    patched = editor.patch(url, {"spec": {"memory": "64Gi", "nodeSelector": {"gpu-type": None}}}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["spec"]["memory"] == "64Gi"
    assert patched.json()["spec"]["nodeSelector"] == {"inference-pool": "gpu-a100"}
    assert patched.json()["summary"]["memory_bytes"] == 64 * 1024**3
    renamed = copy.deepcopy(SAMPLE)
    renamed["metadata"]["name"] = renamed["spec"]["modelName"] = "other"
    response = editor.put(url, renamed, format="json")
    assert response.status_code == 400
    assert "metadata.name" in response.json()
    bad = editor.patch(url, {"spec": {"memory": "lots"}}, format="json")
    assert bad.status_code == 400
    assert InferenceModel.objects.get().spec["memory"] == "64Gi"


def test_patch_takes_the_merge_patch_media_type(editor, cluster) -> None:
    """``kubectl patch --type merge`` and RFC 7396 clients send application/merge-patch+json."""
    created = editor.post(ENDPOINTS["InferenceModel"], SAMPLE, format="json").json()
    url = f"{ENDPOINTS['InferenceModel']}{created['id']}/"
    body = json.dumps({"spec": {"memory": "64Gi", "nodeSelector": {"gpu-type": None}}})
    patched = editor.patch(url, body, content_type="application/merge-patch+json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["spec"]["nodeSelector"] == {"inference-pool": "gpu-a100"}
    assert InferenceModel.objects.get().spec["memory"] == "64Gi"
    assert editor.patch(url, "{", content_type="application/merge-patch+json").status_code == 400
    refused = editor.put(url, json.dumps(SAMPLE), content_type="application/merge-patch+json")
    assert refused.status_code == 415 and "is for PATCH" in refused.json()["detail"]


def test_delete_of_an_object_never_applied_removes_it(editor, cluster) -> None:
    url = (
        ENDPOINTS["InferenceModel"] + f"{editor.post(ENDPOINTS['InferenceModel'], SAMPLE, format='json').json()['id']}/"
    )
    assert editor.delete(url).status_code == 204
    assert not InferenceModel.objects.exists()


def test_delete_of_an_object_the_cluster_has_waits_for_the_cluster(editor, cluster) -> None:
    obj = InferenceModel.objects.create(
        cluster=cluster, name="x", uid="u-1", spec=SAMPLE["spec"], sync_state=SyncState.SYNCED
    )
    assert editor.delete(f"{ENDPOINTS['InferenceModel']}{obj.pk}/").status_code == 202
    assert InferenceModel.objects.get().sync_state == SyncState.DELETING


class TestPermissions:
    def test_anonymous_gets_nothing(self, client, cluster) -> None:
        for url in [*ENDPOINTS.values(), "/api/clusters/"]:
            answer = client.get(url)
            assert (answer.status_code, answer.headers.get("WWW-Authenticate")) == (401, "Token"), url

    def test_plain_user_reads_but_cannot_write(self, api_as, cluster) -> None:
        plain = api_as()
        assert plain.get(ENDPOINTS["InferenceModel"]).status_code == 200
        assert plain.post(ENDPOINTS["InferenceModel"], SAMPLE, format="json").status_code == 403
        assert plain.get("/api/clusters/").status_code == 403

    def test_permission_is_per_action(self, api_as, cluster) -> None:
        adder = api_as(perms=["models_app.add_inferencemodel"])
        created = adder.post(ENDPOINTS["InferenceModel"], SAMPLE, format="json")
        assert created.status_code == 201
        url = f"{ENDPOINTS['InferenceModel']}{created.json()['id']}/"
        assert adder.patch(url, {"spec": {"memory": "64Gi"}}, format="json").status_code == 403
        assert adder.delete(url).status_code == 403
        assert adder.post(ENDPOINTS["Model"], {}, format="json").status_code == 403

    def test_cluster_permissions_manage_clusters_and_tokens_are_never_returned(self, api_as, cluster) -> None:
        staff = api_as(perms=["clusters.view_cluster", "clusters.add_cluster"])
        listed = staff.get("/api/clusters/").json()["results"]
        assert listed[0]["has_token"] is True and "bearer_token" not in listed[0]
        created = staff.post(
            "/api/clusters/",
            {"name": "edge", "server_url": "https://edge:6443", "bearer_token": "t0ps3cret"},
            format="json",
        )
        assert created.status_code == 201
        assert "t0ps3cret" not in created.content.decode()
        missing = staff.post("/api/clusters/", {"name": "cfg", "auth_method": "kubeconfig"}, format="json")
        assert missing.status_code == 400
        assert "kubeconfig_path" in missing.json()


class TestFiltersAndOrdering:
    @pytest.fixture
    def demo(self, db, django_db_blocker) -> None:
        from django.core.management import call_command

        call_command("load_demo", verbosity=0)

    def test_filters(self, api_as, demo) -> None:
        client = api_as()

        def names(url: str) -> list[str]:
            return [item["metadata"]["name"] for item in client.get(url).json()["results"]]

        assert names("/api/inferencemodels/?q=mistral") == ["mistral-7b"]
        assert names("/api/inferencemodels/?node_pool=gpu-a100&ready=false") == ["codellama-34b"]
        assert names("/api/inferencemodels/?ordering=-memory_bytes&limit=2") == ["llama-2-70b", "codellama-34b"]
        assert names("/api/kubeai-models/?engine=vllm") == ["llama-3.1-8b-instruct-fp8-l4"]
        assert names("/api/kubeai-models/?feature=TextEmbedding") == ["nomic-embed-text"]
        assert names("/api/modelservices/?model_name=Qwen/Qwen3-8B") == ["qwen3-8b"]
        assert names("/api/inferenceruns/?phase=Succeeded") == ["iris-run-january"]
        assert names("/api/inferencemodels/?cluster=demo&sync_state=Synced&limit=1") == ["codellama-34b"]
        assert client.get("/api/inferencemodels/?sync_state=Bogus").status_code == 400
