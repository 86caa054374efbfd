"""The manifests of ``platform/deploy`` as ``kubectl apply -k`` sends them, and helpers to apply
them to the session's control plane."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.kube_rbac import wait_until_rbac_applies

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "platform" / "deploy"
# The watcher's Lease as deployed: made and granted by this name only (platform/deploy/config.yaml).
LEASE_NAME = yaml.safe_load((DEPLOY_DIR / "config.yaml").read_text())["data"]["WATCH_LEASE_NAME"]


@pytest.fixture(autouse=True)
def _deployed_lease_name(settings) -> None:
    """The portal as deployed: its watcher takes the Lease the deploy made, by WATCH_LEASE_NAME."""
    settings.WATCH_LEASE_NAME = LEASE_NAME
MANAGED_NAMESPACE_DIR = DEPLOY_DIR / "managed-namespace"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"}  # fmt: skip
POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
FIELD_MANAGER = "inference-portal-tests"


def kustomization(directory: Path = DEPLOY_DIR) -> dict[str, Any]:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def rendered(directory: Path = DEPLOY_DIR, namespace: str | None = None) -> list[dict[str, Any]]:
    """A kustomization rendered as kustomize renders it; ``namespace`` as an overlay's
    ``namespace:`` would set it. Only ``resources`` (files) and ``namespace`` are used: kustomize
    sets the namespace of namespaced objects and the Namespace's name, and a binding's
    ServiceAccount subject follows that account only when the account is one of the resources
    (kustomize's name references; other subjects keep theirs unless named ``default``). Any other
    field fails here, so this reader and kustomize cannot silently part ways."""
    spec = kustomization(directory)
    assert set(spec) <= {"apiVersion", "kind", "namespace", "resources"}, f"kustomize fields not rendered here: {spec}"
    namespace = namespace or spec["namespace"]
    documents = [d for name in spec["resources"] for d in yaml.safe_load_all((directory / name).read_text())]
    accounts = {d["metadata"]["name"] for d in documents if d["kind"] == "ServiceAccount"}
    for document in documents:
        if document["kind"] == "Namespace":
            document["metadata"]["name"] = namespace
        elif document["kind"] not in CLUSTER_SCOPED:
            document["metadata"]["namespace"] = namespace
        for subject in document.get("subjects") or []:
            if subject["kind"] == "ServiceAccount" and (subject["name"] in accounts or subject["name"] == "default"):
                subject["namespace"] = namespace
    return documents


def managed_namespace(namespace: str) -> list[dict[str, Any]]:
    """The Role, RoleBinding and Lease of one managed namespace, as an overlay renders them."""
    return rendered(MANAGED_NAMESPACE_DIR, namespace)


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


RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def service_account_token(
    admin_client: kubernetes.client.ApiClient, documents: list[dict[str, Any]], account: str
) -> str:
    """Apply for real the ServiceAccount, roles, bindings, Leases, managed Namespaces (their Pod
    Security label) and the pod-template admission policy among ``documents``, the RBAC and policy
    objects renamed ``account`` (so tests with different roles never share one; the policy matches
    that account, as an overlay patches it), wait until the authorizer enforces them, then ask the
    TokenRequest API for the account's token, as a pod's projected token is made."""
    core = kubernetes.client.CoreV1Api(admin_client)
    namespace = next(d["metadata"]["namespace"] for d in documents if d["kind"] == "ServiceAccount")
    if namespace not in {n.metadata.name for n in core.list_namespace().items}:
        core.create_namespace({"metadata": {"name": namespace}})
    applied = []
    for document in documents:
        if document["kind"] == "Namespace" and document["metadata"]["name"] != namespace:
            apply(admin_client, document)  # a managed namespace: its Pod Security label
        if document["kind"] not in RBAC_KINDS | POLICY_KINDS | {"Lease"}:
            continue
        document = copy.deepcopy(document)
        if document["kind"] in RBAC_KINDS | POLICY_KINDS:
            document["metadata"]["name"] = account
        if document["kind"] == "ValidatingAdmissionPolicyBinding":
            document["spec"]["policyName"] = account
        if document["kind"] == "ValidatingAdmissionPolicy":
            condition = document["spec"]["matchConditions"][0]
            condition["expression"] = f"request.userInfo.username == 'system:serviceaccount:{namespace}:{account}'"
        if "roleRef" in document:
            document["roleRef"]["name"] = account
        for subject in document.get("subjects") or []:
            subject["name"] = account
        apply(admin_client, document)
        if document["kind"] not in POLICY_KINDS:
            applied.append(document)
    wait_until_rbac_applies(admin_client, applied)
    request = core.create_namespaced_service_account_token(account, namespace, {"spec": {"expirationSeconds": 3600}})
    return request.status.token


HELM_BUILD_SCRIPT = DEPLOY_DIR.parents[1] / "tools" / "helm" / "build.sh"
CHART_DIR = DEPLOY_DIR.parent / "helm" / "inference-portal"


@pytest.fixture(scope="session")
def helm() -> Path:
    """Helm built from its pinned Go module (tools/helm/build.sh, cached by go.sum hash)."""
    result = subprocess.run(["bash", str(HELM_BUILD_SCRIPT)], capture_output=True, text=True)
    if result.returncode == 2:
        reason = "Helm is built from its Go module and needs the Go toolchain: install Go, then `make test-deps`"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run Helm: {reason}")
        pytest.skip(reason)
    assert result.returncode == 0, f"building Helm failed:\n{result.stderr[-4000:]}"
    return Path(result.stdout.strip().splitlines()[-1])


def helm_template(
    helm: Path, values: dict[str, Any], release: str = "inference-portal", namespace: str = "inference-portal"
) -> list[dict[str, Any]]:
    """``helm template`` of the chart with ``values``: the documents it renders, hooks included, with
    the release's namespace on namespaced objects (as ``helm install`` sends them)."""
    result = subprocess.run(
        [str(helm), "template", release, str(CHART_DIR), "--namespace", namespace, "--values", "-"],
        input=yaml.safe_dump(values), capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    for document in documents:
        if document["kind"] not in CLUSTER_SCOPED:
            document["metadata"].setdefault("namespace", namespace)
    return documents
