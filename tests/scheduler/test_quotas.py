"""Team quotas with borrowing (issue 27), decided by admission on PostgreSQL.

Pool ``gpu`` has a 100Gi budget; team ``a`` (namespace ``a``) and team ``b`` (namespace ``b``)
are each guaranteed 50Gi. The real control plane's version of these stories (kwok GPU nodes,
the controller's reconcile pass) is tests/controllers/test_team_quotas.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from accounts.models import NamespaceGrant, Team
from scheduler.admission.admit import OVER_QUOTA, Demand, admit, release
from scheduler.admission.quotas import RECLAIM_HOLD, team_resolver
from scheduler.models import MemoryReservation, TeamQuota
from tests.scheduler.conftest import GI, NOW, make_model

BUSY = NOW - timedelta(minutes=1)


def demand(cluster, namespace: str, name: str, gi: int) -> Demand:
    return Demand(cluster.pk, "gpu", "InferenceModel", namespace, name, gi * GI)


@pytest.fixture
def teams(cluster, gpu_pool) -> dict[str, TeamQuota]:
    quotas = {}
    for name, limit in (("a", 20), ("b", 40)):
        team = Team.objects.create(name=name)
        NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=name)
        quotas[name] = TeamQuota.objects.create(team=team, pool=gpu_pool, guaranteed_bytes=50 * GI,
                                                borrowing_limit_bytes=limit * GI)  # fmt: skip
    return quotas


def test_a_namespace_belongs_to_the_team_with_the_most_specific_edit_grant(cluster, teams):
    everywhere = Team.objects.create(name="everywhere")
    NamespaceGrant.objects.create(team=everywhere, cluster=None, namespace="*")
    viewer = Team.objects.create(name="aaa-viewer")
    NamespaceGrant.objects.create(team=viewer, cluster=cluster, namespace="a", access=NamespaceGrant.Access.VIEW)
    resolve = team_resolver(cluster.pk)
    assert resolve("a") == (teams["a"].team_id, "a")  # exact beats *; view grants own nothing
    assert resolve("elsewhere") == (everywhere.pk, "everywhere")


def test_a_team_borrows_up_to_its_limit_and_the_refusal_names_the_quota(cluster, teams):
    make_model(cluster, "b-base", "50Gi", namespace="b", last_request=BUSY)
    assert admit(demand(cluster, "b", "b-borrow", 30), now=NOW).fits  # 30Gi borrowed of 40

    refused = admit(demand(cluster, "b", "b-more", 15), now=NOW)  # 45Gi borrowed > 40, though the pool has 20Gi
    assert not refused.fits and refused.reason == OVER_QUOTA
    assert refused.message == (
        "InferenceModel b/b-more would borrow 45Gi and 0 GPUs in pool gpu beyond team b's guarantee, over its "
        "borrowing limit (quota b/gpu: guaranteed 50Gi and 0 GPUs, borrowing limit 40Gi and unlimited GPUs; "
        "team b uses 80Gi and 0 GPUs there)"
    )
    assert not MemoryReservation.objects.filter(name="b-more").exists()
    assert admit(demand(cluster, "a", "a-own", 20), now=NOW).fits  # a's guarantee is untouched by b's refusal


def test_a_guaranteed_demand_stops_the_borrowers_idle_models_first(cluster, teams):
    make_model(cluster, "b-busy", "50Gi", namespace="b", last_request=BUSY)
    make_model(cluster, "b-idle", "30Gi", namespace="b", last_request=NOW - timedelta(hours=2))  # borrowed
    make_model(cluster, "b-idle-small", "5Gi", namespace="b", last_request=NOW - timedelta(hours=1))
    make_model(cluster, "a-idle-oldest", "10Gi", namespace="a", last_request=NOW - timedelta(hours=5))

    decision = admit(demand(cluster, "a", "a-wants", 30), now=NOW)  # a: 10 + 30 within 50; the pool has 5Gi

    assert not decision.fits and decision.frees_enough
    # b's idle models first (oldest idle first), then the rest: a's own older idle model is not touched
    assert [h.name for h in decision.idle_candidates] == ["b-idle"]
    assert TeamQuota.objects.get(pk=teams["a"].pk).reclaiming_since is None  # stopping them makes room


def test_a_guaranteed_demand_preempts_the_newest_borrowers_never_a_guaranteed_model(cluster, teams, gpu_pool):
    """Nothing is idle: a's demand within its guarantee names b's models beyond b's guarantee, newest
    admitted first, enough to make room, and never b-base (stopping it would take b below 50Gi)."""
    make_model(cluster, "b-base", "50Gi", namespace="b", last_request=BUSY)  # no reservation: the oldest
    for name, gi, minutes in (("b-old", 20, 30), ("b-new", 15, 10)):
        make_model(cluster, name, f"{gi}Gi", namespace="b", last_request=BUSY)
        reservation = MemoryReservation.objects.create(pool=gpu_pool, kind="InferenceModel", namespace="b", name=name,
                                                       memory_bytes=gi * GI)  # fmt: skip
        MemoryReservation.objects.filter(pk=reservation.pk).update(created_at=NOW - timedelta(minutes=minutes))

    short = admit(demand(cluster, "a", "a-some", 30), now=NOW)  # the pool has 15Gi: 15 short
    assert not short.fits and short.frees_enough
    assert [h.name for h in short.preempt] == ["b-new"]
    assert "team a reclaims its guaranteed share" in short.preempted_words[short.preempt[0].key]
    assert TeamQuota.objects.get(pk=teams["a"].pk).reclaiming_since is None

    whole = admit(demand(cluster, "a", "a-all", 50), now=NOW)  # 35 short: both borrowers, b-base never
    assert [h.name for h in whole.preempt] == ["b-new", "b-old"]
    stopped = {h.key for h in whole.preempt}
    for holder in whole.preempt:  # as the controller's scale-to-zero of each does
        release(cluster.pk, holder.kind, holder.namespace, holder.name)
    assert admit(demand(cluster, "a", "a-all", 50), now=NOW, stopping=stopped).fits

    beyond = admit(demand(cluster, "b", "b-more", 5), now=NOW)  # b beyond its guarantee preempts nobody
    assert not beyond.fits and not beyond.preempt


def test_when_idle_borrowers_are_not_enough_new_borrowing_is_refused_until_the_owner_is_admitted(cluster, teams):
    # one model of 85Gi: it borrows 35Gi, but stopping it would take b below its guarantee: not preempted
    borrowed = make_model(cluster, "b-borrowed", "85Gi", namespace="b", last_request=BUSY)

    refused = admit(demand(cluster, "a", "a-wants", 30), now=NOW)
    assert not refused.fits and not refused.frees_enough
    assert refused.message.endswith(
        "; no idle model to scale to zero; within team a's guaranteed share: no new borrowing in pool gpu until "
        "it is admitted (quota a/gpu: guaranteed 50Gi and 0 GPUs, borrowing limit 20Gi and unlimited GPUs)"
    )
    assert TeamQuota.objects.get(pk=teams["a"].pk).reclaiming_since == NOW

    blocked = admit(demand(cluster, "b", "b-more", 5), now=NOW)  # the pool has 15Gi, b's limit allows it
    assert not blocked.fits and blocked.reason == OVER_QUOTA
    assert "team a is reclaiming its guaranteed share: no new borrowing there until it is admitted (quota a/gpu" in (
        blocked.message
    )
    assert admit(demand(cluster, "a", "a-small", 5), now=NOW).fits  # within a's guarantee: never blocked
    assert admit(demand(cluster, "b", "b-more", 5), now=NOW + RECLAIM_HOLD).fits  # the claim lapsed unrenewed

    MemoryReservation.objects.filter(name="b-more").delete()
    borrowed.status["replicas"] = 0
    borrowed.save()
    assert admit(demand(cluster, "a", "a-wants", 30), now=NOW).fits
    assert TeamQuota.objects.get(pk=teams["a"].pk).reclaiming_since is None
    assert admit(demand(cluster, "b", "b-more", 5), now=NOW).fits


def test_a_team_without_a_quota_in_a_pool_with_quotas_only_borrows(cluster, teams):
    make_model(cluster, "a-base", "45Gi", namespace="a", last_request=BUSY)
    TeamQuota.objects.filter(pk=teams["a"].pk).update(reclaiming_since=NOW)
    refused = admit(demand(cluster, "elsewhere", "stranger", 1), now=NOW)
    assert refused.reason == OVER_QUOTA and "beyond team (no team)'s guarantee" in refused.message
    TeamQuota.objects.filter(pk=teams["a"].pk).update(reclaiming_since=None)
    assert admit(demand(cluster, "elsewhere", "stranger", 50), now=NOW).fits  # no limit but the pool


def test_staff_set_quotas_through_the_api_and_bad_input_names_the_field(api_as, cluster, gpu_pool):
    Team.objects.create(name="a")
    Team.objects.create(name="b")
    staff = api_as(staff=True)
    body = {"team": "a", "cluster": "prod", "pool": "gpu", "guaranteed_memory": "60Gi", "guaranteed_gpus": 0,
            "borrowing_limit_memory": "20Gi"}  # fmt: skip
    created = staff.post("/api/planning/quotas/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["guaranteed_memory"] == "60Gi" and created.json()["borrowing_limit_gpus"] is None
    quota = TeamQuota.objects.get(team__name="a")
    assert (quota.guaranteed_bytes, quota.borrowing_limit_bytes) == (60 * GI, 20 * GI)

    over = staff.post("/api/planning/quotas/", {**body, "team": "b", "guaranteed_memory": "50Gi"}, format="json")
    assert over.status_code == 400
    rule = "guaranteed_memory: 50Gi brings the guarantees in pool prod/gpu to 110Gi, over its budget of 100Gi"
    assert over.json() == {"guaranteed_memory": [rule]}
    for change, field in (({"pool": "nowhere"}, "pool"), ({"guaranteed_memory": "lots"}, "guaranteed_memory"),
                          ({"guaranteed_gpus": 3}, "guaranteed_gpus"), ({"team": "a"}, "team"),
                          ({"team": "zz"}, "team")):  # fmt: skip
        bad = staff.post("/api/planning/quotas/", {**body, "team": "b", "guaranteed_memory": "10Gi", **change},
                         format="json")  # fmt: skip
        assert bad.status_code == 400 and field in bad.json(), (change, bad.content)
    changed = staff.patch(f"/api/planning/quotas/{quota.pk}/", {"guaranteed_memory": "40Gi"}, format="json")
    assert changed.status_code == 200 and TeamQuota.objects.get(pk=quota.pk).guaranteed_bytes == 40 * GI
    assert api_as().get("/api/planning/quotas/").status_code == 403  # no team sets its own share


def test_staff_set_quotas_in_the_admin_as_quantities(client, make_user, cluster, gpu_pool):
    team = Team.objects.create(name="a")
    client.force_login(make_user("admin", staff=True, perms=["scheduler.add_teamquota", "scheduler.view_teamquota"]))
    form = {"team": team.pk, "pool": gpu_pool.pk, "guaranteed_bytes": "120Gi", "guaranteed_gpus": 0,
            "borrowing_limit_bytes": "", "borrowing_limit_gpus": ""}  # fmt: skip
    refused = client.post("/admin/scheduler/teamquota/add/", form)
    assert "guaranteed_bytes: 120Gi brings the guarantees in pool prod/gpu to 120Gi, over its budget of 100Gi" in (
        refused.content.decode()
    )
    assert client.post("/admin/scheduler/teamquota/add/", {**form, "guaranteed_bytes": "60Gi"}).status_code == 302
    assert TeamQuota.objects.get().guaranteed_bytes == 60 * GI


def test_planning_shows_each_teams_guarantee_use_and_borrowing_and_the_what_if_names_the_quota(
    client, make_user, cluster, teams
):
    make_model(cluster, "b-base", "50Gi", namespace="b", last_request=BUSY)
    make_model(cluster, "b-borrowed", "30Gi", namespace="b", last_request=BUSY)
    make_model(cluster, "a-base", "10Gi", namespace="a", last_request=BUSY)
    client.force_login(make_user("planner", staff=True))
    page = client.get("/planning/")
    rows = {(row.team, row.used.bytes // GI, row.borrowed.bytes // GI) for row in page.context["quotas"]}
    assert rows == {("a", 10, 0), ("b", 80, 30)}
    html = page.content.decode()
    assert 'id="quota-table"' in html and "Team quotas: guaranteed vs used vs borrowed" in html  # the SVG chart

    member = make_user("member-of-a", teams=[teams["a"].team])
    client.force_login(member)
    assert [row.team for row in client.get("/planning/").context["quotas"]] == ["a"]  # not b's share

    client.force_login(make_user("planner-2", staff=True))
    models = "- {estimate: {name: more, namespace: b, pool: gpu, memory: 15Gi}}"
    planned = client.post("/planning/", {"cluster": "prod", "models": models, "include_running": "on"})
    breaks = planned.context["plan"]["quota_breaks"]
    assert breaks == [
        "Estimate b/more would take team b past its borrowing limit in pool gpu: borrowing 45Gi of 40Gi "
        "(quota b/gpu: guaranteed 50Gi and 0 GPUs, borrowing limit 40Gi and unlimited GPUs)",
        "Estimate b/more would leave team a's unused guarantee short by 40Gi and 0 GPUs in pool gpu "
        "(quota a/gpu: guaranteed 50Gi and 0 GPUs, borrowing limit 20Gi and unlimited GPUs)",
    ]
    assert "Breaks a team quota: Estimate b/more would take team b past its borrowing limit" in (
        planned.content.decode()
    )
