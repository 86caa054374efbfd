"""The what-if planner through its API: closure, placement, fragmentation, suggestions, 400s."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models_app.models import InferenceModel
from tests.scheduler.conftest import GI, NOW, make_model, make_pool


def new_model(name: str, memory: str, pool: str = "gpu", dependencies: list[str] = ()) -> dict:
    return {
        "manifest": {
            "apiVersion": "inference.eh-ops.io/v1alpha1",
            "kind": "InferenceModel",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"modelName": name, "memory": memory, "backendUrl": f"http://{name}:8000",
                     "nodeSelector": {"inference-pool": pool}, "dependencies": list(dependencies)},
        }
    }  # fmt: skip


@pytest.fixture
def client(api_as):
    return api_as()


def post(client, models: list[dict], **extra):
    return client.post("/api/planning/plan/", {"models": models, "now": NOW.isoformat(), **extra}, format="json")


def pool_of(body: dict, name: str) -> dict:
    return next(pool for pool in body["pools"] if pool["name"] == name)


def test_new_model_with_dependency_closure_placed_beside_running_ones(client, cluster, gpu_pool):
    make_model(cluster, "running", "40Gi")
    make_model(cluster, "tokenizer", "4Gi", replicas=0)  # stopped: the plan must start it
    make_model(cluster, "embedder", "2Gi", dependencies=["tokenizer"], replicas=0)

    response = post(client, [new_model("chat", "30Gi", dependencies=["embedder"])])

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fits"] is True
    assert [(m["model"], m["origin"]) for m in body["models"]] == [
        ("InferenceModel default/tokenizer", "dependency"),
        ("InferenceModel default/embedder", "dependency"),
        ("InferenceModel default/chat", "new"),
    ]
    gpu = pool_of(body, "gpu")
    assert [[m["model"].split("/")[1] for m in n["models"]] for n in gpu["nodes"]] == [
        ["running", "tokenizer", "embedder"],
        ["chat"],
    ]
    assert gpu["placed_bytes"] == 76 * GI and gpu["budget_free_bytes"] == 24 * GI
    assert gpu["largest_fit"] == "24Gi"  # node 2 has 34Gi free, the budget 24Gi


def test_edited_existing_model_replaces_its_running_self(client, cluster, gpu_pool):
    running = make_model(cluster, "big", "60Gi")
    response = post(client, [{"kind": "InferenceModel", "id": running.pk, "spec": {"memory": "20Gi"}}])
    body = response.json()
    assert body["models"] == [{"model": "InferenceModel default/big", "origin": "edited", "pool": "gpu",
                               "memory_bytes": 20 * GI, "gpus": 0}]  # fmt: skip
    assert pool_of(body, "gpu")["placed_bytes"] == 20 * GI


def test_fragmentation_and_what_would_make_the_plan_fit(client, cluster):
    make_pool(cluster, "gpu", nodes=["40Gi", "40Gi"])
    make_model(cluster, "idle-old", "25Gi", last_request=NOW - timedelta(hours=3))
    make_model(cluster, "idle-new", "25Gi", last_request=NOW - timedelta(minutes=30))
    make_model(cluster, "busy", "10Gi", peak="5Gi", last_request=NOW - timedelta(minutes=1))

    body = post(client, [new_model("wide", "20Gi")]).json()

    gpu = pool_of(body, "gpu")
    assert body["fits"] is False and gpu["fragmented"] is True
    (miss,) = gpu["unplaced"]
    assert (miss["model"], miss["reason"]) == ("InferenceModel default/wide", "fragmented")
    # the running models keep their place (idle-new, idle-old, busy biggest first): 15Gi + 5Gi free
    assert miss["detail"] == (
        "memory: needs 20.0Gi: the pool has 20.0Gi free in total but the largest free space on one node is 15.0Gi"
    )
    suggestions = gpu["suggestions"]
    assert suggestions["fits_after"] == "scale_to_zero"
    assert suggestions["scale_to_zero"] == ["InferenceModel default/idle-old"]  # oldest idle first, and enough
    assert suggestions["frees_bytes"] == 25 * GI
    assert [(offer["model"], offer["frees_bytes"]) for offer in suggestions["idle"]] == [
        ("InferenceModel default/idle-old", 25 * GI), ("InferenceModel default/idle-new", 25 * GI)]
    # right-sizing's verdict on busy (peak 5Gi x 1.04 -> 6Gi): 4Gi saved, listed though not needed here
    assert suggestions["rightsizing"] == [
        {"model": "InferenceModel default/busy", "from": "10Gi", "to": "6Gi", "saves_bytes": 4 * GI}
    ]


def test_idle_suggestions_read_the_last_request_as_it_is_now(client, cluster):
    """The holdings a plan reuses (scheduler.holdings_cache) do not watch the last request, which the
    gateway stamps on every model in use; the suggestions read it afresh."""
    make_pool(cluster, "gpu", nodes=["40Gi", "40Gi"])
    make_model(cluster, "idle-old", "25Gi", last_request=NOW - timedelta(hours=3))
    make_model(cluster, "idle-new", "25Gi", last_request=NOW - timedelta(minutes=30))
    make_model(cluster, "busy", "10Gi", peak="5Gi", last_request=NOW - timedelta(minutes=1))
    first = pool_of(post(client, [new_model("wide", "20Gi")]).json(), "gpu")["suggestions"]
    assert first["scale_to_zero"] == ["InferenceModel default/idle-old"]
    InferenceModel.objects.filter(name="idle-old").update(last_active_at=NOW - timedelta(minutes=1))  # a request
    again = pool_of(post(client, [new_model("wide", "20Gi")]).json(), "gpu")["suggestions"]
    assert again["scale_to_zero"] == ["InferenceModel default/idle-new"]
    assert [offer["model"] for offer in again["idle"]] == ["InferenceModel default/idle-new"]


def test_rightsizing_alone_can_make_it_fit(client, cluster):
    make_pool(cluster, "gpu", budget="64Gi", nodes=["64Gi"])
    make_model(cluster, "fat", "60Gi", peak="30Gi", last_request=NOW - timedelta(minutes=1))
    suggestions = pool_of(post(client, [new_model("small", "16Gi")]).json(), "gpu")["suggestions"]
    assert suggestions["fits_after"] == "rightsizing"
    assert suggestions["rightsizing"][0]["to"] == "32Gi"


@pytest.mark.parametrize(
    ("models", "field", "fragment"),
    [
        ([new_model("x", "16GB")], "models[0].manifest.spec.memory", '"16GB" is not a Kubernetes quantity'),
        ([new_model("x", "1Gi", dependencies=["ghost"])], "models[0].dependencies", '"ghost" names no model'),
        ([{"kind": "InferenceModel", "id": 999999}], "models[0].id", "is not the id of an InferenceModel"),
        ([{"kind": "Pod", "id": 1}], "models[0].kind", '"Pod" is not a serving kind'),
        ([{"spec": {}}], "models", "needs id"),
    ],
)
def test_invalid_input_is_a_400_naming_the_field(client, cluster, gpu_pool, models, field, fragment):
    response = post(client, models)
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body, body
    assert fragment in str(body[field])


def test_dependency_cycle_is_named(client, cluster, gpu_pool):
    make_model(cluster, "a", "1Gi", dependencies=["b"], replicas=0)
    make_model(cluster, "b", "1Gi", dependencies=["a"], replicas=0)
    body = post(client, [new_model("top", "1Gi", dependencies=["a"])]).json()
    assert body == {"models[0].dependencies": ['models[0].dependencies: ["a"] form a dependency cycle: a -> b -> a']}


def test_edited_spec_is_validated_and_login_is_required(client, cluster, gpu_pool):
    row = make_model(cluster, "m", "1Gi")
    bad = post(client, [{"kind": "InferenceModel", "id": row.pk, "spec": {"maxReplicas": 5}}])
    assert bad.status_code == 400
    assert bad.json()["models[0].spec.maxReplicas"] == ["models[0].spec.maxReplicas: 5 is greater than the maximum 1"]
    from rest_framework.test import APIClient

    assert APIClient().post("/api/planning/plan/", {"models": []}, format="json").status_code == 401
