"""The CRD schemas plus the Python rules: every sample valid, every documented invalid value refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clusters.validation.manifests import ManifestInvalid, resolve_kind, validate_manifest
from tests.conftest import load_samples

SAMPLES = dict(load_samples())


def sample(name: str) -> dict[str, Any]:
    return copy.deepcopy(SAMPLES[name])


def errors_of(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestInvalid) as caught:
        validate_manifest(resolve_kind(manifest), manifest)
    return [error.message for error in caught.value.errors]


def with_spec(name: str, **changes: Any) -> dict[str, Any]:
    manifest = sample(name)
    manifest["spec"].update(changes)
    return manifest


@pytest.mark.parametrize("file_name", sorted(SAMPLES))
def test_every_reference_sample_validates(file_name: str) -> None:
    manifest = sample(file_name)
    validated = validate_manifest(resolve_kind(manifest), manifest)
    assert validated["metadata"]["name"] == manifest["metadata"]["name"]


def test_covers_all_five_kinds() -> None:
    assert {manifest["kind"] for manifest in SAMPLES.values()} == {
        "InferenceModel",
        "Model",
        "InferenceConfig",
        "InferenceRun",
        "ModelService",
    }


IM = "inferencemodel-llama-2-70b.yaml"
KUBEAI = "model-gemma2-2b-cpu.yaml"
KUBEAI_VLLM = "model-llama-3.1-8b-instruct-fp8-l4.yaml"
WHOLE_QUANTITY = "is not a Kubernetes quantity such as 16Gi (a whole number of Ki, Mi, Gi or Ti)"


@pytest.mark.parametrize(
    ("file_name", "changes", "expected"),
    [
        (IM, {"memory": "16GB"}, 'spec.memory: "16GB" ' + WHOLE_QUANTITY),
        (IM, {"memory": "80"}, 'spec.memory: "80" ' + WHOLE_QUANTITY),
        (IM, {"memory": "1.5Gi"}, 'spec.memory: "1.5Gi" ' + WHOLE_QUANTITY),
        (IM, {"memory": "16Gi\n"}, 'spec.memory: "16Gi\\n" is not a Kubernetes quantity such as 16Gi'),
        (IM, {"memory": "0Gi"}, 'spec.memory: "0Gi" must be greater than zero'),
        (IM, {"maxReplicas": 2}, "spec.maxReplicas: 2 is greater than the maximum 1"),
        (IM, {"maxReplicas": -1}, "spec.maxReplicas: -1 is less than the minimum 0"),
        (IM, {"backendUrl": "not a uri"}, 'spec.backendUrl: "not a uri" is not a valid uri'),
        (IM, {"modelName": ""}, 'spec.modelName: "" is shorter than 1 characters'),
        (IM, {"cooldownPeriod": "ten minutes"}, '"ten minutes" is not a duration such as 10m, 1h30m or 0'),
        (IM, {"dependencies": ["llama-2-70b"]}, "must not include the model itself (llama-2-70b)"),
        (
            IM,
            {"resources": {"requests": {"memory": "96Gi"}, "limits": {"memory": "80Gi"}}},
            'spec.resources.requests.memory: "96Gi" must not exceed spec.resources.limits.memory (80Gi)',
        ),
        (IM, {"replicas": 3}, "spec.replicas: is not a known field"),
        (
            KUBEAI,
            {"files": [{"path": "etc/config.yaml", "content": "x"}]},
            'spec.files[0].path: "etc/config.yaml" is not an absolute path (it must start with /)',
        ),
        (KUBEAI, {"files": [{"path": "/" + "a" * 1024, "content": "x"}]}, "spec.files[0].path: "),
        (KUBEAI, {"files": [{"path": "/f", "content": "x" * 100001}]}, "is longer than 100000 characters"),
        (
            KUBEAI,
            {"files": [{"path": f"/f{i}", "content": "x"} for i in range(11)]},
            "spec.files: ",
        ),
        (
            KUBEAI,
            {"adapters": [{"name": "Bad_Name", "url": "hf://x/y"}]},
            "spec.adapters[0].name: \"Bad_Name\" may hold only lowercase letters, digits and '-', such as my-adapter",
        ),
        (KUBEAI, {"adapters": [{"name": "a" * 64, "url": "hf://x/y"}]}, "is longer than 63 characters"),
        (KUBEAI, {"minReplicas": -1}, "spec.minReplicas: -1 is less than the minimum 0"),
        (KUBEAI, {"maxReplicas": 0}, "spec.maxReplicas: 0 is less than the minimum 1"),
        (KUBEAI, {"targetRequests": 0}, "spec.targetRequests: 0 is less than the minimum 1"),
        (KUBEAI, {"engine": "TGI"}, 'spec.engine: "TGI" is not one of: OLlama, VLLM, FasterWhisper, Infinity'),
        (KUBEAI, {"features": ["ImageGeneration"]}, 'spec.features[0]: "ImageGeneration" is not one of'),
        (KUBEAI, {"resourceProfile": "nvidia-gpu-l4"}, '"nvidia-gpu-l4" is not a resource profile and count'),
        (KUBEAI, {"loadBalancing": {"strategy": "RoundRobin"}}, 'spec.loadBalancing.strategy: "RoundRobin" is not one'),
        (
            KUBEAI,
            {"loadBalancing": {"strategy": "PrefixHash", "prefixHash": {"meanLoadFactor": 99}}},
            "spec.loadBalancing.prefixHash.meanLoadFactor: 99 is less than the minimum 100",
        ),
        (KUBEAI, {"minReplicas": 3, "maxReplicas": 2}, "spec.minReplicas: 3 must not exceed spec.maxReplicas (2)"),
        (KUBEAI, {"url": "hf://google/gemma-2b"}, "must use ollama:// exactly when spec.engine is OLlama"),
        (KUBEAI_VLLM, {"url": "s3://bucket/model"}, "needs spec.cacheProfile"),
        (KUBEAI_VLLM, {"url": "ftp://host/model"}, 'spec.url: "ftp://host/model" is not a model URL such as hf://Qwen/Qwen3-8B'),
        (
            "inferenceconfig-iris-inference-config.yaml",
            {"autoDeletePolicy": "Sometimes"},
            'spec.autoDeletePolicy: "Sometimes" is not one of: None, DeleteOnSuccess, DeleteOnCompletion',
        ),
        (
            "inferencerun-iris-run-january.yaml",
            {"timeoutSeconds": 0},
            "spec.timeoutSeconds: 0 is less than the minimum",
        ),
        ("inferencerun-iris-run-january.yaml", {"schedule": "61 * * * *"}, 'spec.schedule: "61 * * * *"'),
        (
            "modelservice-qwen3-8b.yaml",
            {"accelerator": {"type": "tpu-v9"}},
            'spec.accelerator.type: "tpu-v9" is not one',
        ),
    ],
)
def test_documented_invalid_values_are_refused_naming_field_value_and_rule(
    file_name: str, changes: dict[str, Any], expected: str
) -> None:
    messages = errors_of(with_spec(file_name, **changes))
    assert any(expected in message for message in messages), messages


def test_missing_required_fields_are_named() -> None:
    manifest = sample(IM)
    del manifest["spec"]["memory"], manifest["spec"]["backendUrl"]
    assert errors_of(manifest) == ["spec.backendUrl: is required", "spec.memory: is required"]


def test_too_many_files_says_how_many_and_quotes_the_value_clipped() -> None:
    manifest = with_spec(KUBEAI, files=[{"path": f"/f{i}", "content": "x"} for i in range(11)])
    quoted = "[" + ", ".join(f'{{"path": "/f{i}", "content": "x"}}' for i in range(11)) + "]"
    assert errors_of(manifest) == [
        f"spec.files: {quoted[:200]}... (364 characters) has 11 items, more than the maximum 10"
    ]


def test_defaults_from_the_crd_are_applied() -> None:
    manifest = {
        "apiVersion": "inference.eh-ops.io/v1alpha1",
        "kind": "InferenceModel",
        "metadata": {"name": "tiny"},
        "spec": {"modelName": "tiny", "memory": "1Gi", "backendUrl": "http://tiny:8000"},
    }
    spec = validate_manifest(resolve_kind(manifest), manifest)["spec"]
    assert spec["cooldownPeriod"] == "10m"
    assert spec["nodeSelector"] == {"inference-pool": "default"}
    assert spec["maxReplicas"] == 1
    assert spec["dependencies"] == []


def test_kubeai_nested_defaults() -> None:
    manifest = with_spec(KUBEAI_VLLM, loadBalancing={"strategy": "PrefixHash", "prefixHash": {}})
    del manifest["spec"]["targetRequests"]
    manifest["spec"].pop("scaleDownDelaySeconds", None)
    spec = validate_manifest(resolve_kind(manifest), manifest)["spec"]
    assert spec["targetRequests"] == 100
    assert spec["scaleDownDelaySeconds"] == 30
    assert spec["loadBalancing"]["prefixHash"] == {"meanLoadFactor": 125, "replication": 256, "prefixCharLength": 100}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"name": "Bad_Name"}, 'metadata.name: "Bad_Name" must be a lowercase RFC 1123 subdomain'),
        ({}, "metadata.name: is required"),
        ({"name": "ok", "namespace": "Prod"}, 'metadata.namespace: "Prod" must be a lowercase RFC 1123 label'),
        ({"name": "ok", "labels": {"team": "a b"}}, 'metadata.labels.team: "a b" must be a string of at most 63'),
        ({"name": "ok", "labels": {"bad key!": "x"}}, 'metadata.labels.bad key!: "bad key!" must be at most 63'),
        ({"name": "ok", "annotations": {"note": 5}}, "metadata.annotations.note: 5 must be a string"),
    ],
)
def test_metadata_rules(metadata: dict[str, Any], expected: str) -> None:
    manifest = sample(IM)
    manifest["metadata"] = metadata
    assert any(expected in message for message in errors_of(manifest))


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("decode", "nodeSelector"), {"pool": "y" * 64},
         'spec.decode.nodeSelector.pool: "' + "y" * 64 + '" must be a string of at most 63'),
        (("prefill", "nodeSelector"), {"a/b/c": "x"}, "spec.prefill.nodeSelector.a/b/c: "),
        (("decode", "annotations"), {"not a key": "x"}, 'spec.decode.annotations.not a key: "not a key" must be'),
        (("decode", "tolerations"), [{"key": "gpu", "operator": "Equal", "value": "v" * 64}],
         "spec.decode.tolerations[0].value: "),
        (("prefill", "tolerations"), [{"key": "-gpu", "operator": "Exists"}], "spec.prefill.tolerations[0].key: "),
        (("decode", "tolerations"), [{"operator": "Equal", "value": "x"}],
         "spec.decode.tolerations[0].operator: \"Equal\" must be Exists when key is empty"),
        (("decode", "tolerations"), [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule",
                                      "tolerationSeconds": 5}], "tolerationSeconds: 5 is allowed only with"),
    ],
)
def test_every_map_that_ends_up_in_a_pod_follows_the_label_rules(path, value, expected) -> None:
    """Not only the portal's own Deployment: a ModelService's roles' nodeSelector and annotations
    reach the operator's pods, which the API server would refuse for them."""
    manifest = sample("modelservice-llama-3-70b-pd.yaml")
    manifest["spec"][path[0]][path[1]] = value
    assert any(expected in message for message in errors_of(manifest)), errors_of(manifest)


def test_valid_pod_maps_and_tolerations_pass() -> None:
    manifest = sample("modelservice-llama-3-70b-pd.yaml")
    manifest["spec"]["decode"].update(
        nodeSelector={"example.com/pool": "x" * 63, "zone": ""},
        annotations={"prometheus.io/scrape": "any text at all"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                     {"operator": "Exists"}, {"key": "pool", "value": "gpu-a100", "effect": "NoSchedule"}],
    )
    validate_manifest(resolve_kind(manifest), manifest)


def test_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(ManifestInvalid) as caught:
        resolve_kind({"apiVersion": "v1", "kind": "Pod"})
    assert "is not a mirrored kind; known kinds: InferenceModel (inference.eh-ops.io/v1alpha1)" in str(caught.value)


def test_status_is_not_validated_and_raw_storage_is_kept() -> None:
    manifest = sample("inferenceconfig-iris-inference-config.yaml")
    manifest["spec"]["storage"]["input"] = {"anything": {"deeply": ["nested", 1, True]}}
    manifest["status"] = {"whatever": "the cluster says"}
    validated = validate_manifest(resolve_kind(manifest), manifest)
    assert validated["spec"]["storage"]["input"] == {"anything": {"deeply": ["nested", 1, True]}}
    assert "status" not in validated
