"""API tokens: created in the portal, shown once, never again, revocable; CSRF on the forms."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_token_is_shown_once_works_and_is_revoked(world):
    browser = world.browser("member")
    assert "You have no API token" in browser.get("/account/").content.decode()
    created = browser.post("/account/token/create/")
    key = re.search(r'<code id="token-key">([0-9a-f]{40})</code>', created.content.decode()).group(1)
    assert "no-store" in created["Cache-Control"]
    assert Token.objects.get(user=world.member).key == key
    later = browser.get("/account/").content.decode()
    assert key not in later and "Its key is never shown again" in later

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    listed = api.get("/api/inferencemodels/").json()["results"]
    assert {item["metadata"]["namespace"] for item in listed} == {"vision"}  # the token is as scoped as its user

    replaced = browser.post("/account/token/create/").content.decode()
    assert key not in replaced
    stale = api.get("/api/inferencemodels/")
    assert stale.status_code in (401, 403) and stale.json()["detail"] == "Invalid token."
    browser.post("/account/token/revoke/")
    assert not Token.objects.filter(user=world.member).exists()


def test_token_forms_need_csrf_and_login(world):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.member)
    assert strict.post("/account/token/create/").status_code == 403
    assert not Token.objects.filter(user=world.member).exists()
    page = strict.get("/account/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert strict.post("/account/token/create/", {"csrfmiddlewaretoken": token}).status_code == 200
    anonymous = Client()
    assert anonymous.get("/account/").status_code == 302
    assert anonymous.post("/account/token/create/").status_code == 302
    assert strict.get("/account/token/create/").status_code == 405


def test_account_page_lists_the_teams_grants(world):
    page = world.browser("viewer").get("/account/").content.decode()
    assert "watchers" in page and "vision" in page and "View</td>" in page
