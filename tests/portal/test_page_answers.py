"""What pages answer in the cases people hit first: a hidden object (DEBUG on, as under ``make
run``), a CRD enum value that reads like "nothing", a run form with no config to offer, and
timestamps (an age, the exact time on hover, never microseconds)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from accounts.models import NamespaceGrant, Team
from clusters.models import AuditEntry
from clusters.sync.audit import json_diff
from models_app.templatetags.ages import age
from tests.conftest import ALL_KIND_PERMS

pytestmark = pytest.mark.django_db
ISO_WITH_FRACTION = re.compile(r"\d{2}:\d{2}:\d{2}\.\d+")


@override_settings(DEBUG=True)
def test_a_hidden_object_gets_the_portals_404_page_with_debug_on(world):
    other_teams = world.objects[("InferenceModel", "nlp")]
    for path in (f"/models/inferencemodels/{other_teams.pk}/", f"/models/inferencemodels/{other_teams.pk}/edit/",
                 f"/configs/{world.objects[('InferenceConfig', 'nlp')].pk}/", "/models/nokind/1/edit/"):  # fmt: skip
        response = world.browser("member").get(path)
        body = response.content.decode()
        assert response.status_code == 404, path
        assert 'id="not-found"' in body and "URLconf" not in body and "urlpatterns" not in body, path
    assert world.api("member").get(f"/api/inferencemodels/{other_teams.pk}/").status_code == 404  # the API's JSON


def test_the_enum_value_none_is_labelled_as_a_value(world):
    page = world.browser("member").get("/configs/new/").content.decode()
    assert '<option value="None">&quot;None&quot; (a value of its own, not unset)</option>' in page
    assert '<option value="DeleteOnSuccess">DeleteOnSuccess</option>' in page
    config = world.objects[("InferenceConfig", "vision")]  # the sample's autoDeletePolicy: None
    assert config.auto_delete_policy == "None"
    for path in ("/configs/", f"/configs/{config.pk}/"):
        assert "&quot;None&quot; (a value of its own, not unset)" in world.browser("member").get(path).content.decode()


def test_a_run_form_without_configs_says_why(world, make_user):
    lonely = world.browser(None)
    lonely.force_login(make_user("nobody", perms=ALL_KIND_PERMS, teams=[]))
    assert "you are in no team with a namespace" in lonely.get("/runs/new/").content.decode()
    empty = Team.objects.create(name="empty")
    NamespaceGrant.objects.create(team=empty, cluster=world.cluster, namespace="sandbox")
    newcomer = world.browser(None)
    newcomer.force_login(make_user("newcomer", perms=ALL_KIND_PERMS, teams=[empty]))
    page = newcomer.get("/runs/new/").content.decode()
    assert "your teams&#x27; namespaces (sandbox) hold none yet" in page and 'href="/configs/new/"' in page
    assert 'id="no-config"' not in world.browser("member").get("/runs/new/").content.decode()


def test_a_moment_reads_as_its_age_with_the_exact_time_on_hover():
    now = timezone.now()
    shown = age(now - timedelta(minutes=3, microseconds=123456))
    exact = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert re.fullmatch(rf'<time datetime="[0-9T:-]+Z" title="{exact}">3\xa0minutes ago</time>', shown), shown
    assert ">in 2\xa0days<" in age(now + timedelta(days=2, hours=1))
    # rounded to the nearest of the largest unit, not cut: a 7-day token made a second ago
    assert ">in 1\xa0week<" in age(now + timedelta(days=7, seconds=-1))
    assert ">in 3\xa0days<" in age(now + timedelta(days=2, hours=13))
    assert ">2\xa0hours ago<" in age(now - timedelta(hours=1, minutes=45))
    assert 'title="2026-01-02 03:04:05 UTC"' in age("2026-01-02T03:04:05.678901Z")  # Kubernetes' text
    assert age(datetime(2026, 1, 2, 3, 4, 5)) == age(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert age(None) == "—" and age("", "never") == "never" and age("not a time") == "not a time"


def test_object_pages_show_ages_never_iso_microseconds(world):
    browser = world.browser("member")
    browser.post(f"/models/inferencemodels/{world.objects[('InferenceModel', 'vision')].pk}/edit/", {})
    for path in ("/", "/runs/", f"/models/inferencemodels/{world.objects[('InferenceModel', 'vision')].pk}/",
                 f"/runs/{world.objects[('InferenceRun', 'vision')].pk}/",
                 f"/configs/{world.objects[('InferenceConfig', 'vision')].pk}/"):  # fmt: skip
        page = browser.get(path).content.decode()
        assert "<time datetime=" in page, path
        assert not ISO_WITH_FRACTION.search(page.split("<pre", 1)[0]), path  # the YAML blocks are as stored


def test_a_new_objects_history_lists_what_it_was_given_without_empty_map_noise(world):
    browser = world.browser("member")
    response = browser.post("/models/inferencemodels/new/", {
        "cluster": "east", "namespace": "vision", "name": "phi-3-mini", "model_name": "phi-3-mini", "memory": "16Gi",
        "backend_url": "http://phi:8000",
    })  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditEntry.objects.get(name="phi-3-mini", action=AuditEntry.Action.CREATED)
    paths = [change["path"] for change in entry.changes]
    assert paths == ["spec"], paths  # the spec it was given; no "labels: not set -> {}"
    assert json_diff({"labels": {}}, {"labels": {"team": "vision"}}) == [
        {"path": "labels.team", "old": None, "new": "vision"}
    ]
    assert json_diff({"spec": {"a": 1}}, {"spec": {"a": 1, "b": {}}}) == []
