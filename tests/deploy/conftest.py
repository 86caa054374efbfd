"""The manifests of ``platform/deploy`` as ``kubectl apply -k`` sends them, and helpers to apply
them to the session's control plane."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "platform" / "deploy"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
FIELD_MANAGER = "inference-portal-tests"


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY_DIR / "kustomization.yaml").read_text())


def rendered() -> list[dict[str, Any]]:
    """The base rendered as kustomize renders it. The base uses only ``resources`` and
    ``namespace`` (kustomize sets the namespace of namespaced objects, the Namespace's name and the
    namespace of ServiceAccount subjects); any other field fails here, so this reader and kustomize
    cannot silently part ways."""
    spec = kustomization()
    assert set(spec) <= {"apiVersion", "kind", "namespace", "resources"}, f"kustomize fields not rendered here: {spec}"
    namespace = spec["namespace"]
    documents = []
    for name in spec["resources"]:
        for document in yaml.safe_load_all((DEPLOY_DIR / name).read_text()):
            document = copy.deepcopy(document)
            if document["kind"] == "Namespace":
                document["metadata"]["name"] = namespace
            elif document["kind"] not in CLUSTER_SCOPED:
                document["metadata"]["namespace"] = namespace
            for subject in document.get("subjects") or []:
                if subject["kind"] == "ServiceAccount":
                    subject["namespace"] = namespace
            documents.append(document)
    return documents


def find(kind: str, name: str | None = None) -> dict[str, Any]:
    return next(d for d in rendered() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


def apply(api_client: kubernetes.client.ApiClient, document: dict[str, Any], dry_run: bool = False) -> dict:
    """Server-side apply of one document (what ``kubectl apply --server-side`` sends)."""
    dynamic = kubernetes.dynamic.DynamicClient(api_client)
    resource = dynamic.resources.get(api_version=document["apiVersion"], kind=document["kind"])
    return resource.server_side_apply(
        body=document, namespace=document["metadata"].get("namespace"), field_manager=FIELD_MANAGER,
        force_conflicts=True, dry_run="All" if dry_run else None,
    ).to_dict()  # fmt: skip


@pytest.fixture
def admin_client(control_plane) -> kubernetes.client.ApiClient:
    if control_plane is None:
        pytest.skip("needs the session's control plane (it creates cluster-wide RBAC objects)")
    with control_plane.api_client() as client:
        yield client
