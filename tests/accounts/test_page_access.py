"""Authorization matrix of the portal pages: anonymous -> login; another team -> 404; member/staff -> 200."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

OPEN_PAGES = ["/", "/models/", "/runs/", "/runs/new/", "/planning/", "/calculator/", "/rightsizing/", "/account/",
              "/models/inferencemodels/new/", "/models/kubeai-models/new/yaml/"]  # fmt: skip


def object_pages(world) -> list[str]:
    """Every page of vision's objects (the member's team; 'other' is in nlp)."""
    pages = []
    for kind, slug in (
        ("InferenceModel", "inferencemodels"),
        ("Model", "kubeai-models"),
        ("ModelService", "modelservices"),
    ):
        pk = world.objects[(kind, "vision")].pk
        pages += [f"/models/{slug}/{pk}/", f"/models/{slug}/{pk}/edit/", f"/models/{slug}/{pk}/yaml/"]
    run = world.objects[("InferenceRun", "vision")].pk
    return [
        *pages,
        f"/runs/{run}/",
        f"/runs/{run}/status/",
        f"/rightsizing/models/{world.objects[('InferenceModel', 'vision')].pk}/",
    ]


def test_anonymous_users_see_only_the_login_page(world):
    anonymous = world.browser(None)
    for url in [*OPEN_PAGES, *object_pages(world)]:
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
    assert anonymous.get("/login/").status_code == 200
    for url in ("/api/schema/", "/api/inferencemodels/", "/api/planning/pools/"):
        answer = anonymous.get(url)
        assert (answer.status_code, answer.headers.get("WWW-Authenticate")) == (401, "Token"), url
    for url in ("/api/docs/", "/api/redoc/"):  # pages for people: to the login page, and back after it
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"] == f"/login/?next={url}", url


def test_member_staff_and_another_team(world):
    member, staff, other, viewer = (world.browser(who) for who in ("member", "staff", "other", "viewer"))
    for url in OPEN_PAGES:
        assert member.get(url).status_code == 200, url
        assert staff.get(url).status_code == 200, url
    for url in object_pages(world):
        assert member.get(url).status_code == 200, url
        assert staff.get(url).status_code == 200, url
        response = other.get(url)
        assert response.status_code == 404, url
        assert b"llama" not in response.content and b"gemma" not in response.content
        expected = 404 if url.endswith(("/edit/", "/yaml/")) else 200  # view-only team: read, never edit
        assert viewer.get(url).status_code == expected, url


def test_writes_without_model_permission_are_403(world, make_user):
    reader = make_user("reader", teams=[world.vision])  # in the team, but no add/change permission
    browser = world.browser(None)
    browser.force_login(reader)
    pk = world.objects[("InferenceModel", "vision")].pk
    assert browser.get("/models/inferencemodels/new/").status_code == 403
    assert browser.get(f"/models/inferencemodels/{pk}/edit/").status_code == 403
    assert browser.get("/runs/new/").status_code == 403
    assert browser.post(f"/models/inferencemodels/{pk}/resolve/", {"take": "portal"}).status_code == 403
    assert browser.get(f"/models/inferencemodels/{pk}/").status_code == 200


def test_every_portal_form_needs_csrf(world):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.member)
    pk = world.objects[("InferenceModel", "vision")].pk
    config = world.objects[("InferenceConfig", "vision")].pk
    for url, data in (
        ("/models/inferencemodels/new/", {"cluster": "east", "namespace": "vision", "name": "x"}),
        (f"/models/inferencemodels/{pk}/edit/", {}),
        ("/models/inferencemodels/new/yaml/", {"cluster": "east", "manifest": "kind: InferenceModel"}),
        (f"/models/inferencemodels/{pk}/resolve/", {"take": "portal"}),
        ("/runs/new/", {"config": config}),
        (f"/rightsizing/models/{pk}/apply/", {}),
        ("/planning/", {"cluster": "east", "models": "[]"}),
        ("/account/token/create/", {}),
        ("/logout/", {}),
    ):
        assert strict.post(url, data).status_code == 403, url
