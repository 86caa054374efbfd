"""Access gaps found in review, each closed: planning by id, runs reading other teams' configs,
resolve/wake needing the change permission, right-sizing refresh limited to the user's clusters."""

from __future__ import annotations

import json

from django.utils import timezone
from rest_framework.test import APIClient

from clusters.models import Cluster, SyncState
from scheduler.rightsizing.models import Refresh
from tests.accounts.conftest import ENDPOINTS, sample_in


def test_planning_by_id_answers_other_teams_ids_like_missing_ones(world) -> None:
    secret = world.objects[("InferenceModel", "nlp")]
    for body in (
        {"kind": "InferenceModel", "id": secret.pk},
        {"kind": "InferenceModel", "id": secret.pk, "spec": {"memory": None}},
    ):
        response = world.api("member").post("/api/planning/plan/", {"cluster": "east", "models": [body]}, format="json")
        assert response.status_code == 400
        assert "nlp" not in response.content.decode() and secret.name not in response.content.decode()
        assert "is not the id of an InferenceModel in cluster east" in json.dumps(response.json())


def test_a_run_cannot_read_another_teams_config(world) -> None:
    manifest = sample_in("InferenceRun", "vision", name="spy")
    manifest["spec"]["configRef"]["namespace"] = "nlp"
    response = world.api("member").post(ENDPOINTS["InferenceRun"] + "?cluster=east", manifest, format="json")
    assert response.status_code == 403
    assert "spec.configRef.namespace: 'nlp' is not a namespace your teams may read" in response.content.decode()
    applied = world.api("member").post("/api/apply/?cluster=east", [manifest], format="json")
    assert applied.status_code == 403 and "spec.configRef.namespace" in applied.content.decode()
    manifest["spec"]["configRef"]["namespace"] = "vision"
    own = world.api("member").post(ENDPOINTS["InferenceRun"] + "?cluster=east", manifest, format="json")
    assert own.status_code == 201, own.content


def test_resolve_and_wake_need_change_not_add(world, make_user) -> None:
    obj = world.objects[("InferenceModel", "vision")]
    obj.sync_state, obj.conflict = SyncState.CONFLICT, {"cluster": obj.desired_document()}
    obj.save()
    adder = APIClient()
    adder.force_authenticate(
        make_user(
            "adder", perms=["models_app.add_inferencemodel", "models_app.view_inferencemodel"], teams=[world.vision]
        )
    )
    assert adder.post(f"/api/inferencemodels/{obj.pk}/resolve/", {"take": "cluster"}, format="json").status_code == 403
    assert adder.post(f"/api/inferencemodels/{obj.pk}/wake/").status_code == 403
    changer = APIClient()
    changer.force_authenticate(make_user("changer", perms=["models_app.change_inferencemodel"], teams=[world.vision]))
    assert (
        changer.post(f"/api/inferencemodels/{obj.pk}/resolve/", {"take": "cluster"}, format="json").status_code == 200
    )
    refused = changer.post(f"/api/inferencemodels/{obj.pk}/wake/")  # allowed, then refused: a snapshot cluster
    assert refused.status_code == 400 and "does not let the portal manage" in refused.json()["detail"]


def test_rightsizing_refresh_and_its_history_stay_in_the_users_clusters(world) -> None:
    west = Cluster.objects.create(name="west", server_url="https://127.0.0.1:9", prometheus_url="http://127.0.0.1:9")
    Refresh.objects.create(
        cluster=west, started_at=timezone.now(), window_seconds=604800, error="connection refused at http://127.0.0.1:9"
    )
    member = world.api("member")
    refreshed = member.post("/api/rightsizing/refresh/", {"cluster": "west"}, format="json")
    assert refreshed.status_code == 403 and "west" not in refreshed.content.decode()
    report = member.get("/api/rightsizing/report/").content.decode()
    assert "127.0.0.1:9" not in report and "west" not in report
