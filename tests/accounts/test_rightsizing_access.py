"""Right-sizing report, history, apply and exports are scoped to the user's teams."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation, Refresh

pytestmark = pytest.mark.django_db
GI = 1024**3


@pytest.fixture
def observed(world):
    at = datetime(2026, 11, 1, tzinfo=UTC)
    refresh = Refresh.objects.create(cluster=world.cluster, started_at=at, window_seconds=7 * 86400, ok=True)
    for namespace in ("vision", "nlp"):
        model = world.objects[("InferenceModel", namespace)]
        Observation.of(
            model, refresh=refresh, observed_at=at, declared_bytes=80 * GI, peak_bytes=75 * GI,
            samples=1000, is_latest=True,
        ).save()  # fmt: skip
    return world


def test_report_page_api_and_exports_show_only_the_teams_models(observed):
    member = observed.browser("member")
    for url in ("/rightsizing/", "/rightsizing/export.csv", "/rightsizing/export.json", "/api/rightsizing/report/"):
        body = member.get(url).content.decode()
        assert "vision" in body and "nlp" not in body, url
        assert "nlp" in observed.browser("staff").get(url).content.decode(), url
    assert observed.browser(None).get("/rightsizing/").status_code == 302


def test_history_model_page_and_apply_of_another_team_are_404(observed):
    secret = observed.objects[("InferenceModel", "nlp")]
    member = observed.browser("member")
    assert member.get(f"/rightsizing/models/{secret.pk}/").status_code == 404
    assert member.get(f"/api/rightsizing/models/{secret.pk}/history/").status_code == 404
    assert member.post(f"/rightsizing/models/{secret.pk}/apply/").status_code == 404
    assert member.post(f"/api/rightsizing/models/{secret.pk}/apply/").status_code == 404
    assert InferenceModel.objects.get(pk=secret.pk).spec["memory"] == "80Gi"
    mine = observed.objects[("InferenceModel", "vision")]
    assert observed.browser("viewer").post(f"/rightsizing/models/{mine.pk}/apply/").status_code == 404
    done = member.post(f"/rightsizing/models/{mine.pk}/apply/", {"next": "https://evil.example/"})
    assert done.status_code == 302 and done["Location"] == "/rightsizing/"
    assert InferenceModel.objects.get(pk=mine.pk).spec["memory"] == "78Gi"
