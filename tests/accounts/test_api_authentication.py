"""The REST API's answers to who is calling, as DRF and HTTP clients expect them: not
authenticated (no credentials, a malformed, expired or revoked token, a deactivated session) is
401 with ``WWW-Authenticate: Token``, the challenge of knox's class, first in
``DEFAULT_AUTHENTICATION_CLASSES``; authenticated but not allowed is 403 without a challenge; a
browser's session still reads the API and still needs CSRF to write."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.tokens import issue_token
from tests.accounts.conftest import ENDPOINTS

pytestmark = pytest.mark.django_db
LIST = ENDPOINTS["InferenceModel"]


def token_client(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def assert_unauthenticated(response, detail: str) -> None:
    assert (response.status_code, response.headers.get("WWW-Authenticate")) == (401, "Token"), response.content
    assert response.json() == {"detail": detail}


def test_no_malformed_expired_or_revoked_token_is_401_with_the_challenge(world) -> None:
    missing = "Authentication credentials were not provided."
    assert_unauthenticated(APIClient().get(LIST), missing)
    assert_unauthenticated(APIClient().post(LIST, {}, format="json"), missing)
    assert_unauthenticated(APIClient().post("/api/apply/", "kind: InferenceModel", content_type="application/yaml"),
                           missing)
    assert_unauthenticated(token_client("not-a-token").get(LIST), "Invalid token.")
    no_key = APIClient()
    no_key.credentials(HTTP_AUTHORIZATION="Token")
    assert_unauthenticated(no_key.get(LIST), "Invalid token header. No credentials provided.")

    expired_row, expired = issue_token(world.member, "expired")
    revoked_row, revoked = issue_token(world.member, "revoked")
    for key in (expired, revoked):
        assert token_client(key).get(LIST).status_code == 200
    ApiToken.objects.filter(pk=expired_row.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    revoked_row.delete()
    for key in (expired, revoked):
        assert_unauthenticated(token_client(key).get(LIST), "Invalid token.")


def test_authenticated_but_not_allowed_stays_403_without_a_challenge(world) -> None:
    _, key = issue_token(world.viewer, "viewer")
    refused = token_client(key).post("/api/clusters/", {"name": "new"}, format="json")
    assert refused.status_code == 403 and "WWW-Authenticate" not in refused.headers
    session = world.browser("viewer")
    refused = session.post("/api/clusters/", {"name": "new"}, content_type="application/json")
    assert refused.status_code == 403 and "WWW-Authenticate" not in refused.headers


def test_a_browser_session_reads_the_api_and_writes_only_with_csrf(world) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.member)
    listed = browser.get(LIST)
    assert listed.status_code == 200 and listed.json()["results"]

    obj = world.objects[("InferenceModel", "vision")]
    patch = {"metadata": {"labels": {"owner": "vision"}}}
    url = f"{LIST}{obj.pk}/"
    refused = browser.patch(url, patch, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]  # a session never writes without it
    page = browser.get("/account/").content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    patched = browser.patch(url, patch, content_type="application/json", headers={"X-CSRFToken": csrf})
    assert patched.status_code == 200, patched.content

    # A token is not ambient authority (a cross-site form cannot send it): no CSRF with one.
    _, key = issue_token(world.member, "script")
    assert token_client(key).patch(url, patch, format="json").status_code == 200
    # A request naming a token is judged by that token, not by a session riding along with it.
    assert_unauthenticated(browser.get(LIST, headers={"Authorization": "Token not-a-token"}), "Invalid token.")
