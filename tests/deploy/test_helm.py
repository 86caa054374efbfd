"""platform/helm/inference-portal: ``helm template`` (Helm built from its Go module) renders the same
objects as the kustomize base, every one is accepted by the real kube-apiserver (server-side dry
run), and the portal works under the chart's own ServiceAccount and managed-namespace Role."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import kubernetes
import yaml

from clusters.kube.client import ClusterGateway
from clusters.models import Cluster
from clusters.sync.leader import LeaseElector
from devstack.control_plane import NODE_POOLS
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import sample_manifest, wait_for
from tests.deploy.conftest import (
    CHART_DIR,
    LEASE_NAME,
    POLICY_KINDS,
    apply,
    helm_template,
    managed_namespace,
    rendered,
    service_account_token,
)

SAME_AS_BASE = {"namespace": {"create": True}, "managedNamespaces": ["team-a"]}
# what the chart adds to each container: the image's tag and pull policy, the URLs by reference
CHART_ONLY_CONTAINER_FIELDS = {"image", "imagePullPolicy", "env"}


def key(document: dict[str, Any]) -> tuple[str, str, str]:
    return document["kind"], document["metadata"]["name"], document["metadata"].get("namespace", "")


def pod_spec(document: dict[str, Any]) -> dict[str, Any]:
    spec = document["spec"]["template"]["spec"]
    containers = [{k: v for k, v in c.items() if k not in CHART_ONLY_CONTAINER_FIELDS} for c in spec["containers"]]
    return {**spec, "containers": containers}


def test_the_chart_renders_the_objects_of_the_kustomize_base(helm) -> None:
    base = {key(d): d for d in rendered() + managed_namespace("team-a")}
    chart = {key(d): d for d in helm_template(helm, SAME_AS_BASE)}
    assert set(chart) == set(base)
    for name, document in chart.items():
        if "rules" in document:
            assert document["rules"] == base[name]["rules"], name
        if "subjects" in document:
            assert (document["subjects"], document["roleRef"]) == (base[name]["subjects"], base[name]["roleRef"])
        if document["kind"] in ("Deployment", "Job"):
            assert pod_spec(document) == pod_spec(base[name]), name
            assert document["spec"].get("replicas") == base[name]["spec"].get("replicas"), name
        if document["kind"] in POLICY_KINDS:  # the pod-template policy, one rule set in both
            assert document["spec"] == base[name]["spec"], name
        if document["kind"] in ("Service", "ConfigMap", "Namespace"):
            assert document.get("spec") == base[name].get("spec") and document.get("data") == base[name].get("data")
            assert base[name]["metadata"]["labels"].items() <= document["metadata"]["labels"].items(), name


def test_values_set_image_urls_by_reference_ingress_and_service_monitor(helm) -> None:
    values = {
        "image": {"repository": "registry.example/inference-portal", "tag": "1.2.3"},
        "replicas": {"web": 4},
        "existingSecret": "portal-secrets",
        "database": {"secretKeyRef": {"name": "db-credentials", "key": "url"}},
        "redis": {"url": "redis://redis.cache.svc:6379/0"},
        "resources": {"web": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        "ingress": {"enabled": True, "className": "nginx", "host": "portal.example", "gatewayHost": "llm.example",
                    "tlsSecretName": "portal-tls"},
        "serviceMonitor": {"enabled": True},
    }  # fmt: skip
    documents = {key(d): d for d in helm_template(helm, values)}
    web = documents["Deployment", "inference-portal-web", "inference-portal"]
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert web["spec"]["replicas"] == 4 and container["image"] == "registry.example/inference-portal:1.2.3"
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}  # merged over the defaults
    assert {"secretRef": {"name": "portal-secrets"}} in container["envFrom"]
    env = {e["name"]: e for e in container["env"]}
    assert env["DATABASE_URL"]["valueFrom"] == {"secretKeyRef": {"name": "db-credentials", "key": "url"}}
    assert env["CELERY_BROKER_URL"]["value"] == "redis://redis.cache.svc:6379/0"
    config = documents["ConfigMap", "inference-portal", "inference-portal"]["data"]
    assert "portal.example" in config["ALLOWED_HOSTS"]
    assert config["GATEWAY_PUBLIC_URL"] == "https://llm.example"  # the snippets name the gateway's own host
    ingress = documents["Ingress", "inference-portal", "inference-portal"]["spec"]
    backends = {r["host"]: r["http"]["paths"][0]["backend"]["service"]["name"] for r in ingress["rules"]}
    assert backends == {"portal.example": "inference-portal", "llm.example": "inference-gateway"}
    assert ingress["tls"] == [{"secretName": "portal-tls", "hosts": ["portal.example", "llm.example"]}]
    monitor = documents["ServiceMonitor", "inference-portal", "inference-portal"]["spec"]
    assert monitor["endpoints"][0]["authorization"]["credentials"] == {"name": "portal-secrets", "key": "METRICS_TOKEN"}
    assert monitor["selector"]["matchExpressions"][0]["values"] == ["web", "gateway"]


def test_the_snippets_gateway_url_is_the_gateway_service_unless_exposed_or_set(helm) -> None:
    config = ("ConfigMap", "inference-portal", "llm")

    def url(values: dict[str, Any]) -> str:
        return {key(d): d for d in helm_template(helm, values, namespace="llm")}[config]["data"]["GATEWAY_PUBLIC_URL"]

    assert url({}) == "http://inference-gateway.llm.svc"
    assert url({"ingress": {"enabled": True, "host": "portal.example", "gatewayHost": "llm.example"}}) == \
        "http://llm.example"  # no TLS secret: plain HTTP
    assert url({"settings": {"GATEWAY_PUBLIC_URL": "https://api.example/llm"}}) == "https://api.example/llm"


def test_trusted_proxies_default_to_the_ingress_pod_range_and_can_be_set(helm) -> None:
    """Failed logins count per client address only with trusted proxies (accounts/lockout.py): the
    chart and the base trust the common pod networks by default; a value replaces them."""
    config = ("ConfigMap", "inference-portal", "inference-portal")
    default = {key(d): d for d in helm_template(helm, {})}[config]["data"]["TRUSTED_PROXIES"]
    base = {key(d): d for d in rendered()}[config]["data"]["TRUSTED_PROXIES"]
    assert default == base == "10.244.0.0/16,10.42.0.0/16"
    mine = {key(d): d for d in helm_template(helm, {"trustedProxies": ["100.64.0.0/10"]})}[config]
    assert mine["data"]["TRUSTED_PROXIES"] == "100.64.0.0/10"
    none = {key(d): d for d in helm_template(helm, {"trustedProxies": []})}[config]
    assert none["data"]["TRUSTED_PROXIES"] == ""


def test_every_object_applies_with_server_side_dry_run(helm, kube, admin_client) -> None:
    values = {**SAME_AS_BASE, "managedNamespaces": [kube.namespace],
              "ingress": {"enabled": True, "host": "portal.example"}}  # fmt: skip
    documents = helm_template(helm, values)
    apply(admin_client, next(d for d in documents if d["kind"] == "Namespace"))  # for real: the rest need it
    for document in documents:
        assert apply(admin_client, document, dry_run=True)["metadata"]["name"] == document["metadata"]["name"]
    assert {"Deployment", "Job", "Ingress", "Role", "RoleBinding", "Lease"} <= {d["kind"] for d in documents}


def test_the_portal_works_under_the_charts_service_account(helm, kube, control_plane, admin_client, transactional_db):
    documents = helm_template(helm, {"managedNamespaces": [kube.namespace]}, release="chart")
    token = service_account_token(admin_client, documents, "chart-inference-portal")
    kube.name = "chart-sa"
    cluster = Cluster.objects.create(
        name=kube.name, auth_method=Cluster.AuthMethod.TOKEN, server_url=control_plane.url, bearer_token=token,
        ca_cert=control_plane.ca_pem, namespaces=[kube.namespace], managed_kinds=["InferenceModel"],
    )  # fmt: skip
    assert refresh_node_pools(cluster).pools == len(NODE_POOLS)
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    out = kube.sync()  # the mirrored kinds listed, the model reconciled: status, finalizer, Deployment
    assert "error" not in out, out
    assert kube.get("apps/v1", "Deployment", "llama-2-7b")["metadata"]["ownerReferences"][0]["blockOwnerDeletion"]
    gateway = ClusterGateway(cluster)
    try:
        elector = LeaseElector(gateway, kube.namespace, "chart-check")
        assert elector.name == LEASE_NAME and elector.try_acquire_or_renew()  # the chart's Lease, by name
    finally:
        gateway.close()


def _left_of(api_client, release: str, kinds: set[tuple[str, str]], namespaces: list[str]) -> list[str]:
    """Objects of ``kinds`` (apiVersion, kind) labelled with the release, in ``namespaces`` or cluster-wide."""
    dynamic = kubernetes.dynamic.DynamicClient(api_client)
    left = []
    for api_version, kind in sorted(kinds):
        resource = dynamic.resources.get(api_version=api_version, kind=kind)
        for namespace in namespaces if resource.namespaced else [None]:
            items = resource.get(namespace=namespace, label_selector=f"app.kubernetes.io/instance={release}").items
            left += [f"{kind} {namespace or ''}/{item.metadata.name}" for item in items]
    return left


def test_helm_uninstall_leaves_nothing_of_the_chart_behind(helm, kube, control_plane, admin_client) -> None:
    """A real ``helm install`` (its post-install migrate hook run to completion by kwok) and
    ``helm uninstall``: no object of the release is left, the migrate hook's Job included (Helm never
    deletes hooks on uninstall: the Job deletes itself once it succeeded). Only the managed Namespace
    stays, by ``helm.sh/resource-policy: keep``: it holds the teams' objects."""
    release, namespace = f"u{kube.namespace[-8:]}", f"{kube.namespace}-portal"
    values = {"managedNamespaces": [kube.namespace], "ingress": {"enabled": True, "host": "portal.example"}}
    kinds = {(d["apiVersion"], d["kind"]) for d in helm_template(helm, values, release, namespace)} | {
        ("batch/v1", "Job"), ("v1", "Pod"), ("apps/v1", "ReplicaSet")}  # fmt: skip
    environment = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}

    def helm_run(*arguments: str) -> None:
        result = subprocess.run([str(helm), *arguments], capture_output=True, text=True, env=environment)
        assert result.returncode == 0, result.stderr

    core = kubernetes.client.CoreV1Api(admin_client)
    adopted = {"labels": {"app.kubernetes.io/managed-by": "Helm"},
               "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}}
    core.patch_namespace(kube.namespace, {"metadata": adopted})  # it exists: adopted as docs/deploy.md says
    try:
        helm_run("install", release, str(CHART_DIR), "--namespace", namespace, "--create-namespace",
                 "--values", write_values(control_plane.workdir / f"{release}.yaml", values), "--timeout", "120s")
        assert _left_of(admin_client, release, {("batch/v1", "Job")}, [namespace]) == []  # the hook, gone once done
        installed = _left_of(admin_client, release, kinds, [namespace, kube.namespace])
        assert any(k.startswith("ValidatingAdmissionPolicy ") for k in installed), installed
        assert any(k.startswith("Deployment ") for k in installed), installed
        helm_run("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "120s")
        left = lambda: [k for k in _left_of(admin_client, release, kinds, [namespace, kube.namespace])  # noqa: E731
                        if k != f"Namespace /{kube.namespace}"]  # fmt: skip
        wait_for(lambda: not left(), timeout=60, message="every object of the release to go")
        assert core.read_namespace(kube.namespace).metadata.labels["pod-security.kubernetes.io/enforce"] == "baseline"
    finally:
        if namespace in {n.metadata.name for n in core.list_namespace().items}:
            core.delete_namespace(namespace)


def write_values(path, values: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(values))
    return str(path)
