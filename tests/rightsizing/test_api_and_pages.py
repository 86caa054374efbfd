"""The preview, report, exports, refresh and apply, over HTTP (API and pages)."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from clusters.models import AuditEntry
from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation, Refresh, ReportVersion
from scheduler.rightsizing.refresh import refresh_cluster
from tests.rightsizing.factories import make_cluster, reference_models
from tests.rightsizing.prometheus_server import GI

pytestmark = pytest.mark.django_db
CHANGE = ["models_app.change_inferencemodel"]


def test_preview_reproduces_the_reference_example(api_as):
    response = api_as().post("/api/rightsizing/preview/", {"declaredMemory": "80Gi", "observedPeak": "75Gi"})
    assert response.status_code == 200
    assert response.json() == {
        "utilizationPercent": 93,
        "ratio": 0.9375,
        "recommendedMemory": "78Gi",
        "recommendedBytes": 78 * GI,
        "freedBytes": 2 * GI,
        "recommendation": "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)",
        "overprovisioned": False,
    }


def test_preview_takes_policy_overrides(api_as):
    body = {"declaredMemory": "80Gi", "observedPeak": "60Gi", "headroomPercent": "20", "roundingUnit": "4Gi"}
    data = api_as().post("/api/rightsizing/preview/", body).json()
    assert (data["recommendedMemory"], data["utilizationPercent"], data["overprovisioned"]) == ("72Gi", 75, True)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"declaredMemory": "80GB", "observedPeak": "75Gi"}, "declaredMemory", '"80GB" is not a Kubernetes quantity'),
        ({"declaredMemory": "0Gi", "observedPeak": "75Gi"}, "declaredMemory", '"0Gi" must be greater than zero'),
        ({"declaredMemory": "80Gi"}, "observedPeak", "required"),
        ({"declaredMemory": "80Gi", "observedPeak": "1Gi", "flagBelowPercent": 101}, "flagBelowPercent", "101 must"),
    ],
)
def test_preview_bad_input_names_field_value_and_rule(api_as, body, field, message):
    response = api_as().post("/api/rightsizing/preview/", body, format="json")
    assert response.status_code == 400
    assert message in response.json()[field][0]


def test_preview_needs_a_login():
    assert Client().post("/api/rightsizing/preview/", {}).status_code == 401


@pytest.fixture
def reported(prometheus, end):
    cluster = make_cluster(prometheus.url)
    models = reference_models(cluster)
    assert refresh_cluster(cluster, at=end).ok
    return cluster, models


def test_report_api_per_model_and_per_pool(api_as, reported):
    data = api_as().get("/api/rightsizing/report/?ordering=-freed_bytes").json()
    rows = {f"{row['namespace']}/{row['name']}": row for row in data["models"]}
    assert rows["default/llama-2-70b"]["recommended_bytes"] == 78 * GI
    assert rows["default/llama-2-70b"]["freed_bytes"] == 2 * GI
    assert rows["default/no-data"]["peak_bytes"] is None
    assert [row["name"] for row in data["models"][:2]] == ["rounding", "llama-2-70b"]  # 8Gi, then 48 -> 42Gi
    pools = {pool["node_pool"]: pool for pool in data["pools"]}
    assert pools["gpu-a100"]["freed_bytes"] == (2 + 6) * GI
    assert pools["gpu-l4"]["freed_bytes"] == 8 * GI  # rounding 40 -> 32Gi; over-peak needs 5Gi more
    assert pools["gpu-l4"]["needed_bytes"] == 5 * GI
    filtered = api_as().get("/api/rightsizing/report/?state=no-data").json()["models"]
    assert sorted(row["name"] for row in filtered) == ["few-samples", "no-data"]
    assert data["refreshes"][0]["ok"] and data["refreshes"][0]["queries"] == 7


def test_report_bad_filter_is_400_naming_it(api_as, reported):
    response = api_as().get("/api/rightsizing/report/?ordering=colour")
    assert response.status_code == 400
    assert response.json()["ordering"][0].startswith('ordering: "colour" must be one of cluster')


def test_page_exports_and_charts(make_user, reported):
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get("/rightsizing/?node_pool=gpu-a100")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)" in html
    assert "<svg" in html and "Memory per node pool" in html
    assert "Refresh now" not in html and "Apply" not in html  # no change permission
    rows = list(csv.DictReader(io.StringIO(client.get("/rightsizing/export.csv?state=change").content.decode())))
    assert {row["name"] for row in rows} == {"llama-2-70b", "llmd-served", "over-peak", "rounding"}
    exported = client.get("/rightsizing/export.json").json()
    assert len(exported["models"]) == 8
    model = InferenceModel.objects.get(namespace="default", name="llama-2-70b")
    detail = client.get(f"/rightsizing/models/{model.pk}/").content.decode()
    assert "<svg" in detail and "Observed peak" in detail
    assert Client().get("/rightsizing/").status_code == 302  # login required


def test_apply_edits_spec_memory_through_the_portal_edit(make_user, reported):
    _, models = reported
    model = models["default/llama-2-70b"]
    viewer = Client()
    viewer.force_login(make_user("viewer"))
    assert viewer.post(f"/rightsizing/models/{model.pk}/apply/").status_code == 403
    editor = Client()
    editor.force_login(make_user("editor", perms=CHANGE))
    assert editor.post(f"/rightsizing/models/{model.pk}/apply/").status_code == 302
    model.refresh_from_db()
    assert model.spec["memory"] == "78Gi" and model.memory_bytes == 78 * GI
    entry = AuditEntry.objects.get(object_id=model.pk, kind="InferenceModel")
    assert entry.actor_label == "editor" and entry.source == "portal"
    assert entry.changes == [{"path": "spec.memory", "old": "80Gi", "new": "78Gi"}]
    data = editor.get("/api/rightsizing/report/?q=llama&namespace=default").json()["models"][0]
    assert data["freed_bytes"] == 0  # already applied
    again = editor.post(f"/rightsizing/models/{model.pk}/apply/", follow=True).content.decode()
    assert "has no change to apply" in again


def test_api_apply_needs_the_change_permission_and_refresh_is_staffs(api_as, reported, prometheus):
    cluster, models = reported
    model = models["default/rounding"]
    assert api_as().post(f"/api/rightsizing/models/{model.pk}/apply/").status_code == 403
    editor = api_as(perms=CHANGE)
    response = editor.post(f"/api/rightsizing/models/{model.pk}/apply/")
    assert response.status_code == 200 and response.json()["spec"]["memory"] == "32Gi"
    assert editor.post(f"/api/rightsizing/models/{models['default/no-data'].pk}/apply/").status_code == 400
    # a refresh writes every team's objects' status: a member with the change right may not start one
    for body in ({"cluster": cluster.name}, {}, {"cluster": ""}):
        refused = editor.post("/api/rightsizing/refresh/", body, format="json")
        assert refused.status_code == 403 and "staff only" in refused.json()["detail"]
    assert api_as(staff=True).post("/api/rightsizing/refresh/", {}, format="json").status_code == 403  # no change right
    staff = api_as(perms=CHANGE, staff=True)
    refreshed = staff.post("/api/rightsizing/refresh/", {"cluster": cluster.name}, format="json")
    assert refreshed.status_code == 200 and refreshed.json()[0]["ok"] is True
    assert Refresh.objects.filter(cluster=cluster).count() == 2
    unknown = staff.post("/api/rightsizing/refresh/", {"cluster": "nope"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["cluster"] == ['cluster: "nope" is not a registered cluster']
    for blank in ("", "  "):
        empty = staff.post("/api/rightsizing/refresh/", {"cluster": blank}, format="json")
        assert empty.status_code == 400 and f'cluster: "{blank}" is empty' in empty.json()["cluster"][0]
        form = staff.post("/api/rightsizing/refresh/", {"cluster": blank})  # form-encoded alike
        assert form.status_code == 400 and "is empty" in form.json()["cluster"][0]
    assert Refresh.objects.filter(cluster=cluster).count() == 2  # nothing refused was refreshed
    history = editor.get(f"/api/rightsizing/models/{model.pk}/history/").json()
    assert len(history) == 2 and history[0]["peak_bytes"] == 30 * GI + 512 * 1024**2


def test_page_refresh_button_reports_failure(make_user, reported):
    cluster, _ = reported
    cluster.prometheus_url = "http://127.0.0.1:9"
    cluster.save()
    client = Client()
    client.force_login(make_user("staff-editor", perms=CHANGE, staff=True))
    html = client.post("/rightsizing/refresh/", follow=True).content.decode()
    assert "is unreachable (ConnectionError); the last report is kept" in html
    assert "Consider reducing memory from 80Gi to 78Gi" in html
    unknown = client.post("/rightsizing/refresh/", {"cluster": "nope"}, follow=True).content.decode()
    assert "cluster: &quot;nope&quot; is not a registered cluster" in unknown


def test_page_refresh_is_staffs_and_its_button_shown_to_staff_only(make_user, reported):
    member = Client()
    member.force_login(make_user("member-editor", perms=CHANGE))
    assert "Refresh now" not in member.get("/rightsizing/").content.decode()
    assert member.post("/rightsizing/refresh/").status_code == 403
    assert Refresh.objects.count() == 1  # the fixture's only
    staff = Client()
    staff.force_login(make_user("staff-editor", perms=CHANGE, staff=True))
    assert "Refresh now" in staff.get("/rightsizing/").content.decode()


def _page_figures(client: Client) -> tuple[int, int]:
    """(objects, GiB right-sizing frees) as the report page shows them, from its cached COUNT and totals."""
    context = client.get("/rightsizing/").context
    return context["page"].paginator.count, sum(pool.freed_bytes for pool in context["pools"]) // GI


def test_cached_report_figures_follow_every_write_to_the_observations(make_user, reported):
    """The COUNT and pool totals are cached under the observations' version, which PostgreSQL
    moves at every write: an applied recommendation and a deleted object show at once."""
    _, models = reported
    editor = Client()
    editor.force_login(make_user("editor", perms=CHANGE))
    version = ReportVersion.objects.get().value
    count, freed = _page_figures(editor)
    assert count == Observation.objects.filter(is_latest=True).count() and freed > 0
    assert _page_figures(editor) == (count, freed)  # answered from the cache
    model = models["default/llama-2-70b"]
    assert editor.post(f"/rightsizing/models/{model.pk}/apply/").status_code == 302  # re-judges its observation
    assert ReportVersion.objects.get().value > version
    assert _page_figures(editor) == (count, freed - 2)  # its 2Gi saving is taken
    # what removing the object in the portal does (scheduler.rightsizing.kinds._forget_history)
    Observation.objects.filter(kind="InferenceModel", object_id=model.pk).delete()
    assert _page_figures(editor)[0] == count - 1
