"""Single sign-on through a real OpenID Provider (tools/oidc-provider): PKCE, users linked by
issuer and subject, teams and roles from the groups claim brought in step at every login, local
accounts that can be switched off."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group, Permission, User
from django.core.exceptions import PermissionDenied
from django.test import Client

from accounts.models import ExternalIdentity, GroupMapping, Team
from accounts.oidc import NameRefused, portal_username
from clusters.kube.impersonation import identity_of


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


def callback_url(live_server, browser: requests.Session, username: str, password: str) -> str:
    """Starts a sign-in in ``browser`` and signs in at the provider; the portal's callback URL (code
    and state) the provider sends the browser back to, not yet visited."""
    login_page = browser.get(f"{live_server.url}/oidc/authenticate/", timeout=10)
    query = parse_qs(urlsplit(login_page.url).query)
    done = browser.post(
        login_page.url.split("/login/")[0] + "/login/username",
        data={"id": query["authRequestID"][0], "username": username, "password": password},
        allow_redirects=False, timeout=10,
    )  # fmt: skip
    back = browser.get(done.headers["Location"], allow_redirects=False, timeout=10)
    assert back.headers["Location"].startswith(f"{live_server.url}/oidc/callback/"), back.headers["Location"]
    return back.headers["Location"]


def test_a_callback_this_browser_did_not_start_is_a_400_page_saying_so(live_server, sso_provider, transactional_db):
    back = requests.get(f"{live_server.url}/oidc/callback/?code=forged&state=forged", timeout=10)
    assert back.status_code == 400 and "Single sign-on did not complete" in back.text
    assert "not started in this browser" in back.text and 'id="sso-login"' in back.text  # and how to start again


def test_a_reused_code_with_a_valid_state_is_a_400_page_not_a_500(live_server, sso_provider, transactional_db):
    """Issue 40 item 6: the token endpoint's refusal of a code already used was a server error."""
    browser = requests.Session()
    first = callback_url(live_server, browser, "ada", "ada-password")
    assert browser.get(first, timeout=10).url.rstrip("/") == live_server.url  # signed in
    code = parse_qs(urlsplit(first).query)["code"][0]
    again = requests.Session()
    fresh_state = parse_qs(urlsplit(callback_url(live_server, again, "ada", "ada-password")).query)["state"][0]
    replay = again.get(f"{live_server.url}/oidc/callback/?code={code}&state={fresh_state}", timeout=10)
    assert replay.status_code == 400, replay.text[-2000:]
    assert "refused the sign-in code" in replay.text and "invalid_grant" in replay.text
    assert "_auth_user_id" not in replay.text and again.get(f"{live_server.url}/account/", timeout=10).url.endswith(
        "/login/?next=/account/"
    )


def test_the_providers_error_and_an_unreachable_provider_are_400_pages(live_server, sso_provider, settings,
                                                                      transactional_db):
    denied = requests.get(f"{live_server.url}/oidc/callback/?error=access_denied&error_description=no&state=s",
                          timeout=10)  # fmt: skip
    assert denied.status_code == 400 and "access_denied" in denied.text
    browser = requests.Session()
    back = callback_url(live_server, browser, "ada", "ada-password")
    settings.OIDC_OP_TOKEN_ENDPOINT = "http://127.0.0.1:9/oauth/token"  # nothing listens on the discard port
    unreachable = browser.get(back, timeout=30)
    assert unreachable.status_code == 400 and "could not be reached" in unreachable.text


def test_failed_sign_ins_lock_nobody_out(live_server, sso_provider, transactional_db):
    """The provider checks passwords: a failed sign-in names no user, counts for nobody and is
    refused by no count (before, each counted against the one address everyone shares)."""
    User.objects.create_user("root", password="break-glass-pw")
    browser = requests.Session()
    for n in range(12):  # each with a state this browser started, and a code the provider refuses
        started = browser.get(f"{live_server.url}/oidc/authenticate/", allow_redirects=False, timeout=10)
        state = parse_qs(urlsplit(started.headers["Location"]).query)["state"][0]
        failed = browser.get(f"{live_server.url}/oidc/callback/?code=forged{n}&state={state}", timeout=10)
        assert failed.status_code == 400 and "refused the sign-in code" in failed.text
    sso_login(live_server, "ada", "ada-password")
    assert Client().post("/login/", {"username": "root", "password": "break-glass-pw"}).status_code == 302


def test_provider_names_are_normalized_and_reserved_ones_refused(live_server, sso_provider, transactional_db):
    sso_provider.add_user("u-ctrl", "system:kube-controller-manager", "ctrl-password", groups=[])
    sso_provider.add_user("u-grace", "Grace Hopper/Ops", "grace-password", groups=[])
    sso_provider.start()  # restarted: it reads its users at start
    browser = requests.Session()
    refused = browser.get(callback_url(live_server, browser, "system:kube-controller-manager", "ctrl-password"),
                          timeout=10)  # fmt: skip
    assert refused.status_code == 403 and "is reserved" in refused.text
    assert not User.objects.filter(username__icontains="system").exists()
    sso_login(live_server, "Grace Hopper/Ops", "grace-password")
    grace = User.objects.get(external_identity__subject="u-grace")
    assert grace.username == "grace-hopper-ops"
    assert identity_of(grace)[0] == "oidc:grace-hopper-ops"  # what an impersonating cluster sees


@pytest.mark.parametrize(
    ("given", "name"),
    [("Ada", "ada"), ("\uff21\uff24\uff21", "ada"), ("ada lovelace", "ada-lovelace"), ("a:b::c", "a-b-c"),
     ("..ada..", "ada"), ("ada@example.com", "ada@example.com"), ("日本", "")],
)  # fmt: skip
def test_the_name_rule(given, name):
    assert portal_username(given) == name


@pytest.mark.parametrize(
    "given", ["system:kube-controller-manager", "SYSTEM:admin", "\uff53\uff59\uff53\uff54\uff45\uff4d:node:x",
              " system:x"],
)
def test_reserved_names_are_refused(given):
    with pytest.raises(NameRefused, match="reserved"):
        portal_username(given)


def test_a_reserved_cluster_identity_is_never_impersonated(transactional_db, settings):
    local = User.objects.create_user("system:masters-by-code")  # code can make one; forms cannot
    with pytest.raises(PermissionDenied, match="reserved"):
        identity_of(local)
    settings.IMPERSONATE_OIDC_USER_PREFIX = "system:"  # a careless setting cannot reach them either
    linked = User.objects.create_user("ada")
    ExternalIdentity.objects.create(user=linked, issuer="https://idp.example", subject="u-ada")
    with pytest.raises(PermissionDenied, match="reserved"):
        identity_of(User.objects.get(pk=linked.pk))
    assert identity_of(User.objects.create_user("bob"))[0] == "bob"  # local accounts: IMPERSONATE_USER_PREFIX
