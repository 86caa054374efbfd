"""Single sign-on through a real OpenID Provider (tools/oidc-provider): PKCE, users linked by
issuer and subject, teams and roles from the groups claim brought in step at every login, local
accounts that can be switched off."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from accounts.models import ExternalIdentity, GroupMapping, Team


def sso_login(live_server, username: str, password: str) -> requests.Session:
    """Signs in as a browser would: the portal's button, the provider's login page, back to the portal."""
    browser = requests.Session()
    login_page = browser.get(f"{live_server.url}/oidc/authenticate/", timeout=10)
    query = parse_qs(urlsplit(login_page.url).query)
    done = browser.post(
        login_page.url.split("/login/")[0] + "/login/username",
        data={"id": query["authRequestID"][0], "username": username, "password": password},
        timeout=10,
    )
    assert done.url.rstrip("/") == live_server.url, done.url  # back home, signed in
    return browser


@pytest.fixture
def mapped(transactional_db) -> dict[str, Team]:
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    member_role = Group.objects.create(name="model editors")  # transactional_db has flushed the ready-made ones
    member_role.permissions.add(Permission.objects.get(codename="add_inferencemodel"))
    GroupMapping.objects.create(group="ml-vision", team=vision, role=member_role)
    GroupMapping.objects.create(group="ml-nlp", team=nlp)
    return {"vision": vision, "nlp": nlp}


def test_the_login_page_offers_the_provider(live_server, sso_provider, transactional_db):
    page = requests.get(f"{live_server.url}/login/", timeout=10).text
    assert "Sign in with Test IdP" in page and 'name="password"' in page


def test_sign_in_uses_pkce_and_links_the_provider_account(live_server, sso_provider, mapped):
    authorize = requests.get(f"{live_server.url}/oidc/authenticate/", allow_redirects=False, timeout=10)
    query = parse_qs(urlsplit(authorize.headers["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) >= 43
    browser = sso_login(live_server, "ada", "ada-password")
    assert browser.get(f"{live_server.url}/account/", timeout=10).status_code == 200
    user = User.objects.get(external_identity__subject="u-ada")
    assert user.username == "ada" and not user.has_usable_password()
    assert ExternalIdentity.objects.get().issuer == sso_provider.issuer


def test_groups_become_teams_and_roles_and_follow_the_provider_at_every_login(live_server, sso_provider, mapped):
    hand_made = Team.objects.create(name="hand-made")
    sso_login(live_server, "ada", "ada-password")
    ada = User.objects.get(username="ada")
    hand_made.members.add(ada)
    assert set(ada.teams.values_list("name", flat=True)) == {"vision", "hand-made"}
    assert ada.has_perm("models_app.add_inferencemodel")
    sso_provider.set_groups("u-ada", ["ml-nlp"])
    sso_login(live_server, "ada", "ada-password")
    ada = User.objects.get(username="ada")  # fresh: permission caches empty
    assert set(ada.teams.values_list("name", flat=True)) == {"nlp", "hand-made"}  # unmapped teams stay
    assert not ada.has_perm("models_app.add_inferencemodel")  # the role went with the group


def test_a_provider_account_never_takes_over_a_local_one(live_server, sso_provider, mapped):
    local = User.objects.create_user("ada", password="break-glass", is_staff=True)
    sso_login(live_server, "ada", "ada-password")
    linked = User.objects.get(external_identity__subject="u-ada")
    assert linked.pk != local.pk and linked.username.startswith("ada.") and not linked.is_staff


def test_local_accounts_can_be_switched_off(live_server, sso_provider, settings, transactional_db):
    User.objects.create_user("root", password="break-glass-pw")
    settings.LOCAL_ACCOUNTS = False
    page = requests.get(f"{live_server.url}/login/", timeout=10).text
    assert "Sign in with Test IdP" in page and 'name="password"' not in page
    browser = Client()
    refused = browser.post("/login/", {"username": "root", "password": "break-glass-pw"})
    assert refused.status_code == 200 and "_auth_user_id" not in browser.session
    settings.LOCAL_ACCOUNTS = True
    assert browser.post("/login/", {"username": "root", "password": "break-glass-pw"}).status_code == 302


def test_a_failed_sign_in_comes_back_to_the_login_page_saying_so(live_server, sso_provider, transactional_db):
    back = requests.get(f"{live_server.url}/oidc/callback/?code=forged&state=forged", timeout=10)
    assert back.url.startswith(f"{live_server.url}/login/") and "Single sign-on did not complete" in back.text
