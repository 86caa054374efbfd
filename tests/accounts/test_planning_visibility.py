"""Planning shows a cluster's pools only to its teams, no per-model figure of another team's model,
and proposing a model cannot probe another team's namespace."""

from __future__ import annotations

from typing import Any

from accounts.models import NamespaceGrant, Team
from clusters.models import Cluster
from tests.accounts.conftest import sample_in
from tests.scheduler.conftest import make_model, make_pool

GI = 1024**3


def proposal(namespace: str, name: str, memory: str = "10Gi", **spec: Any) -> dict[str, Any]:
    manifest = sample_in("InferenceModel", namespace, name=name)
    manifest["spec"] = {"modelName": name, "memory": memory, "backendUrl": f"http://{name}:8000",
                        "nodeSelector": {"inference-pool": "gpu"}, **spec}  # fmt: skip
    return {"manifest": manifest}


def test_pools_of_clusters_without_a_grant_are_not_shown(world, make_user):
    west = Cluster.objects.create(name="west", auth_method=Cluster.AuthMethod.SNAPSHOT)
    make_pool(west, "west-gpu", budget="640Gi", nodes=["320Gi", "320Gi"])
    make_pool(world.cluster, "gpu", budget="200Gi", nodes=["128Gi", "128Gi"])
    member = world.api("member")
    shown = {(p["cluster"], p["pool"]) for p in member.get("/api/planning/pools/").json()}
    assert ("east", "gpu") in shown and all(cluster == "east" for cluster, _ in shown)
    loner = make_user("loner", teams=[])
    client = world.api(None)
    client.force_authenticate(loner)
    assert client.get("/api/planning/pools/").json() == []
    for who in ("member",):
        page = world.browser(who).get("/planning/").content.decode()
        home = world.browser(who).get("/").content.decode()
        assert "west-gpu" not in page and "west-gpu" not in home and "640" not in page
    refused = member.post("/api/planning/plan/", {"cluster": "west", "models": []}, format="json")
    assert refused.status_code == 400 and "640" not in refused.content.decode()
    unknown = member.post("/api/planning/plan/", {"cluster": "nowhere", "models": []}, format="json")
    assert refused.json()["cluster"][0].replace("west", "X") == unknown.json()["cluster"][0].replace("nowhere", "X")
    page = world.browser("member").post("/planning/", {"cluster": "west", "models": "[]"}).content.decode()
    assert "Plan for west" not in page
    staff = world.api("staff").get("/api/planning/pools/").json()
    assert {"gpu", "west-gpu"} <= {p["pool"] for p in staff}


def test_a_plan_shows_no_figure_of_another_teams_model(world):
    make_pool(world.cluster, "gpu", budget="60Gi", nodes=["64Gi"])
    make_model(world.cluster, "secret-nlp", "37Gi", namespace="nlp", peak="20Gi")
    plan = world.api("member").post(
        "/api/planning/plan/", {"cluster": "east", "models": [proposal("vision", "big", "30Gi")]}, format="json"
    )
    assert plan.status_code == 200, plan.content
    body = plan.json()
    assert "secret-nlp" not in plan.content.decode() and "37Gi" not in plan.content.decode()
    pool = body["pools"][0]
    hidden_figures = dict.fromkeys(("memory_bytes", "gpus", "gpu_memory_bytes"))
    assert pool["nodes"][0]["models"] == [{"model": "a model of another team", "origin": "running", **hidden_figures}]
    assert not pool["fits"] and pool["budget_bytes"] == 60 * GI  # the shared pool's own figures stay
    hidden = [change for change in pool["suggestions"]["rightsizing"] if change["model"] == "a model of another team"]
    assert hidden and all(change["from"] is None and change["saves_bytes"] is None for change in hidden)


def test_proposing_a_name_does_not_reveal_models_in_another_teams_namespace(world):
    make_pool(world.cluster, "gpu", budget="200Gi", nodes=["128Gi", "128Gi"])
    make_model(world.cluster, "secret-nlp", "40Gi", namespace="nlp")
    member = world.api("member")
    answers = []
    for name in ("secret-nlp", "no-such-model"):
        for item in (proposal("nlp", name), proposal("nlp", "probe", dependencies=[name])):
            response = member.post("/api/planning/plan/", {"cluster": "east", "models": [item]}, format="json")
            answers.append((response.status_code, response.content.decode().replace(name, "NAME")))
    assert len(set(answers)) == 1  # the same answer whether the model exists or not
    status, text = answers[0]
    assert status == 400 and "models[0].manifest.metadata.namespace" in text and "may read" in text
    own = member.post("/api/planning/plan/", {"cluster": "east", "models": [proposal("vision", "x")]}, format="json")
    assert own.status_code == 200


def test_every_cluster_grant_sees_every_pool(world):
    west = Cluster.objects.create(name="west", auth_method=Cluster.AuthMethod.SNAPSHOT)
    make_pool(west, "west-gpu", budget="64Gi", nodes=["64Gi"])
    everywhere = Team.objects.create(name="ops")
    NamespaceGrant.objects.create(team=everywhere, cluster=None, namespace="monitoring")
    everywhere.members.add(world.member)
    assert "west-gpu" in world.api("member").get("/api/planning/pools/").content.decode()


def test_a_pool_of_stopped_models_is_listed_to_the_teams_whose_models_they_are(world):
    make_model(world.cluster, "parked", "16Gi", pool="vision-parking", namespace="vision", replicas=0)
    make_model(world.cluster, "shelved", "16Gi", pool="nlp-parking", namespace="nlp", replicas=0)
    pools = {p["pool"]: p for p in world.api("member").get("/api/planning/pools/").json()}
    assert "nlp-parking" not in pools
    assert (pools["vision-parking"]["allocated_bytes"], pools["vision-parking"]["holders"]) == (0, [])
    staff = world.api("staff").get("/api/planning/pools/").json()
    assert {"vision-parking", "nlp-parking"} <= {p["pool"] for p in staff}
