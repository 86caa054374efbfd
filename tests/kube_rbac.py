"""Wait for RBAC to take effect. kube-apiserver's RBAC authorizer reads Roles and bindings from an
informer cache, so a request made right after a binding is created can still be refused ("clusterrole
... not found"). Tests that create RBAC objects and then act under them wait here until the
authorizer allows, for every subject of every binding, one request of each rule of its role: asked
through SubjectAccessReview, the same decision the request itself would get."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kubernetes

from tests.clusters.conftest import wait_for

SERVICE_ACCOUNT_GROUPS = ("system:serviceaccounts", "system:authenticated")


def _identity(subject: dict[str, Any]) -> dict[str, Any]:
    """The user and groups an authenticated request of ``subject`` carries."""
    if subject["kind"] == "ServiceAccount":
        namespace = subject["namespace"]
        return {
            "user": f"system:serviceaccount:{namespace}:{subject['name']}",
            "groups": [*SERVICE_ACCOUNT_GROUPS, f"system:serviceaccounts:{namespace}"],
        }
    if subject["kind"] == "Group":
        return {"user": "rbac-probe", "groups": [subject["name"]]}
    return {"user": subject["name"], "groups": ["system:authenticated"]}


def _one_request_of(rule: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """A request ``rule`` allows: its first verb on its first resource (or URL); wildcards made concrete."""
    verb = next((v for v in rule["verbs"] if v != "*"), "get")
    if rule.get("nonResourceURLs"):
        return {"nonResourceAttributes": {"path": rule["nonResourceURLs"][0].rstrip("*"), "verb": verb}}
    resource, _, subresource = next((r for r in rule["resources"] if r != "*"), "pods").partition("/")
    attributes = {"verb": verb, "group": next((g for g in rule.get("apiGroups", [""]) if g != "*"), ""),
                  "resource": resource, "subresource": subresource or None, "namespace": namespace,
                  "name": (rule.get("resourceNames") or [None])[0]}  # fmt: skip
    return {"resourceAttributes": {k: v for k, v in attributes.items() if v}}


def wait_until_rbac_applies(api_client: kubernetes.client.ApiClient, documents: Iterable[dict[str, Any]]) -> None:
    """Block until each binding among ``documents`` (with its role, also among them) is in force."""
    documents = list(documents)
    roles = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")): d for d in documents
             if d["kind"] in ("Role", "ClusterRole")}  # fmt: skip
    authorization = kubernetes.client.AuthorizationV1Api(api_client)
    reviews = []
    for binding in (d for d in documents if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], ref["name"], namespace if ref["kind"] == "Role" else None))
        assert role is not None, f"{binding['kind']} {binding['metadata']['name']}: its {ref['kind']} is not given"
        for subject in binding.get("subjects") or []:
            for rule in role.get("rules") or []:
                reviews.append({"spec": {**_identity(subject), **_one_request_of(rule, namespace)}})

    def all_allowed() -> bool:
        return all(authorization.create_subject_access_review(r).status.allowed for r in reviews)

    wait_for(all_allowed, timeout=60, message=f"the RBAC authorizer to allow {len(reviews)} bound rules")
