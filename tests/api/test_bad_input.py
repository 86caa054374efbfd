"""Bad input of every shape is a quick 4xx that names the problem, never a 500, and nothing is stored."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.db import DataError

from clusters.validation.limits import MAX_NESTING_DEPTH, MAX_REQUEST_BODY_BYTES
from models_app.models import InferenceModel, KubeAIModel
from runs_app.models import InferenceConfig, InferenceRun
from tests.conftest import ENDPOINTS

SAMPLES = Path(settings.SAMPLES_DIR)
ALIAS_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def sample(file_name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / file_name).read_text())


def im(**spec: Any) -> dict[str, Any]:
    manifest = sample("inferencemodel-mistral-7b.yaml")
    manifest["spec"].update(spec)
    return manifest


def post_yaml(client, text: str, path: str = "/api/apply/"):
    return client.post(path, data=text, content_type="application/yaml")


def test_a_body_over_3_mib_is_refused_before_it_is_read(editor, cluster) -> None:
    big = json.dumps([im(modelName="x" * (MAX_REQUEST_BODY_BYTES + 1))])
    response = editor.post("/api/apply/", data=big, content_type="application/json")
    assert response.status_code == 413
    assert "more than the limit 3145728 (3 MiB)" in response.json()["detail"]
    assert not InferenceModel.objects.exists()


def test_an_alias_bomb_is_a_quick_small_400(editor, cluster) -> None:
    started = time.monotonic()
    response = post_yaml(editor, ALIAS_BOMB)
    assert time.monotonic() - started < 2
    assert response.status_code == 400 and len(response.content) < 1000
    assert "aliases expand the document by more than 3145728 characters" in response.json()["detail"]


def test_a_writer_without_permission_gets_403_before_the_body_is_parsed(api_as, cluster) -> None:
    nobody = api_as(perms=["models_app.view_inferencemodel"])
    assert post_yaml(nobody, ALIAS_BOMB).status_code == 403
    assert post_yaml(nobody, "a: [unclosed").status_code == 403


def test_authorization_comes_before_validation_per_document(api_as, cluster) -> None:
    only_models = api_as(perms=["models_app.add_inferencemodel", "models_app.change_inferencemodel"])
    invalid_model = im(memory="16GB")
    run = sample("inferencerun-iris-run-january.yaml")
    response = only_models.post("/api/apply/", [invalid_model, run], format="json")
    assert response.status_code == 403
    assert [(failure["index"], failure["kind"]) for failure in response.json()["documents"]] == [(1, "InferenceRun")]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("when: 2024-01-01", "line 9, column 7: found a timestamp value, which JSON has not; quote it"),
        ("data: !!binary aGVsbG8=", "found a binary value, which JSON has not"),
        ("tags: !!set {a, b}", "found a set value, which JSON has not"),
        ("ratio: .nan", "found '.nan', which is not a finite number"),
        ("ratio: -.inf", "found '-.inf', which is not a finite number"),
        ("1: one", "found the key '1' (int); keys must be strings: quote it"),
        ("on: yes", "found the key 'on' (bool); keys must be strings: quote it"),
        ("a: &a [*a]", "found an alias inside its own anchor"),
        ("[" * 100_000 + "]" * 100_000, f"nests deeper than {MAX_NESTING_DEPTH} levels"),
    ],
)
def test_yaml_that_is_not_json_is_a_400_naming_the_problem(editor, cluster, text, problem) -> None:
    manifest = yaml.safe_dump(im(), sort_keys=False).replace("spec:\n", f"spec:\n  x: 1\n---\n{text}\n---\nspec:\n", 1)
    response = post_yaml(editor, manifest)
    assert response.status_code == 400 and problem in response.json()["detail"], response.content
    assert not InferenceModel.objects.exists()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, "nests deeper than 102 levels"),
        ("[" * 500 + "]" * 500, "nests deeper than 102 levels"),
        ('{"metadata": {"name": "x"}, "spec": {"memory": 1e999}}', "1e999 is too large for a double"),
        ('{"metadata": {"name": "x"}, "spec": {"memory": NaN}}', "NaN is not JSON"),
    ],
)
def test_json_that_python_cannot_take_is_a_400(editor, cluster, body, problem) -> None:
    for path in (ENDPOINTS["InferenceModel"], "/api/apply/", "/api/planning/calculator/"):
        response = editor.post(path, data=body, content_type="application/json")
        assert response.status_code == 400 and problem in response.json()["detail"], (path, response.content)


def test_a_deep_value_is_refused_naming_where_on_every_write_path(editor, cluster) -> None:
    deep: Any = "bottom"
    for _ in range(MAX_NESTING_DEPTH - 3):  # spec, storage and input are the first three levels
        deep = [deep]
    config = sample("inferenceconfig-iris-inference-config.yaml")
    config["spec"]["storage"]["input"] = {"deep": deep}
    created = editor.post(ENDPOINTS["InferenceConfig"], config, format="json")
    assert created.status_code == 400, created.content
    path = "spec.storage.input.deep" + "[0]" * 96  # 311 characters, quoted clipped to 200
    clipped = f"{path[:200]}... (311 characters)"
    assert created.json() == {clipped: [f"{clipped}: nests deeper than {MAX_NESTING_DEPTH} levels"]}
    applied = editor.post("/api/apply/", [config], format="json")
    assert applied.status_code == 400 and applied.json()["documents"][0]["errors"] == created.json()
    assert not InferenceConfig.objects.exists()


@pytest.mark.parametrize(
    ("change", "path", "rule"),
    [
        ({"spec": {"modelName": "a\x00b"}}, "spec.modelName", "contains a NUL character"),
        ({"spec": {"modelName": "a\ud800b"}}, "spec.modelName", "unpaired surrogate"),
        ({"metadata": {"annotations": {"note": "a\x00"}}}, "metadata.annotations.note", "contains a NUL character"),
        ({"metadata": {"name": "mistral-7b\n"}}, "metadata.name", "must be a lowercase RFC 1123 subdomain"),
        ({"metadata": {"namespace": "default\n"}}, "metadata.namespace", "must be a lowercase RFC 1123 label"),
        ({"metadata": {"labels": {"team": "ml\n"}}}, "metadata.labels.team", "must be a string of at most 63"),
        ({"spec": {"memory": "16Gi\n"}}, "spec.memory", "is not a Kubernetes quantity such as 16Gi"),
        (
            {"metadata": {"annotations": {f"a{i}": "x" * 70_000 for i in range(4)}}},
            "metadata.annotations",
            "more than the limit 262144 (256 KiB)",
        ),
        ({"spec": {"containerImage": "x" * 1_600_000}}, "(root)", "more than the 1572864 (1.5 MiB) a cluster stores"),
        ({"spec": {"maxReplicas": 2**31}}, "spec.maxReplicas", "is outside the int32 range"),
        # The Deployment's pod template carries spec.nodeSelector: a value no label can hold fails
        # there (422) long after the write; refused here, naming the field.
        ({"spec": {"nodeSelector": {"pool": "x" * 70}}}, "spec.nodeSelector.pool", "must be a string of at most 63"),
        ({"spec": {"nodeSelector": {"pool": "-gpu"}}}, "spec.nodeSelector.pool", "must be a string of at most 63"),
        ({"spec": {"nodeSelector": {"bad key!": "x"}}}, "spec.nodeSelector.bad key!", "must be at most 63"),
        ({"spec": {"nodeSelector": {"Example.com/pool": "x"}}}, "spec.nodeSelector.Example.com/pool",
         "has a prefix that is not a DNS subdomain"),
        # a GPU (nvidia.com/gpu in the pod) cannot be overcommitted: the pod needs its limit, equal
        ({"spec": {"resources": {"requests": {"gpu": "1"}}}}, "spec.resources.limits.gpu", "must be set when"),
        ({"spec": {"resources": {"requests": {"gpu": "1"}, "limits": {"gpu": "2"}}}}, "spec.resources.limits.gpu",
         "must equal spec.resources.requests.gpu (1)"),
    ],
)
def test_what_kubernetes_or_postgresql_refuses_is_a_400_naming_the_field(editor, cluster, change, path, rule) -> None:
    manifest = im()
    for part, values in change.items():
        manifest[part] = {**manifest.get(part, {}), **values}
    response = editor.post(ENDPOINTS["InferenceModel"], json.dumps(manifest), content_type="application/json")
    assert response.status_code == 400, response.content
    messages = response.json()[path]
    assert any(message.startswith(f"{path}: ") and rule in message for message in messages), messages
    assert len(response.content) < 2000  # the refused value is quoted clipped
    assert not InferenceModel.objects.exists()


def test_a_pod_field_no_pod_can_hold_is_refused_on_the_apply_path_too(editor, cluster) -> None:
    """``/api/apply/`` (as the forms, YAML pages and admin: ``validate_manifest``) refuses a
    nodeSelector value of 70 characters naming the field; 63 is Kubernetes' limit and passes."""
    applied = editor.post("/api/apply/", [im(nodeSelector={"pool": "x" * 70})], format="json")
    assert applied.status_code == 400, applied.content
    errors = applied.json()["documents"][0]["errors"]
    assert list(errors) == ["spec.nodeSelector.pool"] and "at most 63" in errors["spec.nodeSelector.pool"][0]
    assert not InferenceModel.objects.exists()
    accepted = editor.post("/api/apply/", [im(nodeSelector={"example.com/pool": "x" * 63})], format="json")
    assert accepted.status_code in (200, 201), accepted.content


def test_int32_and_int64_formats_of_the_crd_are_enforced(editor, cluster) -> None:
    model = sample("model-gemma2-2b-cpu.yaml")
    model["spec"].update(maxReplicas=2**31, scaleDownDelaySeconds=2**63)
    response = editor.post(ENDPOINTS["Model"], model, format="json")
    assert response.json() == {
        "spec.maxReplicas": ["spec.maxReplicas: 2147483648 is outside the int32 range (-2147483648 to 2147483647)"],
        "spec.scaleDownDelaySeconds": [
            "spec.scaleDownDelaySeconds: 9223372036854775808 is outside the int64 range "
            "(-9223372036854775808 to 9223372036854775807)"
        ],
    }
    assert not KubeAIModel.objects.exists()


def test_nul_in_query_parameters_and_huge_limits(editor, cluster) -> None:
    for url in (
        "/api/inferencemodels/?model_name=a%00b",
        "/api/rightsizing/report/?namespace=a%00",
        "/rightsizing/?node_pool=%00",
        "/api/inferenceruns/?ordering=%00",
    ):
        response = editor.get(url)
        assert response.status_code == 400 and "must not contain NUL characters" in response.content.decode(), url
    assert editor.get("/api/inferencemodels/?limit=99999999999999999999").status_code == 200
    assert editor.get("/api/inferencemodels/?offset=99999999999999999999").status_code == 200


def test_a_cluster_given_in_the_body_must_be_a_name(editor, cluster) -> None:
    for name in ("a\x00", {"name": "prod"}, 7):
        manifest = {**sample("inferencerun-iris-run-january.yaml"), "cluster": name}
        response = editor.post(ENDPOINTS["InferenceRun"], manifest, format="json")
        assert response.status_code == 400 and "must be a cluster name" in response.json()["cluster"][0]
    assert not InferenceRun.objects.exists()


def test_crd_valid_extremes_are_stored_with_their_projections(editor, cluster) -> None:
    """Every projected column holds what the CRD allows its source to be; quantities saturate at int64."""
    big = im(
        modelName="o" * 96 + "/" + "m" * 96,  # the longest model name the gateway serves (inference_gateway.names)
        memory="99999999999999999999Ti",
        nodeSelector={"inference-pool": "p" * 63},  # the longest label value (70 is refused: above)
        resources={"limits": {"gpu": "99999999999"}},
    )
    response = editor.post(ENDPOINTS["InferenceModel"], big, format="json")
    assert response.status_code == 201, response.content
    stored = InferenceModel.objects.get()
    assert (stored.model_name, stored.node_pool) == ("o" * 96 + "/" + "m" * 96, "p" * 63)
    assert stored.memory_bytes == 2**63 - 1 and stored.gpu_count == 99999999999
    run = sample("inferencerun-iris-run-january.yaml")
    run["spec"].update(timeoutSeconds=2**63 - 1, configRef={"name": "c" * 300, "namespace": "n" * 70})
    assert editor.post(ENDPOINTS["InferenceRun"], run, format="json").status_code == 201
    assert InferenceRun.objects.get().timeout_seconds == 2**63 - 1
    kubeai = sample("model-llama-3.1-8b-instruct-fp8-l4.yaml")
    kubeai["spec"].update(
        resourceProfile="nvidia-gpu-l4:99999999999999999999", replicas=2**31 - 1, features=["TextGeneration"] * 50
    )
    assert editor.post(ENDPOINTS["Model"], kubeai, format="json").status_code == 201
    assert KubeAIModel.objects.get().gpu_count == 2**63 - 1


@pytest.mark.parametrize("parameters", [1e308, "1e308", "nan", "inf"])
def test_the_calculator_refuses_numbers_it_cannot_compute_with(editor, parameters) -> None:
    response = editor.post("/api/planning/calculator/", {"parameters": parameters}, format="json")
    assert response.status_code == 400 and "parameters" in response.json(), response.content
    extremes = {"parameters": 1e15, "layers": 100_000, "kv_heads": 100_000, "head_dim": 1_000_000}
    extremes.update(context_length=1_000_000_000, concurrent_sequences=1_000_000, dtype="fp32", gpu_memory="1Ki")
    assert editor.post("/api/planning/calculator/", extremes, format="json").status_code == 200


def test_cluster_namespaces_must_be_namespace_names(api_as) -> None:
    staff = api_as(perms=["clusters.add_cluster"], staff=True)  # permission, not is_staff, decides
    for namespaces in (["ml\x00"], ["ml\n"], [7], "ml"):
        body = {"name": "edge", "auth_method": "snapshot", "namespaces": namespaces}
        response = staff.post("/api/clusters/", body, format="json")
        assert response.status_code == 400 and "must be a list of namespace names" in response.json()["namespaces"][0]
    assert staff.post("/api/clusters/", {**body, "namespaces": ["ml", "serving"]}, format="json").status_code == 201


@pytest.mark.parametrize(
    "error", [DataError("value too long for type character varying(63)"), RecursionError("maximum recursion depth")]
)
def test_a_database_or_recursion_error_past_validation_is_a_400_not_a_500(error) -> None:
    """The safety net under every check above: whatever still slips through is the client's bad input."""
    from clusters.web.api.exceptions import exception_handler

    response = exception_handler(error, {"view": None, "request": None})
    assert response.status_code == 400
    assert "varying(63)" in str(response.data) or "nested too deeply" in str(response.data)
