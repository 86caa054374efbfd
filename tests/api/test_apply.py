"""``POST /api/apply/``: multi-document YAML or JSON, create or update, all or nothing."""

from __future__ import annotations

from pathlib import Path

import yaml
from django.conf import settings

from clusters.models import Cluster
from models_app.models import InferenceModel, KubeAIModel
from runs_app.models import InferenceRun

ALL_SAMPLES_YAML = "---\n".join(path.read_text() for path in sorted(Path(settings.SAMPLES_DIR).glob("*.yaml")))


def post_yaml(client, text: str, query: str = ""):
    return client.post(f"/api/apply/{query}", data=text, content_type="application/yaml")


def test_all_samples_in_one_yaml_file_create_then_are_unchanged(editor, db) -> None:
    Cluster.objects.create(name="demo", auth_method=Cluster.AuthMethod.SNAPSHOT)  # saved rows are Synced at once
    first = post_yaml(editor, ALL_SAMPLES_YAML)
    assert first.status_code == 200, first.json()
    assert {row["action"] for row in first.json()} == {"created"}
    assert len(first.json()) == 14
    again = post_yaml(editor, ALL_SAMPLES_YAML)
    assert {row["action"] for row in again.json()} == {"unchanged"}
    assert InferenceModel.objects.count() == 5 and InferenceRun.objects.count() == 1


def test_applying_again_retries_rows_that_are_not_synced(editor, cluster) -> None:
    post_yaml(editor, ALL_SAMPLES_YAML)
    InferenceModel.objects.filter(name="mistral-7b").update(sync_state="Error", last_error="422 from the cluster")
    again = {(row["name"], row["action"]) for row in post_yaml(editor, ALL_SAMPLES_YAML).json()}
    assert ("mistral-7b", "updated") in again and ("llama-2-70b", "updated") in again  # never applied yet


def test_update_and_create_in_one_request(editor, cluster) -> None:
    post_yaml(editor, ALL_SAMPLES_YAML)
    docs = [yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-mistral-7b.yaml").read_text())]
    docs[0]["spec"]["memory"] = "10Gi"
    # a copy serves its own gateway id (one object per id: inference_gateway.placement)
    docs.append({**docs[0], "metadata": {"name": "mistral-7b-copy"}, "spec": {**docs[0]["spec"], "modelName": "copy"}})
    response = editor.post("/api/apply/", docs, format="json")
    assert [row["action"] for row in response.json()] == ["updated", "created"]
    assert InferenceModel.objects.get(name="mistral-7b").memory_bytes == 10 * 1024**3


def test_one_bad_document_writes_nothing_and_names_each_error(editor, cluster) -> None:
    bad = (
        ALL_SAMPLES_YAML.replace("memory: 80Gi", "memory: 80GB", 1)
        + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
    )
    response = post_yaml(editor, bad)
    assert response.status_code == 400
    failures = response.json()["documents"]
    assert [(failure["kind"], failure["name"]) for failure in failures] == [
        ("InferenceModel", "llama-2-70b"),
        ("Pod", "p"),
    ]
    assert failures[0]["errors"] == {
        "spec.memory": [
            'spec.memory: "80GB" is not a Kubernetes quantity such as 16Gi (a whole number of Ki, Mi, Gi or Ti)'
        ]
    }
    assert "is not a mirrored kind" in failures[1]["errors"]["kind"][0]
    assert not InferenceModel.objects.exists() and not KubeAIModel.objects.exists()


def test_kubectl_list_documents_are_accepted(editor, cluster) -> None:
    docs = [yaml.safe_load(path.read_text()) for path in sorted(Path(settings.SAMPLES_DIR).glob("model-*.yaml"))]
    response = editor.post("/api/apply/", {"apiVersion": "v1", "kind": "List", "items": docs}, format="json")
    assert response.status_code == 200 and len(response.json()) == 4


def test_invalid_yaml_and_empty_body(editor, cluster) -> None:
    assert post_yaml(editor, "a: [unclosed").status_code == 400
    assert post_yaml(editor, "").status_code == 400


def test_permissions_are_checked_per_kind(api_as, cluster) -> None:
    only_models = api_as(perms=["models_app.add_inferencemodel", "models_app.change_inferencemodel"])
    response = post_yaml(only_models, ALL_SAMPLES_YAML)
    assert response.status_code == 403
    denied = {failure["kind"] for failure in response.json()["documents"]}
    assert denied == {"Model", "ModelService", "InferenceConfig", "InferenceRun"}
    assert not InferenceModel.objects.exists()


def test_cluster_parameter(editor, cluster) -> None:
    response = post_yaml(editor, ALL_SAMPLES_YAML, "?cluster=missing")
    assert response.status_code == 400
    assert response.json() == {"cluster": ['cluster: "missing" is not a registered cluster; known: prod']}
