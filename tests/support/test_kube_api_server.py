"""The test API server behaves, through the official client over real HTTP, like the parts of a
real Kubernetes API server the sync depends on (DESIGN.md, "Facts the sync must respect")."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import kmock
import pytest
import urllib3
import yaml
from kubernetes import config as kube_config
from kubernetes.client import (
    ApiClient,
    AppsV1Api,
    BatchV1Api,
    CoordinationV1Api,
    CoreV1Api,
    CustomObjectsApi,
    V1DeleteOptions,
    V1Preconditions,
)
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.watch import Watch

from tests.support.kube_api_server import REPO_ROOT, KubeApiServer

GROUP, VERSION, PLURAL, KIND = "inference.eh-ops.io", "v1alpha1", "inferencemodels", "InferenceModel"
NS = "default"


def model(name: str, namespace: str = NS, spec: dict[str, Any] | None = None,
          labels: dict[str, str] | None = None, finalizers: list[str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": metadata,
            "spec": spec if spec is not None else {"modelName": name, "memory": "80Gi"}}


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2) as server:
        server.register_crd(GROUP, VERSION, PLURAL, KIND)
        yield server


@pytest.fixture
def api_client(server: KubeApiServer) -> Iterator[ApiClient]:
    with server.make_api_client() as api_client:
        yield api_client


@pytest.fixture
def custom(api_client: ApiClient) -> CustomObjectsApi:
    return CustomObjectsApi(api_client)


def create(custom: CustomObjectsApi, manifest: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = custom.create_namespaced_custom_object(
        GROUP, VERSION, manifest["metadata"]["namespace"], PLURAL, manifest)
    return result


def read(custom: CustomObjectsApi, name: str, namespace: str = NS) -> dict[str, Any]:
    result: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return result


def api_error(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    """Run a call expected to fail; returns the HTTP status and the decoded Status body."""
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


def collect(func: Callable[..., Any], *args: Any, stop_after: int | None = None,
            on_event: Callable[[dict[str, Any]], None] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Events of a ``kubernetes.watch.Watch`` stream, stopping after ``stop_after`` of them."""
    watch = Watch()
    events: list[dict[str, Any]] = []
    for event in watch.stream(func, *args, **kwargs):
        events.append(event)
        if on_event is not None:
            on_event(event)
        if stop_after is not None and len(events) >= stop_after:
            watch.stop()
    return events


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(event["type"], event["raw_object"]["metadata"].get("name", "")) for event in events]


# Writes ----------------------------------------------------------------------------------------

def test_create_answers_201_with_server_fields(custom: CustomObjectsApi) -> None:
    body, status, _ = custom.create_namespaced_custom_object_with_http_info(GROUP, VERSION, NS, PLURAL, model("a"))
    assert status == 201
    metadata = body["metadata"]
    assert metadata["generation"] == 1
    assert metadata["resourceVersion"].isdigit()
    assert re.fullmatch(r"[0-9a-f-]{36}", metadata["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", metadata["creationTimestamp"])
    assert read(custom, "a") == body


def test_create_generates_names_and_refuses_a_resource_version(custom: CustomObjectsApi) -> None:
    manifest = model("")
    manifest["metadata"] = {"generateName": "llama-", "namespace": NS}
    assert re.fullmatch(r"llama-[a-z0-9]{5}", create(custom, manifest)["metadata"]["name"])
    with_version = model("b")
    with_version["metadata"]["resourceVersion"] = "7"
    status, body = api_error(lambda: create(custom, with_version))
    assert (status, body["message"]) == (500, "resourceVersion should not be set on objects to be created")


def test_duplicate_create_is_409_already_exists(custom: CustomObjectsApi) -> None:
    create(custom, model("a"))
    status, body = api_error(lambda: create(custom, model("a")))
    assert status == 409
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == f'{PLURAL}.{GROUP} "a" already exists'
    assert body["details"] == {"name": "a", "group": GROUP, "kind": PLURAL}


def test_resource_version_is_global_monotonic_and_reported_by_lists(
        server: KubeApiServer, custom: CustomObjectsApi, api_client: ApiClient) -> None:
    core = CoreV1Api(api_client)
    first = create(custom, model("a"))["metadata"]["resourceVersion"]
    second = core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}}).metadata.resource_version
    third = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                                  {"spec": {"memory": "40Gi"}})["metadata"]["resourceVersion"]
    assert int(first) < int(second) < int(third)
    listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert listed["metadata"]["resourceVersion"] == third == server.resource_version
    assert listed["kind"] == f"{KIND}List"


def test_stale_put_is_409_with_the_kubernetes_message_and_changes_nothing(custom: CustomObjectsApi) -> None:
    stale = create(custom, model("a"))
    current = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": "1Gi"}})
    stale["spec"]["memory"] = "2Gi"
    status, body = api_error(lambda: custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", stale))
    assert status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        f'Operation cannot be fulfilled on {PLURAL}.{GROUP} "a": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert read(custom, "a") == current


def test_put_without_resource_version_is_422_for_custom_resources_only(
        custom: CustomObjectsApi, api_client: ApiClient) -> None:
    body = create(custom, model("a"))
    del body["metadata"]["resourceVersion"]
    status, error = api_error(lambda: custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", body))
    assert status == 422
    assert error["reason"] == "Invalid"
    assert error["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    assert "must be specified for an update" in error["message"]

    core = CoreV1Api(api_client)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}, "data": {"k": "1"}})
    replaced = core.replace_namespaced_config_map("c", NS, {"metadata": {"name": "c"}, "data": {"k": "2"}})
    assert replaced.data == {"k": "2"}  # built-in kinds allow unconditional updates


def test_put_replaces_the_object(custom: CustomObjectsApi) -> None:
    body = create(custom, model("a", labels={"team": "x"}))
    body["metadata"]["labels"] = {"team": "y"}
    body["spec"] = {"memory": "8Gi"}
    replaced = custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", body)
    assert replaced["spec"] == {"memory": "8Gi"}
    assert replaced["metadata"]["labels"] == {"team": "y"}
    assert replaced["metadata"]["uid"] == body["metadata"]["uid"]
    assert int(replaced["metadata"]["resourceVersion"]) > int(body["metadata"]["resourceVersion"])


def test_generation_is_bumped_only_by_spec_changes(custom: CustomObjectsApi, api_client: ApiClient) -> None:
    def patch(patch_body: dict[str, Any]) -> int:
        result = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", patch_body)
        return int(result["metadata"]["generation"])

    assert create(custom, model("a"))["metadata"]["generation"] == 1
    assert patch({"metadata": {"labels": {"x": "1"}, "annotations": {"y": "2"}}}) == 1
    assert patch({"spec": {"memory": "40Gi"}}) == 2
    assert patch({"spec": {"memory": "40Gi"}}) == 2  # no change: no bump (and no new resourceVersion)
    status = custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "a", {"status": {"phase": "Up"}})
    assert status["metadata"]["generation"] == 2

    core = CoreV1Api(api_client)  # a kind without spec: its data fields count
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}, "data": {"k": "1"}})
    assert created.metadata.generation == 1
    assert core.patch_namespaced_config_map("c", NS, {"metadata": {"labels": {"a": "b"}}}).metadata.generation == 1
    assert core.patch_namespaced_config_map("c", NS, {"data": {"k": "2"}}).metadata.generation == 2


def test_no_op_write_keeps_the_resource_version(custom: CustomObjectsApi) -> None:
    created = create(custom, model("a"))
    same = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": created["spec"]})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_status_subresource_is_separate_from_the_main_resource(custom: CustomObjectsApi) -> None:
    create(custom, {**model("a"), "status": {"phase": "ignored on create"}})
    assert "status" not in read(custom, "a")

    with_status = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": "1Ti"}, "status": {"phase": "Ready"}})
    assert with_status["status"] == {"phase": "Ready"}
    assert with_status["spec"]["memory"] == "80Gi"  # /status writes change only status

    main = custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": "40Gi"}, "status": {"phase": "Hacked"}})
    assert main["status"] == {"phase": "Ready"}  # main writes ignore status
    assert main["spec"]["memory"] == "40Gi"

    main["status"] = {"phase": "Replaced"}
    replaced = custom.replace_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "a", main)
    assert replaced["status"] == {"phase": "Replaced"}
    assert replaced["metadata"]["generation"] == main["metadata"]["generation"]
    assert custom.get_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, "a") == replaced


def test_merge_patch_follows_rfc_7386_and_checks_a_patched_resource_version(custom: CustomObjectsApi) -> None:
    created = create(custom, model("a", spec={"memory": "80Gi", "args": ["a", "b"], "nested": {"x": 1, "y": 2}}))
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": None, "args": ["c"], "nested": {"y": 3, "z": 4}}},
        _content_type="application/merge-patch+json")
    assert patched["spec"] == {"args": ["c"], "nested": {"x": 1, "y": 3, "z": 4}}

    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "spec": {"args": []}}
    status, body = api_error(lambda: custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", stale))
    assert (status, body["reason"]) == (409, "Conflict")
    fresh = {"metadata": {"resourceVersion": patched["metadata"]["resourceVersion"]}, "spec": {"args": []}}
    assert custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", fresh)["spec"]["args"] == []
    status, body = api_error(lambda: custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", fresh, _content_type="application/json"))
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


def test_json_patch_follows_rfc_6902_and_a_failed_test_is_422(custom: CustomObjectsApi) -> None:
    create(custom, model("a", spec={"memory": "80Gi", "args": ["a"]}))
    operations = [{"op": "test", "path": "/spec/memory", "value": "80Gi"},
                  {"op": "replace", "path": "/spec/memory", "value": "40Gi"},
                  {"op": "add", "path": "/spec/args/-", "value": "b"},
                  {"op": "add", "path": "/metadata/labels", "value": {"a~b": "1"}}]
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", operations,
                                                    _content_type="application/json-patch+json")
    assert patched["spec"] == {"memory": "40Gi", "args": ["a", "b"]}
    assert patched["metadata"]["labels"] == {"a~b": "1"}

    failing = [{"op": "test", "path": "/spec/memory", "value": "80Gi"}, {"op": "remove", "path": "/spec/args"}]
    status, body = api_error(lambda: custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", failing, _content_type="application/json-patch+json"))
    assert (status, body["reason"]) == (422, "Invalid")
    assert read(custom, "a") == patched


def test_strategic_merge_patch_is_applied_as_merge_patch(api_client: ApiClient, custom: CustomObjectsApi) -> None:
    create(custom, model("a", spec={"args": ["a", "b"], "memory": "80Gi"}))
    patched_model = custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", {"spec": {"args": ["c"]}},
        _content_type="application/strategic-merge-patch+json")
    assert patched_model["spec"] == {"args": ["c"], "memory": "80Gi"}

    apps = AppsV1Api(api_client)
    apps.create_namespaced_deployment(NS, deployment("web"))
    patched = apps.patch_namespaced_deployment(  # the client sends dict patches as strategic merge
        "web", NS, {"spec": {"replicas": 3, "$retainKeys": ["replicas"]}, "metadata": {"labels": {"a": "b"}}})
    assert patched.spec.replicas == 3
    assert patched.metadata.labels == {"a": "b"}
    assert patched.metadata.generation == 2


def test_server_side_apply_merges_records_managers_and_reports_conflicts(
        custom: CustomObjectsApi, server: KubeApiServer) -> None:
    def apply(manager: str, spec: dict[str, Any], force: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = custom.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, "a", {**model("a"), "spec": spec}, field_manager=manager, force=force,
            _content_type="application/apply-patch+yaml")
        return result

    apply("inference-portal", {"memory": "80Gi", "replicas": 1})  # creates (201: the client returns None)
    assert read(custom, "a")["spec"] == {"memory": "80Gi", "replicas": 1}
    applied = apply("autoscaler", {"replicas": 1})  # same value: shared ownership, no conflict
    managers = {entry["manager"]: entry["operation"] for entry in applied["metadata"]["managedFields"]}
    assert managers == {"inference-portal": "Apply", "autoscaler": "Apply"}

    status, body = api_error(lambda: apply("autoscaler", {"replicas": 5}))
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                          "message": f'conflict with "inference-portal" using {GROUP}/{VERSION}'}]
    forced = apply("autoscaler", {"replicas": 5}, force=True)
    assert forced["spec"] == {"memory": "80Gi", "replicas": 5}
    assert apply("inference-portal", {"memory": "80Gi"})["spec"] == {"memory": "80Gi", "replicas": 5}
    assert server.get_object(GROUP, VERSION, PLURAL, NS, "a")["spec"] == {"memory": "80Gi", "replicas": 5}


# Reads -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("selector", "expected"), [
    ("tier=gold", ["a", "c"]),
    ("tier==gold,team=ml", ["a"]),
    ("tier!=gold", ["b", "d"]),
    ("tier in (silver, bronze)", ["b"]),
    ("tier notin (gold)", ["b", "d"]),
    ("team", ["a", "b"]),
    ("!team", ["c", "d"]),
])
def test_label_selectors(custom: CustomObjectsApi, selector: str, expected: list[str]) -> None:
    create(custom, model("a", labels={"tier": "gold", "team": "ml"}))
    create(custom, model("b", namespace="other", labels={"tier": "silver", "team": "ops"}))
    create(custom, model("c", labels={"tier": "gold"}))
    create(custom, model("d", namespace="other"))
    listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)
    assert [item["metadata"]["name"] for item in listed["items"]] == expected


def test_field_selectors_and_namespaced_lists(custom: CustomObjectsApi) -> None:
    for name, namespace in [("a", NS), ("b", NS), ("a", "other")]:
        create(custom, model(name, namespace=namespace))

    def names(**kwargs: Any) -> list[tuple[str, str]]:
        listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)
        return [(item["metadata"]["namespace"], item["metadata"]["name"]) for item in listed["items"]]

    assert names(field_selector="metadata.name=a") == [(NS, "a"), ("other", "a")]
    assert names(field_selector="metadata.namespace!=other,metadata.name!=a") == [(NS, "b")]
    in_other = custom.list_namespaced_custom_object(GROUP, VERSION, "other", PLURAL)
    assert [item["metadata"]["name"] for item in in_other["items"]] == ["a"]
    status, body = api_error(lambda: names(field_selector="spec.memory=1"))
    assert (status, body["reason"]) == (400, "BadRequest")


def test_paging_with_limit_and_continue_is_a_consistent_snapshot(custom: CustomObjectsApi) -> None:
    for index in range(7):
        create(custom, model(f"m{index}"))
    first = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=3)
    assert [item["metadata"]["name"] for item in first["items"]] == ["m0", "m1", "m2"]
    assert first["metadata"]["remainingItemCount"] == 4
    create(custom, model("m3a"))  # written after the first page: not in this list's later pages
    names, token = [], first["metadata"]["continue"]
    while token:
        page = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=3, _continue=token)
        assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
    assert names == ["m3", "m4", "m5", "m6"]


def test_expired_continue_token_is_410_expired(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    for index in range(3):
        create(custom, model(f"m{index}"))
    token = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=1)["metadata"]["continue"]
    assert server.expire_continue_tokens() == 1
    status, body = api_error(
        lambda: custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=1, _continue=token))
    assert (status, body["reason"]) == (410, "Expired")
    assert "continue parameter is too old" in body["message"]


def test_core_kinds_are_served_through_the_typed_apis(api_client: ApiClient) -> None:
    core, apps, batch, coordination = (CoreV1Api(api_client), AppsV1Api(api_client), BatchV1Api(api_client),
                                       CoordinationV1Api(api_client))
    assert core.create_namespace({"metadata": {"name": "ml"}}).metadata.name == "ml"
    assert core.read_namespace("ml").metadata.namespace is None
    core.create_node({"metadata": {"name": "n1", "labels": {"inference-pool": "default"}},
                      "status": {"allocatable": {"memory": "64Gi"}}})
    node = core.patch_node_status("n1", {"status": {"allocatable": {"memory": "128Gi"}}})
    assert node.status.allocatable == {"memory": "128Gi"}
    core.create_namespaced_config_map("ml", {"metadata": {"name": "contract"}, "data": {"run.json": "{}"}})
    apps.create_namespaced_deployment("ml", deployment("server"))
    template = {"spec": {"containers": [{"name": "runner", "image": "runner:1"}], "restartPolicy": "Never"}}
    batch.create_namespaced_job("ml", {"metadata": {"name": "run"}, "spec": {"template": template}})
    batch.create_namespaced_cron_job("ml", {"metadata": {"name": "nightly"}, "spec": {
        "schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}})
    coordination.create_namespaced_lease("ml", {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "w1"}})

    assert [n.metadata.name for n in core.list_node(label_selector="inference-pool=default").items] == ["n1"]
    assert core.read_namespaced_config_map("contract", "ml").data == {"run.json": "{}"}
    assert apps.list_deployment_for_all_namespaces().items[0].spec.replicas == 1
    assert batch.read_namespaced_job("run", "ml").spec.template.spec.restart_policy == "Never"
    assert batch.list_namespaced_cron_job("ml").items[0].spec.schedule == "0 3 * * *"
    assert coordination.read_namespaced_lease("leader", "ml").spec.holder_identity == "w1"
    assert [ns.metadata.name for ns in core.list_namespace().items] == ["ml"]
    status, body = api_error(lambda: core.read_namespaced_config_map("missing", "ml"))
    assert (status, body["message"], body["details"]) == (
        404, 'configmaps "missing" not found', {"name": "missing", "kind": "configmaps"})


def test_discovery_is_enough_for_the_dynamic_client(server: KubeApiServer, api_client: ApiClient,
                                                    tmp_path: pathlib.Path) -> None:
    server.put_object(model("a"))
    dynamic = DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    models = dynamic.resources.get(api_version=f"{GROUP}/{VERSION}", kind=KIND)
    assert models.namespaced and "status" in models.subresources
    assert [item.metadata.name for item in models.get(namespace=NS).items] == ["a"]
    deployments = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    deployments.create(body=deployment("web"), namespace=NS)
    assert deployments.get(name="web", namespace=NS).spec.replicas == 1
    assert not dynamic.resources.get(api_version="v1", kind="Node").namespaced


def test_crds_register_from_manifests_and_folders(server: KubeApiServer, api_client: ApiClient,
                                                  tmp_path: pathlib.Path) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "models.kubeai.org"},
           "spec": {"group": "kubeai.org", "scope": "Namespaced",
                    "names": {"plural": "models", "singular": "model", "kind": "Model"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"status": {}}}]}}
    cluster_scoped = {**crd, "spec": {**crd["spec"], "group": "example.org", "scope": "Cluster",
                                      "names": {"plural": "pools", "kind": "Pool"}}}
    (tmp_path / "crds.yaml").write_text(yaml.safe_dump_all([crd, {"kind": "ConfigMap"}]))
    (tmp_path / "pool.yml").write_text(yaml.safe_dump(cluster_scoped))
    registered = server.load_crds(tmp_path)
    assert [(r.group, r.plural, r.namespaced) for r in registered] == [
        ("kubeai.org", "models", True), ("example.org", "pools", False)]
    custom = CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object("kubeai.org", "v1", NS, "models", {
        "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "llama"}, "spec": {}})
    custom.create_cluster_custom_object("example.org", "v1", "pools", {
        "apiVersion": "example.org/v1", "kind": "Pool", "metadata": {"name": "gpu"}, "spec": {}})
    assert [o["metadata"]["name"] for o in server.objects("models", group="kubeai.org")] == ["llama"]
    assert "namespace" not in server.get_object("example.org", "v1", "pools", None, "gpu")["metadata"]


# Deletion --------------------------------------------------------------------------------------

def test_finalizers_hold_deletion_until_the_last_is_removed(custom: CustomObjectsApi) -> None:
    created = create(custom, model("a", finalizers=["portal/cleanup", "portal/budget"]))
    since = created["metadata"]["resourceVersion"]

    # The client has no model for 202 and returns None, so read the raw response.
    response = custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", _preload_content=False)
    body = json.loads(response.data)
    assert response.status == 202
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["generation"] == created["metadata"]["generation"]
    assert read(custom, "a")["metadata"]["deletionTimestamp"] == body["metadata"]["deletionTimestamp"]
    status, error = api_error(lambda: custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", {"metadata": {"finalizers": ["portal/cleanup", "portal/budget", "new"]}}))
    assert (status, error["reason"]) == (422, "Invalid")

    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a",
                                          {"metadata": {"finalizers": ["portal/budget"]}})
    last = custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"metadata": {"finalizers": []}})
    assert last["metadata"]["finalizers"] == []
    assert api_error(lambda: read(custom, "a"))[0] == 404

    events = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                     resource_version=since, timeout_seconds=5, stop_after=3)
    assert [event["type"] for event in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert events[0]["raw_object"]["metadata"]["deletionTimestamp"]
    assert events[1]["raw_object"]["metadata"]["finalizers"] == ["portal/budget"]
    assert events[2]["raw_object"]["metadata"]["finalizers"] == []


def test_delete_without_finalizers_removes_at_once(custom: CustomObjectsApi, api_client: ApiClient) -> None:
    create(custom, model("a"))
    body, status, _ = custom.delete_namespaced_custom_object_with_http_info(GROUP, VERSION, NS, PLURAL, "a")
    assert status == 200 and body["metadata"]["name"] == "a"  # custom resources answer the object
    assert api_error(lambda: read(custom, "a"))[0] == 404

    core = CoreV1Api(api_client)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}})
    deleted = core.delete_namespaced_config_map("c", NS)  # built-in kinds answer a Status (client 37: a dict)
    assert (deleted["kind"], deleted["status"]) == ("Status", "Success")
    assert (deleted["details"]["name"], deleted["details"]["kind"]) == ("c", "configmaps")


def test_delete_preconditions_guard_against_deleting_a_newer_object(custom: CustomObjectsApi) -> None:
    old = create(custom, model("a"))
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a")
    new = create(custom, model("a"))

    def delete(uid: str | None = None, resource_version: str | None = None) -> Any:
        options = V1DeleteOptions(preconditions=V1Preconditions(uid=uid, resource_version=resource_version))
        return custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", body=options)

    status, body = api_error(lambda: delete(uid=old["metadata"]["uid"]))
    assert (status, body["reason"]) == (409, "Conflict")
    assert "Precondition failed: UID in precondition" in body["message"]
    status, body = api_error(lambda: delete(resource_version=old["metadata"]["resourceVersion"]))
    assert status == 409 and "Precondition failed: ResourceVersion" in body["message"]
    delete(uid=new["metadata"]["uid"], resource_version=new["metadata"]["resourceVersion"])
    assert api_error(lambda: read(custom, "a"))[0] == 404


# Watch -----------------------------------------------------------------------------------------

def test_watch_replays_from_a_resource_version_in_order(custom: CustomObjectsApi) -> None:
    since = create(custom, model("a"))["metadata"]["resourceVersion"]
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": "1Gi"}})
    create(custom, model("b"))
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "b")
    events = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                     resource_version=since, timeout_seconds=5, stop_after=3)
    assert summary(events) == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b")]
    versions = [int(event["raw_object"]["metadata"]["resourceVersion"]) for event in events]
    assert versions == sorted(versions) and versions[0] > int(since)


def test_watch_without_resource_version_sends_current_objects_then_live_events(
        custom: CustomObjectsApi, server: KubeApiServer) -> None:
    create(custom, model("a"))
    create(custom, model("b", namespace="other"))

    def write_once_caught_up(event: dict[str, Any]) -> None:
        if event["raw_object"]["metadata"]["name"] == "b":
            server.put_object(model("c", namespace="other"))

    events = collect(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                     timeout_seconds=5, stop_after=3, on_event=write_once_caught_up)
    assert summary(events) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]


def test_watch_sends_bookmarks_with_the_current_resource_version(
        custom: CustomObjectsApi, server: KubeApiServer) -> None:
    since = create(custom, model("a"))["metadata"]["resourceVersion"]
    server.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elsewhere"}})
    started = time.monotonic()
    events = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, resource_version=since,
                     allow_watch_bookmarks=True, timeout_seconds=5, stop_after=2)
    assert time.monotonic() - started < 1.5  # the interval is 0.2 s in these tests
    assert [event["raw_object"] for event in events] == [
        {"kind": KIND, "apiVersion": f"{GROUP}/{VERSION}", "metadata": {"resourceVersion": server.resource_version}},
    ] * 2
    assert events[0]["type"] == "BOOKMARK"


def test_watch_ends_at_timeout_seconds(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    started = time.monotonic()
    assert collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                   resource_version=server.resource_version, timeout_seconds=1) == []
    assert 0.9 < time.monotonic() - started < 2.5


def test_watch_from_a_compacted_resource_version_is_410_in_the_stream(
        custom: CustomObjectsApi, server: KubeApiServer) -> None:
    since = create(custom, model("a"))["metadata"]["resourceVersion"]
    create(custom, model("b"))
    assert server.compact() == server.resource_version
    with pytest.raises(ApiException) as caught:
        collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                resource_version=since, timeout_seconds=5)
    assert caught.value.status == 410
    assert "too old resource version" in caught.value.reason

    response = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, watch=True, resource_version=since,
                                                    _preload_content=False)
    assert response.status == 200  # the real server also answers 200 and then an ERROR event
    event = json.loads(response.data.splitlines()[0])
    assert event["type"] == "ERROR"
    assert (event["object"]["kind"], event["object"]["code"], event["object"]["reason"]) == ("Status", 410, "Expired")
    assert collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                   resource_version=server.resource_version, timeout_seconds=1) == []


def test_bounded_watch_history_forgets_the_oldest_half() -> None:
    with KubeApiServer(max_history=4) as server:
        server.register_crd(GROUP, VERSION, PLURAL, KIND)
        versions = [server.put_object(model(f"m{index}"))["metadata"]["resourceVersion"] for index in range(5)]
        with server.make_api_client() as api_client:
            custom = CustomObjectsApi(api_client)
            with pytest.raises(ApiException) as caught:
                collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                        resource_version=versions[0], timeout_seconds=5)
            assert caught.value.status == 410
            events = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                             resource_version=versions[1], timeout_seconds=5, stop_after=3)
            assert summary(events) == [("ADDED", "m2"), ("ADDED", "m3"), ("ADDED", "m4")]


def test_watch_accepts_watch_1_and_named_urls(server: KubeApiServer) -> None:
    server.put_object(model("a"))
    server.put_object(model("b"))
    url = f"{server.url}/apis/{GROUP}/{VERSION}/namespaces/{NS}/{PLURAL}/b?watch=1&timeoutSeconds=1"
    events = [json.loads(line) for line in urllib3.request("GET", url).data.splitlines()]
    assert [(event["type"], event["object"]["metadata"]["name"]) for event in events] == [("ADDED", "b")]


def test_watch_selectors_turn_transitions_into_added_and_deleted(
        custom: CustomObjectsApi, server: KubeApiServer) -> None:
    since = server.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})[
        "metadata"]["resourceVersion"]  # "0" would mean "from the current state", not "from the start"
    create(custom, model("a", labels={"tier": "gold"}))
    create(custom, model("b", labels={"tier": "silver"}))
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"metadata": {"labels": {"tier": "x"}}})
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "b", {"metadata": {"labels": {"tier": "gold"}}})
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "b", {"spec": {"memory": "1Gi"}})
    gold = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, label_selector="tier=gold",
                   resource_version=since, timeout_seconds=5, stop_after=4)
    assert summary(gold) == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "b"), ("MODIFIED", "b")]
    only_b = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                     field_selector="metadata.name=b", resource_version=since, timeout_seconds=5, stop_after=3)
    assert summary(only_b) == [("ADDED", "b"), ("MODIFIED", "b"), ("MODIFIED", "b")]


def test_typed_watch_of_a_core_kind(api_client: ApiClient, server: KubeApiServer) -> None:
    core = CoreV1Api(api_client)
    since = core.create_namespace({"metadata": {"name": NS}}).metadata.resource_version
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    events = collect(core.list_namespaced_config_map, NS, resource_version=since, timeout_seconds=5, stop_after=1)
    assert events[0]["type"] == "ADDED" and events[0]["object"].data == {"k": "v"}


def test_disconnect_watches_drops_open_streams(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    create(custom, model("a"))
    with pytest.raises(urllib3.exceptions.ProtocolError):
        collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                on_event=lambda _: server.disconnect_watches())


def test_graceful_disconnect_lets_the_client_resume_from_its_resource_version(
        custom: CustomObjectsApi, server: KubeApiServer) -> None:
    create(custom, model("a"))
    watches = server.handler[kmock.action.WATCH]

    def react(event: dict[str, Any]) -> None:
        if event["raw_object"]["metadata"]["name"] == "a":
            assert server.disconnect_watches(graceful=True) == 1
            server.put_object(model("b"))  # written while disconnected

    events = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, stop_after=2, on_event=react)
    assert summary(events) == [("ADDED", "a"), ("ADDED", "b")]
    assert len(watches) == 2
    assert watches[1].params["resourceVersion"] == events[0]["raw_object"]["metadata"]["resourceVersion"]


# Faults ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("verb", "status", "reason"), [
    ("create", 409, "Conflict"), ("update", 410, "Expired"), ("patch", 429, "TooManyRequests"),
    ("delete", 500, "InternalError"), ("get", 500, "InternalError"), ("list", 410, "Expired"),
])
def test_injected_faults_answer_without_changing_the_store(
        custom: CustomObjectsApi, server: KubeApiServer, verb: str, status: int, reason: str) -> None:
    current = create(custom, model("a"))
    calls: dict[str, Callable[[], Any]] = {
        "create": lambda: create(custom, model("b")),
        "update": lambda: custom.replace_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, "a", {**current, "spec": {"memory": "1Gi"}}),
        "patch": lambda: custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {}}),
        "delete": lambda: custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a"),
        "get": lambda: read(custom, "a"),
        "list": lambda: custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL),
    }
    version = server.resource_version
    fault = server.inject(verb, PLURAL, status=status)
    got, body = api_error(calls[verb])
    assert (got, body["reason"], body["code"], body["kind"]) == (status, reason, status, "Status")
    assert fault.hits == 1 and fault.remaining == 0
    assert server.resource_version == version
    assert server.objects(PLURAL) == [current]
    calls[verb]()  # consumed: the next request is served


def test_injected_faults_match_name_and_repeat(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    create(custom, model("a"))
    create(custom, model("b"))
    server.inject("get", PLURAL, name="a", status=503, times=2)
    assert read(custom, "b")["metadata"]["name"] == "b"
    assert [api_error(lambda: read(custom, "a"))[0] for _ in range(2)] == [503, 503]
    assert read(custom, "a")["metadata"]["name"] == "a"
    server.inject("*", status=500, times=None)
    assert api_error(lambda: read(custom, "b"))[0] == 500
    server.clear_faults()
    assert read(custom, "b")["metadata"]["name"] == "b"


def test_injected_429_can_carry_retry_after(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    create(custom, model("a"))
    server.inject("patch", PLURAL, status=429, retry_after=3)
    with pytest.raises(ApiException) as caught:  # PATCH is not retried by urllib3, so the 429 surfaces
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {}})
    assert caught.value.headers["Retry-After"] == "3"
    assert json.loads(caught.value.body)["details"]["retryAfterSeconds"] == 3


def test_injected_410_on_watch_is_an_error_event(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    server.inject("watch", PLURAL, status=410)
    with pytest.raises(ApiException) as caught:
        collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                resource_version=server.resource_version, timeout_seconds=5)
    assert caught.value.status == 410


def test_kmock_reactions_answer_without_changing_the_store(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    current = create(custom, model("a"))
    server.handler["patch", kmock.resource(GROUP, VERSION, PLURAL)][:1] << 409
    with pytest.raises(ApiException) as caught:  # a bare status: kmock sends no Status body
        custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": "1Gi"}})
    assert caught.value.status == 409
    assert server.objects(PLURAL) == [current]
    assert custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "a", {"spec": {"memory": "1Gi"}})["spec"]["memory"] == "1Gi"
    server.handler["get", kmock.resource(GROUP, VERSION, PLURAL)] << kmock.KubernetesError(503, "Unavailable", "down")
    status, body = api_error(lambda: read(custom, "a"))
    assert (status, body["reason"], body["message"]) == (503, "Unavailable", "down")


# Test-side access, scale, lifecycle ----------------------------------------------------------------

def test_put_object_acts_as_a_cluster_side_write(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    seeded = server.put_object({**model("a"), "status": {"phase": "Ready"}})
    assert read(custom, "a") == seeded and seeded["status"] == {"phase": "Ready"}
    since = seeded["metadata"]["resourceVersion"]
    changed = server.put_object({**model("a", spec={"memory": "1Gi"}), "status": {"phase": "Ready"}},
                                field_manager="cluster-operator")
    assert changed["metadata"]["uid"] == seeded["metadata"]["uid"]
    assert changed["metadata"]["generation"] == 2
    assert changed["metadata"]["managedFields"][0]["manager"] == "cluster-operator"
    events = collect(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                     resource_version=since, timeout_seconds=5, stop_after=1)
    assert summary(events) == [("MODIFIED", "a")]
    assert server.delete_object(GROUP, VERSION, PLURAL, NS, "a") is None
    assert server.get_object(GROUP, VERSION, PLURAL, NS, "a") is None


def test_ten_thousand_seeded_objects_seed_and_list_fast(custom: CustomObjectsApi, server: KubeApiServer) -> None:
    started = time.monotonic()
    for index in range(10_000):
        server.put_object(model(f"m{index:05}", namespace=f"ns{index % 10}"))
    assert time.monotonic() - started < 2.0
    listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert len(listed["items"]) == 10_000
    pages, token = 0, None
    while True:
        page = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=500, _continue=token)
        pages, token = pages + 1, page["metadata"].get("continue")
        if not token:
            break
    assert pages == 20
    assert time.monotonic() - started < 6.0


def test_request_history_is_bounded() -> None:
    with KubeApiServer(max_requests=10) as server:
        server.register_crd(GROUP, VERSION, PLURAL, KIND)
        with server.make_api_client() as api_client:
            for _ in range(50):
                CustomObjectsApi(api_client).list_cluster_custom_object(GROUP, VERSION, PLURAL)
        assert 10 <= len(server.handler) <= 20


def test_restart_keeps_the_store_and_the_port(server: KubeApiServer, custom: CustomObjectsApi) -> None:
    created = create(custom, model("a"))
    port = server.port
    server.restart()
    assert server.port == port
    assert read(custom, "a") == created


def test_kubeconfig_points_at_the_server(server: KubeApiServer, tmp_path: pathlib.Path) -> None:
    server.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    with kube_config.new_client_from_config(config_file=str(path)) as api_client:
        assert [ns.metadata.name for ns in CoreV1Api(api_client).list_namespace().items] == ["ml"]


def test_entry_point_serves_crds_from_a_folder(tmp_path: pathlib.Path) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "spec": {"group": GROUP, "names": {"plural": PLURAL, "kind": KIND},
                    "versions": [{"name": VERSION, "served": True}]}}
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "tests.support.kube_api_server", "--port", "0", "--crds", str(tmp_path),
         "--kubeconfig", str(kubeconfig)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
        assert lines[0].startswith(f"serving {PLURAL}.{GROUP}/{VERSION}")
        assert "listening on http://127.0.0.1:" in lines[1]
        with kube_config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
            assert CustomObjectsApi(api_client).list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"] == []
    finally:
        process.terminate()
        process.wait(timeout=10)


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": name, "image": f"{name}:1"}]}}}}
