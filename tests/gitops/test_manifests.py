"""The manifest written to Git: the object as the team edited it, nothing the cluster, the
controller or the GitOps engine fills in; blob shas as Git computes them; drift field by field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from django.conf import settings

from clusters.validation.schemas import openapi_schema
from gitops.manifests import blob_sha, cleaned, differences, git_manifest, parse, render, unified_diff
from models_app.models import InferenceModel, KubeAIModel

SAMPLES = Path(settings.SAMPLES_DIR)


def test_the_file_holds_what_was_decided_only() -> None:
    document = {
        "spec": {"modelName": "mistral", "memory": "16Gi", "cooldownPeriod": "10m"},
        "labels": {"team": "nlp", "kustomize.toolkit.fluxcd.io/name": "apps"},
        "annotations": {
            "inference.eh-ops.io/last-request-time": "2026-11-29T08:00:00Z",
            "owner": "nlp",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
        },
    }
    manifest = git_manifest(InferenceModel, document, "nlp", "mistral")
    assert manifest["metadata"] == {
        "name": "mistral", "namespace": "nlp", "labels": {"team": "nlp"}, "annotations": {"owner": "nlp"},
    }  # fmt: skip
    assert manifest["apiVersion"] == "inference.eh-ops.io/v1alpha1" and manifest["kind"] == "InferenceModel"
    assert "status" not in manifest and "uid" not in manifest["metadata"]


def test_values_equal_to_the_crd_default_are_left_to_the_api_server() -> None:
    schema_default = _first_spec_default(InferenceModel)
    name, value = schema_default
    manifest = git_manifest(InferenceModel, {"spec": {name: value, "memory": "16Gi"}}, "nlp", "m")
    assert name not in manifest["spec"] and manifest["spec"]["memory"] == "16Gi"


def test_replicas_kubeai_scales_stay_out_unless_autoscaling_is_disabled() -> None:
    scaled = git_manifest(KubeAIModel, {"spec": {"url": "hf://x", "replicas": 3}}, "nlp", "m")
    pinned = {"spec": {"url": "hf://x", "replicas": 3, "autoscalingDisabled": True}}
    fixed = git_manifest(KubeAIModel, pinned, "nlp", "m")
    assert "replicas" not in scaled["spec"] and fixed["spec"]["replicas"] == 3


def test_a_cluster_object_read_back_cleans_to_the_file_written() -> None:
    sample = yaml.safe_load((SAMPLES / "inferencemodel-mistral-7b.yaml").read_text())
    namespace, name = sample["metadata"].get("namespace", "default"), sample["metadata"]["name"]
    written = git_manifest(InferenceModel, {"spec": sample["spec"]}, namespace, name)
    as_applied = {
        **written,
        "metadata": {**written["metadata"], "uid": "u-1", "resourceVersion": "42", "generation": 2,
                     "creationTimestamp": "2026-11-29T08:00:00Z",
                     "managedFields": [{"manager": "kustomize-controller"}],
                     "labels": {"kustomize.toolkit.fluxcd.io/name": "apps"}},
        "status": {"ready": True},
    }  # fmt: skip
    assert cleaned(InferenceModel, as_applied, namespace, name) == written
    assert parse(render(written)) == written


def test_drift_names_each_field_with_both_values() -> None:
    git = {"metadata": {"name": "m", "namespace": "nlp"}, "spec": {"memory": "16Gi", "modelName": "a"}}
    cluster = {"metadata": {"name": "m", "namespace": "nlp", "labels": {"x": "y"}},
               "spec": {"memory": "24Gi", "modelName": "a"}}  # fmt: skip
    assert differences(InferenceModel, git, cluster) == [
        {"path": "metadata.labels", "git": None, "cluster": {"x": "y"}},
        {"path": "spec.memory", "git": "16Gi", "cluster": "24Gi"},
    ]


def test_blob_sha_is_gits_own(tmp_path: Path) -> None:
    text = render({"apiVersion": "v1", "kind": "X", "metadata": {"name": "é"}})
    git = subprocess.run(["git", "hash-object", "--stdin"], input=text.encode(), capture_output=True, check=True)
    assert blob_sha(text) == git.stdout.decode().strip()


def test_the_diff_shows_a_new_file_and_a_deleted_one() -> None:
    assert unified_diff("a.yaml", "", "x: 1\n").startswith("--- /dev/null\n+++ b/a.yaml")
    assert unified_diff("a.yaml", "x: 1\n", "").splitlines()[:2] == ["--- a/a.yaml", "+++ /dev/null"]


def _first_spec_default(model: type) -> tuple[str, object]:
    properties = openapi_schema(model.kube)["properties"]["spec"]["properties"]
    return next((name, sub["default"]) for name, sub in properties.items() if "default" in sub)
