"""A KEDA ScaledObject rendered for a serving model (issue 42, models_app/keda.py): for each serving
kind it targets the Deployment the model owns and reads the portal's desired-replicas gauge, and the
real control plane, with KEDA's own CRDs installed (tools/keda), accepts it in a server-side dry
run; another team's model is 404; bad input and a model KEDA cannot scale are refused, naming the
field, its value and the rule."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from django.test import Client
from kubernetes.client import AppsV1Api, CustomObjectsApi

from accounts.models import NamespaceGrant, Team
from clusters.models import Cluster
from models_app.keda import ScaledObjectRefused, render_scaled_object
from models_app.models import InferenceModel, ServingModel
from runs_app.models import InferenceRun
from tests.accounts.conftest import sample_in, store
from tests.conftest import ALL_KIND_PERMS
from tests.support.keda import BUILD_SCRIPT, SCALED_OBJECTS_CRD, keda_crd_dir

# kind: (URL slug, (minReplicaCount, maxReplicaCount) from the sample's fields, the Deployment that serves)
KINDS = {
    "InferenceModel": ("inferencemodels", (0, 1), "llama-2-70b"),
    "Model": ("kubeai-models", (0, 100), "model-gemma2-2b-cpu"),
    "ModelService": ("modelservices", (1, 2), "qwen3-8b-decode"),
}


@pytest.fixture
def keda_crds(kube) -> None:
    """KEDA's CRDs are in the control plane (installed with platform/crds by the session)."""
    if keda_crd_dir() is None:
        reason = "KEDA's CRDs are taken from its Go module and need the Go toolchain: install Go"
        if os.environ.get("CI"):
            pytest.fail(f"CI must check ScaledObjects against KEDA's CRDs: {reason}")
        pytest.skip(reason)
    extensions = kubernetes.client.ApiextensionsV1Api(kube.api_client)
    assert extensions.read_custom_resource_definition(SCALED_OBJECTS_CRD).spec.group == "keda.sh"


@pytest.fixture
def members(make_user) -> Any:
    """``members(cluster, namespace)``: a client of the team owning ``namespace`` and one of a team
    owning another namespace."""

    def make(cluster: Cluster, namespace: str) -> tuple[Client, Client]:
        mine, theirs = Team.objects.create(name="mine"), Team.objects.create(name="theirs")
        NamespaceGrant.objects.create(team=mine, cluster=cluster, namespace=namespace)
        NamespaceGrant.objects.create(team=theirs, cluster=cluster, namespace="elsewhere")
        member, other = Client(), Client()
        member.force_login(make_user("member", perms=ALL_KIND_PERMS, teams=[mine]))
        other.force_login(make_user("other", perms=ALL_KIND_PERMS, teams=[theirs]))
        return member, other

    return make


def deploy_as_operator(kube, owner: dict[str, Any], name: str, labels: dict[str, str] | None = None) -> None:
    """A Deployment the model's operator made: owned by the model (at 0 replicas: no pods needed)."""
    labels = {"app": name, **(labels or {})}
    AppsV1Api(kube.api_client).create_namespaced_deployment(kube.namespace, {
        "metadata": {"name": name, "labels": labels, "ownerReferences": [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "server", "image": "engine"}]}}},
    })  # fmt: skip


def dry_run_create(kube, scaled_object: dict[str, Any]) -> dict[str, Any]:
    return CustomObjectsApi(kube.api_client).create_namespaced_custom_object(
        "keda.sh", "v1alpha1", kube.namespace, "scaledobjects", scaled_object, dry_run="All")


def keda_url(slug: str, pk: int, query: str = "") -> str:
    return f"/api/{slug}/{pk}/keda-scaledobject/{query}"


@pytest.mark.parametrize("kind", KINDS)
def test_the_rendered_scaledobject_passes_a_server_side_dry_run_against_kedas_crd(
    kube, keda_crds, transactional_db, members, kind
) -> None:
    slug, (low, high), deployment = KINDS[kind]
    cluster = kube.register()
    member, other = members(cluster, kube.namespace)
    written = kube.write(sample_in(kind, kube.namespace))
    kube.sync()
    row = next(m for m in ServingModel.__subclasses__() if m.kube.kind == kind).objects.get(cluster=cluster)

    answer = member.get(keda_url(slug, row.pk))  # nothing to scale yet: its operator has not deployed it
    assert answer.status_code == 409, answer.content
    assert answer.json() == {"spec.scaleTargetRef": [
        f"spec.scaleTargetRef: no Deployment owned by {kind} {row.name} in namespace {kube.namespace} "
        "(its operator has not deployed it yet)"]}  # fmt: skip

    if kind == "ModelService":  # llm-d's two roles: the decode pods are the ones that serve
        deploy_as_operator(kube, written, f"{row.name}-prefill", {"llm-d.ai/role": "prefill"})
        deploy_as_operator(kube, written, deployment, {"llm-d.ai/role": "decode"})
    elif kind == "InferenceModel":  # labelled as its controller labels it (models_app.controller.deployment_labels)
        deploy_as_operator(kube, written, deployment, {"app.kubernetes.io/name": row.name})
    else:
        deploy_as_operator(kube, written, deployment)
    deploy_as_operator(kube, {**written, "metadata": {**written["metadata"], "name": "other", "uid": "0"}}, "not-its")

    answer = member.get(keda_url(slug, row.pk))
    assert answer.status_code == 200, answer.content
    scaled_object = answer.json()
    spec = scaled_object["spec"]
    assert scaled_object["metadata"] == {"name": row.name, "namespace": kube.namespace}
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (low, high)
    trigger = spec["triggers"][0]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["query"] == (
        f'max(inference_portal_model_desired_replicas{{cluster="test",namespace="{kube.namespace}",'
        f'kind="{kind}",name="{row.name}"}})')  # fmt: skip
    assert trigger["metadata"]["serverAddress"] == "http://prometheus-operated.monitoring.svc:9090"

    accepted = dry_run_create(kube, scaled_object)  # KEDA's schema, on the real API server
    assert accepted["spec"]["scaleTargetRef"]["name"] == deployment
    assert kube.list("keda.sh/v1alpha1", "ScaledObject") == []  # a dry run stores nothing

    as_yaml = member.get(keda_url(slug, row.pk, "?output=yaml&maxReplicas=7"))
    assert as_yaml.status_code == 200 and as_yaml["Content-Type"] == "application/yaml"
    assert as_yaml["Content-Disposition"] == f'attachment; filename="{row.name}-scaledobject.yaml"'
    from_yaml = yaml.safe_load(as_yaml.content)
    assert from_yaml == {**scaled_object, "spec": {**spec, "maxReplicaCount": 7}}
    dry_run_create(kube, from_yaml)

    assert other.get(keda_url(slug, row.pk)).status_code == 404  # another team's model: not there for them


def test_where_the_portal_controls_an_inferencemodel_its_own_deployment_is_the_target(
    kube, keda_crds, transactional_db, members
) -> None:
    """The Deployment the portal's InferenceModel controller makes (models_app.controller) is found
    as an operator's is: by its owner reference, within its controller's labels."""
    kube.name = "managed"
    cluster = kube.register(managed_kinds=["InferenceModel"])
    member, _ = members(cluster, kube.namespace)
    kube.write(sample_in("InferenceModel", kube.namespace, "llama"))
    kube.sync()
    assert kube.get("apps/v1", "Deployment", "llama") is not None
    row = InferenceModel.objects.get(cluster=cluster, name="llama")
    answer = member.get(keda_url("inferencemodels", row.pk))
    assert answer.status_code == 200, answer.content
    assert answer.json()["spec"]["scaleTargetRef"]["name"] == "llama"
    assert 'cluster="managed"' in answer.json()["spec"]["triggers"][0]["metadata"]["query"]
    dry_run_create(kube, answer.json())


def test_the_dry_run_refuses_what_kedas_crd_refuses(kube, keda_crds, transactional_db) -> None:
    """The check above can fail: KEDA's schema is there and enforced."""
    broken = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "broken"},
              "spec": {"scaleTargetRef": {"name": "x"}, "minReplicaCount": "none", "triggers": [{"type": ""}]}}
    with pytest.raises(kubernetes.client.ApiException) as refused:
        dry_run_create(kube, broken)
    assert refused.value.status == 422
    assert "spec.minReplicaCount" in refused.value.body and "spec.triggers[0].type" in refused.value.body


@pytest.mark.parametrize(("query", "field", "message"), [
    ("?output=xml", "output", 'output: "xml" must be one of json, yaml'),
    ("?maxReplicas=0", "maxReplicas", 'maxReplicas: "0" must be a whole number from 1 to 2147483647'),
    ("?minReplicas=-1", "minReplicas", 'minReplicas: "-1" must be a whole number from 0 to 2147483647'),
    ("?minReplicas=two", "minReplicas", 'minReplicas: "two" must be a whole number from 0 to 2147483647'),
    ("?minReplicas=4&maxReplicas=2", "minReplicas", "minReplicas: 4 must not exceed the maximum (maxReplicas = 2)"),
    ("?minReplicas=4", "minReplicas", "minReplicas: 4 must not exceed the maximum (spec.maxReplicas = 3)"),
])  # fmt: skip
def test_bad_input_is_refused_naming_the_field_its_value_and_the_rule(make_user, query, field, message) -> None:
    cluster = Cluster.objects.create(name="snapshot", auth_method=Cluster.AuthMethod.SNAPSHOT)
    model = store(cluster, sample_in("Model", "default", "llama-3"))
    model.spec["maxReplicas"] = 3
    model.save()
    client = Client()
    client.force_login(make_user("member", perms=ALL_KIND_PERMS))
    answer = client.get(keda_url("kubeai-models", model.pk, query))
    assert answer.status_code == 400, answer.content
    assert answer.json() == {field: [message]}


def test_an_unknown_kind_is_refused(make_user) -> None:
    """Through the API an unknown kind is a path no route matches (404, JSON); handed to the
    renderer, an object of a kind that serves nothing is a 400 naming the kind."""
    cluster = Cluster.objects.create(name="snapshot", auth_method=Cluster.AuthMethod.SNAPSHOT)
    run = store(cluster, sample_in("InferenceRun", "default"))
    client = Client()
    client.force_login(make_user("member", perms=ALL_KIND_PERMS))
    answer = client.get(keda_url("inferenceruns", run.pk))
    assert answer.status_code == 404
    assert answer.json() == {"detail": f"no API endpoint or object at /api/inferenceruns/{run.pk}/keda-scaledobject/"}
    with pytest.raises(ScaledObjectRefused) as refused:
        render_scaled_object(InferenceRun.objects.get(pk=run.pk))
    assert refused.value.http_status == 400
    assert str(refused.value) == 'kind: "InferenceRun" is not a serving kind (InferenceModel, Model, ModelService)'


def test_a_model_keda_cannot_scale_is_refused_naming_its_field(make_user) -> None:
    """An InferenceModel held at zero (spec.maxReplicas 0) leaves KEDA nothing to scale: 409, the
    model's field named; a cluster with no API server to read its Deployment from: 409 too."""
    cluster = Cluster.objects.create(name="snapshot", auth_method=Cluster.AuthMethod.SNAPSHOT)
    model = store(cluster, {**sample_in("InferenceModel", "default"), "spec": {
        **sample_in("InferenceModel", "default")["spec"], "maxReplicas": 0}})
    client = Client()
    client.force_login(make_user("member", perms=ALL_KIND_PERMS))
    answer = client.get(keda_url("inferencemodels", model.pk))
    assert answer.status_code == 409
    assert answer.json() == {"spec.maxReplicas": ["spec.maxReplicas: 0 must be at least 1 for KEDA to scale the model"]}
    answer = client.get(keda_url("inferencemodels", model.pk, "?maxReplicas=1"))
    assert answer.status_code == 409
    message = answer.json()["spec.scaleTargetRef"][0]
    assert message.startswith("spec.scaleTargetRef: the model's Deployments could not be listed: cluster snapshot")
    assert "no API server" in message


def test_the_model_page_offers_the_scaledobject(make_user) -> None:
    cluster = Cluster.objects.create(name="snapshot", auth_method=Cluster.AuthMethod.SNAPSHOT)
    model = store(cluster, sample_in("Model", "default"))
    client = Client()
    client.force_login(make_user("member", perms=ALL_KIND_PERMS))
    page = client.get(f"/models/kubeai-models/{model.pk}/").content.decode()
    assert f'href="/api/kubeai-models/{model.pk}/keda-scaledobject/?output=yaml" id="keda-scaledobject"' in page


def test_kedas_crds_are_taken_once_from_the_pinned_module_and_need_go_only_then(tmp_path: Path) -> None:
    """tools/keda/build.sh: exit 2, saying so, with no Go and nothing cached; with Go, the module's
    config/crd/bases copied into a folder named by go.sum's hash (printed); then served from there,
    Go or not."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain to take KEDA's CRDs with")
    no_go = {**os.environ, "KEDA_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    first = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=no_go)
    assert first.returncode == 2 and "go not found: install the Go toolchain" in first.stderr
    with_go = {**no_go, "PATH": f"{Path(go).parent}:/usr/bin:/bin"}
    taken = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=with_go)
    assert taken.returncode == 0, taken.stderr
    folder = Path(taken.stdout.strip())
    assert folder.parent == tmp_path and "taking KEDA's CRDs into" in taken.stderr
    scaled_objects = yaml.safe_load((folder / "keda.sh_scaledobjects.yaml").read_text())
    assert scaled_objects["metadata"]["name"] == SCALED_OBJECTS_CRD
    again = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=no_go)
    assert (again.returncode, again.stdout.strip(), again.stderr) == (0, str(folder), "")
