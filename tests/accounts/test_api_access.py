"""Authorization matrix of the REST API: anonymous, another team's member, member, staff."""

from __future__ import annotations

import pytest
from django.db.models import Q

from accounts.access import _condition, restrict
from accounts.models import ALL_NAMESPACES
from models_app.models import InferenceModel
from tests.accounts.conftest import ENDPOINTS, sample_in

pytestmark = pytest.mark.django_db
KINDS = list(ENDPOINTS)


def assert_challenged(response) -> None:
    """Not logged in: 401 with the token challenge (knox's, the first authentication class), never 403."""
    assert (response.status_code, response.headers.get("WWW-Authenticate")) == (401, "Token"), response.content


def names_by_namespace(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {item["metadata"]["namespace"] for item in response.json()["results"]}


@pytest.mark.parametrize("kind", KINDS)
def test_lists_show_only_the_teams_namespaces(world, kind):
    url = ENDPOINTS[kind]
    assert_challenged(world.api(None).get(url))
    assert names_by_namespace(world.api("member").get(url)) == {"vision"}
    assert names_by_namespace(world.api("other").get(url)) == {"nlp"}
    assert names_by_namespace(world.api("viewer").get(url)) == {"vision"}
    assert names_by_namespace(world.api("staff").get(url)) == {"vision", "nlp"}
    # a filter naming the other team's namespace finds nothing rather than their rows
    assert names_by_namespace(world.api("member").get(url, {"namespace": "nlp"})) == set()


@pytest.mark.parametrize("kind", KINDS)
def test_detail_write_audit_and_delete_of_another_teams_object_are_404(world, kind):
    obj = world.objects[(kind, "vision")]
    url = f"{ENDPOINTS[kind]}{obj.pk}/"
    anonymous, other, viewer, member = (world.api(who) for who in (None, "other", "viewer", "member"))
    assert_challenged(anonymous.get(url))
    for method, extra in (("get", ""), ("patch", ""), ("delete", ""), ("get", "audit/"), ("post", "resolve/")):
        response = getattr(other, method)(url + extra, {"take": "portal"} if method == "post" else None, format="json")
        assert response.status_code == 404, (method, extra, response.content)
        assert b"vision" not in response.content
    assert viewer.get(url).status_code == 200
    assert viewer.patch(url, {"metadata": {"labels": {"x": "y"}}}, format="json").status_code == 404
    assert viewer.delete(url).status_code == 404
    assert member.get(url).status_code == 200
    assert member.get(url + "audit/").status_code == 200
    patched = member.patch(url, {"metadata": {"labels": {"owner": "vision"}}}, format="json")
    assert patched.status_code == 200, patched.content
    assert world.api("staff").get(f"{ENDPOINTS[kind]}{world.objects[(kind, 'nlp')].pk}/").status_code == 200


@pytest.mark.parametrize("kind", KINDS)
def test_create_only_in_the_teams_namespaces(world, kind):
    url, member = ENDPOINTS[kind] + "?cluster=east", world.api("member")
    refused = member.post(url, sample_in(kind, "nlp", name="intruder"), format="json")
    assert refused.status_code == 403
    assert (
        "metadata.namespace: 'nlp' in cluster east is not a namespace your teams may create in"
        in refused.json()["detail"]
    )
    # an existing name in the other namespace is refused the same way, so its existence does not leak
    taken = member.post(url, sample_in(kind, "nlp"), format="json")
    assert taken.status_code == 403 and "already exists" not in taken.content.decode()
    assert (
        world.api("viewer").post(url, sample_in(kind, "vision", name="viewer-made"), format="json").status_code == 403
    )
    created = member.post(url, sample_in(kind, "vision", name="made-here"), format="json")
    assert created.status_code == 201, created.content
    assert (
        world.api("staff").post(url, sample_in(kind, "elsewhere", name="staff-made"), format="json").status_code == 201
    )


def test_apply_refuses_documents_outside_the_teams_namespaces(world):
    member = world.api("member")
    foreign = [sample_in("InferenceModel", "nlp", name="sneaky")]
    refused = member.post("/api/apply/?cluster=east", foreign, format="json")
    assert refused.status_code == 403
    [document] = refused.json()["documents"]
    assert document["errors"]["metadata.namespace"] == [
        "metadata.namespace: 'nlp' in cluster east is not a namespace your teams may write in"
    ]
    mixed = [sample_in("InferenceModel", "vision", name="fine"), sample_in("InferenceModel", "nlp", name="sneaky")]
    response = member.post("/api/apply/?cluster=east", mixed, format="json")
    assert response.status_code == 403 and [d["index"] for d in response.json()["documents"]] == [1]
    assert not InferenceModel.objects.filter(name__in=["fine", "sneaky"]).exists()  # all or nothing
    invalid = [sample_in("InferenceModel", "nlp", name="sneaky"), {"kind": "Nope"}]
    assert member.post("/api/apply/?cluster=east", invalid, format="json").status_code == 400
    ok = member.post("/api/apply/?cluster=east", [sample_in("InferenceModel", "vision", name="fine")], format="json")
    assert ok.status_code == 200 and ok.json()[0]["action"] == "created"


def test_restrict_by_action(world):
    rows = InferenceModel.objects.all()
    assert {o.namespace for o in restrict(rows, world.viewer, "view")} == {"vision"}
    assert not restrict(rows, world.viewer, "change").exists()
    assert {o.namespace for o in restrict(rows, world.member, "delete")} == {"vision"}
    assert restrict(rows, world.staff, "delete").count() == 2
    with pytest.raises(ValueError, match="action 'steal' must be one of"):
        restrict(rows, world.member, "steal")


def test_a_user_in_no_team_sees_nothing(world, make_user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(make_user("loner", teams=[]))
    assert client.get(ENDPOINTS["InferenceModel"]).json()["count"] == 0


def test_planning_pools_hide_other_teams_models(world):
    from tests.scheduler.conftest import make_model, make_pool

    make_pool(world.cluster, "gpu", budget="200Gi", nodes=["128Gi", "128Gi"])
    make_model(world.cluster, "secret-nlp", "40Gi", namespace="nlp")
    make_model(world.cluster, "mine", "30Gi", namespace="vision")
    pools = {p["pool"]: p for p in world.api("member").get("/api/planning/pools/").json()}
    assert [h["model"] for h in pools["gpu"]["holders"]] == ["InferenceModel vision/mine"]
    assert pools["gpu"]["allocated_bytes"] == 70 * 1024**3  # shared figures stay whole
    secret = world.objects[("InferenceModel", "nlp")]
    hidden = world.api("member").post(
        "/api/planning/plan/",
        {"cluster": "east", "models": [{"kind": "InferenceModel", "id": secret.pk}]},
        format="json",
    )
    assert hidden.status_code == 400
    assert hidden.json() == {
        "models[0].id": [f"models[0].id: {secret.pk} is not the id of an InferenceModel in cluster east"]
    }
    plan = world.api("member").post(
        "/api/planning/plan/",
        {"cluster": "east", "models": [{"manifest": {**sample_in("InferenceModel", "vision", name="new-one"),
                                                      "spec": {"modelName": "n", "memory": "10Gi",
                                                               "backendUrl": "http://n:8000",
                                                               "nodeSelector": {"inference-pool": "gpu"}}}}]},
        format="json",
    )  # fmt: skip
    assert plan.status_code == 200, plan.content
    assert "secret-nlp" not in plan.content.decode() and "a model of another team" in plan.content.decode()
    assert "InferenceModel vision/new-one" in plan.content.decode()
    assert "secret-nlp" in world.api("staff").get("/api/planning/pools/").content.decode()


def test_a_users_scopes_are_one_condition_per_cluster():
    """A member's grants become one term per cluster, its namespaces one ``IN`` (issue 41: a pair of
    lookups per namespace doubled a member's CPU per page); an every-namespace grant is the cluster
    alone, a grant in every cluster the namespaces alone."""
    scopes = [(1, "a"), (1, "b"), (2, ALL_NAMESPACES), (None, "shared"), (1, "c"), (2, "x")]
    expected = (Q(cluster_id=1) & Q(namespace__in=["a", "b", "c"])) | Q(cluster_id=2) | Q(namespace__in=["shared"])
    assert _condition(scopes, "") == expected
    assert _condition([(3, "n")], "model__") == Q(model__cluster_id=3) & Q(model__namespace__in=["n"])
    assert _condition([], "") is None
