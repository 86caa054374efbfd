"""The portal's one validator (platform/crds read by clusters/validation/schemas.py) against the real
kube-apiserver serving the same CRDs: the same defaults, the same unknown-field pruning, and
what one refuses the other refuses."""

from __future__ import annotations

import copy

import kubernetes
import pytest

from clusters.kinds import model_for
from clusters.validation.schemas import default_manifest, schema_errors
from tests.conftest import load_samples

SAMPLES = [(name, manifest) for name, manifest in load_samples() if model_for(manifest["apiVersion"], manifest["kind"])]


def create(kube, manifest: dict, field_validation: str = "Strict") -> dict:
    info = model_for(manifest["apiVersion"], manifest["kind"]).kube
    body = copy.deepcopy(manifest)
    body.pop("status", None)
    body["metadata"] = {"name": body["metadata"]["name"], "namespace": kube.namespace}
    return kube.custom.create_namespaced_custom_object(
        info.group, info.version, kube.namespace, info.plural, body, field_validation=field_validation
    )


@pytest.mark.parametrize(("file_name", "manifest"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_the_server_defaults_every_sample_as_the_portal_does(kube, file_name: str, manifest: dict) -> None:
    info = model_for(manifest["apiVersion"], manifest["kind"]).kube
    stored = create(kube, manifest)
    assert stored["spec"] == default_manifest(info, manifest)["spec"]


def test_unknown_fields_are_refused_by_both_and_pruned_by_the_server_when_lenient(kube) -> None:
    manifest = copy.deepcopy(SAMPLES[0][1])
    manifest["spec"]["bogusField"] = 1
    info = model_for(manifest["apiVersion"], manifest["kind"]).kube
    assert [error.path for error in schema_errors(info, default_manifest(info, manifest))] == ["spec.bogusField"]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        create(kube, manifest)
    assert refused.value.status == 400 and "bogusField" in refused.value.body  # strict field validation
    pruned = create(kube, manifest, field_validation="Ignore")
    assert "bogusField" not in pruned["spec"]


@pytest.mark.parametrize(
    ("file_name", "path", "value"),
    [
        ("inferencemodel-mistral-7b.yaml", ("memory",), "16GB"),
        ("inferencemodel-mistral-7b.yaml", ("cooldownPeriod",), "soon"),
        ("model-gemma2-2b-cpu.yaml", ("engine",), "TensorRT"),
        ("inferenceconfig-iris-inference-config.yaml", ("autoDeletePolicy",), "Sometimes"),
    ],
)
def test_what_the_portal_refuses_the_server_refuses(kube, file_name: str, path: tuple[str, ...], value) -> None:
    manifest = copy.deepcopy(dict(SAMPLES)[file_name])
    target = manifest["spec"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    info = model_for(manifest["apiVersion"], manifest["kind"]).kube
    assert schema_errors(info, default_manifest(info, manifest)), "the portal should refuse it"
    with pytest.raises(kubernetes.client.ApiException) as refused:
        create(kube, manifest)
    assert refused.value.status == 422
