"""The lockout cannot be turned against another person, spraying is limited per address, the
client address believes X-Forwarded-For only from trusted proxies, and no live API key is ever
written to the database (sessions included)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from accounts.client_address import client_ip
from accounts.devices import COOKIE
from accounts.models import KnownDevice
from tests.accounts.test_tokens import api_with

pytestmark = pytest.mark.django_db

LIMIT = 10  # LOGIN_FAILURE_LIMIT's default


def login(browser: Client, username: str, password: str) -> int:
    return browser.post("/login/", {"username": username, "password": password}).status_code


def signed_in_once(username: str) -> Client:
    """A browser where ``username`` signed in with the password (so it is a known device), then out."""
    browser = Client()
    assert login(browser, username, "pw-for-tests") == 302
    assert COOKIE in browser.cookies
    browser.post("/logout/")
    return browser


def test_wrong_passwords_for_someone_else_never_lock_them_out_of_their_own_browser(world):
    own = signed_in_once("vera")
    attacker = Client()  # the same address as vera's browser: behind one ingress, everyone's
    codes = [login(attacker, "vera", f"guess-{n}") for n in range(LIMIT + 2)]
    assert codes[: LIMIT - 1] == [200] * (LIMIT - 1) and codes[-1] == 429  # the account is locked for strangers
    assert login(attacker, "vera", "pw-for-tests") == 429  # even with the right password
    assert login(Client(), "vera", "pw-for-tests") == 429  # and any other stranger
    assert login(own, "vera", "pw-for-tests") == 302  # vera's own browser still signs in
    assert own.get("/account/").status_code == 200


def test_nine_wrong_passwords_then_the_owner_signs_in_from_a_new_browser(world):
    attacker = Client()
    assert [login(attacker, "vera", f"guess-{n}") for n in range(9)] == [200] * 9
    assert login(Client(), "vera", "pw-for-tests") == 302


def test_a_known_device_guessing_is_limited_too(world):
    own = signed_in_once("vera")
    codes = [login(own, "vera", f"guess-{n}") for n in range(LIMIT)]
    assert codes == [200] * LIMIT and not KnownDevice.objects.exists()  # the device is forgotten at the limit
    codes = [login(own, "vera", f"guess-{n}") for n in range(LIMIT)]
    assert codes[-1] == 429  # and the browser is a stranger: the account's count applies
    assert login(own, "vera", "pw-for-tests") == 429


def test_another_persons_device_cookie_does_not_pass_the_lockout(world):
    vera_browser = signed_in_once("vera")
    attacker = Client()
    attacker.cookies[COOKIE] = vera_browser.cookies[COOKIE].value
    codes = [login(attacker, "otto", f"guess-{n}") for n in range(LIMIT)]
    assert codes[-1] == 429
    forged = Client()
    forged.cookies[COOKIE] = "forged:cookie"
    assert login(forged, "otto", "pw-for-tests") == 429


def test_spraying_many_user_names_from_one_address_is_limited(world):
    sprayer = Client(REMOTE_ADDR="198.51.100.7")
    codes = [login(sprayer, f"user{n}", "Winter2026!") for n in range(60)]
    assert codes[: LIMIT - 1] == [200] * (LIMIT - 1) and set(codes[LIMIT:]) == {429}
    assert login(sprayer, "vera", "pw-for-tests") == 429  # a right password from there waits too
    sprayed = APIClient(REMOTE_ADDR="198.51.100.7").post(
        "/api/token/", {"username": "vera", "password": "pw-for-tests"}, format="json"
    )
    assert sprayed.status_code == 429
    assert login(Client(REMOTE_ADDR="203.0.113.9"), "vera", "pw-for-tests") == 302  # elsewhere, unaffected


def test_a_success_does_not_reset_the_addresss_count(world):
    sprayer = Client(REMOTE_ADDR="198.51.100.7")
    for round_ in range(3):
        for n in range(LIMIT // 3):
            login(sprayer, f"user{round_}-{n}", "Winter2026!")
        login(Client(REMOTE_ADDR="198.51.100.7"), "otto", "pw-for-tests")  # the sprayer's own account
    assert login(sprayer, "someone", "Winter2026!") == 429


def request_from(remote: str, forwarded: str | None = None):
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    return RequestFactory().get("/", REMOTE_ADDR=remote, **extra)


def test_x_forwarded_for_counts_only_from_trusted_proxies(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "fd00::/8"]
    assert client_ip(request_from("203.0.113.5", "1.2.3.4")) == "203.0.113.5"  # direct: header ignored
    assert client_ip(request_from("10.1.2.3", "198.51.100.7")) == "198.51.100.7"  # through the ingress
    assert client_ip(request_from("10.1.2.3", "1.2.3.4, 198.51.100.7, 10.9.9.9")) == "198.51.100.7"
    assert client_ip(request_from("10.1.2.3", "10.0.0.1, 10.0.0.2")) == "10.0.0.1"  # all trusted: the last
    assert client_ip(request_from("fd00::1", "2001:db8::5")) == "2001:db8::5"
    assert client_ip(request_from("10.1.2.3", "not-an-address, 198.51.100.7")) == "198.51.100.7"
    settings.TRUSTED_PROXIES = []
    assert client_ip(request_from("10.1.2.3", "198.51.100.7")) == "10.1.2.3"


def test_behind_the_web_process_nginx_the_address_it_saw_is_the_start(settings):
    """config/web_server.py: requests come from its nginx on loopback, which names the peer in X-Real-IP."""
    settings.WEB_LOCAL_PROXY, settings.TRUSTED_PROXIES = True, []

    def via_nginx(peer: str, forwarded: str | None = None):
        return RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_REAL_IP=peer,
                                    **({"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}))  # fmt: skip

    assert client_ip(via_nginx("203.0.113.5")) == "203.0.113.5"
    assert client_ip(via_nginx("203.0.113.5", "1.2.3.4")) == "203.0.113.5"  # its own header: not believed
    assert client_ip(via_nginx("127.0.0.1", "1.2.3.4")) == "127.0.0.1"  # loopback is no trusted proxy
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_ip(via_nginx("10.1.2.3", "1.2.3.4, 198.51.100.7")) == "198.51.100.7"  # then the ingress
    assert client_ip(request_from("10.1.2.3", "198.51.100.7")) == "198.51.100.7"  # reached directly: as before
    settings.WEB_LOCAL_PROXY = False
    assert client_ip(via_nginx("203.0.113.5")) == "127.0.0.1"  # no nginx in front: the header is a client's


def test_spraying_through_the_ingress_is_counted_per_real_client(world, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]

    def via_ingress(client: str, forged: str = "") -> Client:
        return Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=f"{forged}{client}")

    codes = [login(via_ingress("198.51.100.7", forged=f"192.0.2.{n}, "), f"user{n}", "x") for n in range(LIMIT + 1)]
    assert codes[-1] == 429  # a forged left-hand entry changes nothing: the ingress's entry counts
    assert login(via_ingress("203.0.113.9"), "vera", "pw-for-tests") == 302  # another client behind it
    direct = [
        login(Client(REMOTE_ADDR="203.0.113.50", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}"), f"u{n}", "x")
        for n in range(LIMIT + 1)
    ]
    assert direct[-1] == 429  # a client talking directly cannot take a fresh address per try


def dump() -> str:
    """Every row of every table, as text, and every session decoded: what a stolen backup shows."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            rows.append(repr(cursor.fetchall()))
    rows += [repr(session.get_decoded()) for session in Session.objects.all()]
    return "\n".join(rows)


def test_a_database_dump_holds_no_live_key_after_a_token_is_created(world):
    assert apps.is_installed("django.contrib.sessions")
    browser = Client()
    browser.force_login(world.member)
    response = browser.post("/account/token/create/", {"name": "laptop", "days": 30})
    assert response.status_code == 302
    before_shown = dump()
    shown = browser.get("/account/").content.decode()
    key = shown.split('<code id="token-key">')[1].split("<")[0]
    assert api_with(key).get("/api/inferencemodels/").status_code == 200  # the key shown works
    assert key not in before_shown and key[8:] not in before_shown  # not even while waiting to be shown
    assert key not in dump()


def test_passwords_tried_or_used_never_reach_a_table(world):
    login(Client(), "vera", "Wr0ng-guess-never-stored")
    login(Client(), "vera", "pw-for-tests")
    APIClient().post("/api/token/", {"username": "vera", "password": "Wr0ng-api-guess"}, format="json")
    everything = dump()
    assert "Wr0ng-guess-never-stored" not in everything and "Wr0ng-api-guess" not in everything
    assert "pw-for-tests" not in everything


def test_the_sealed_key_is_shown_only_to_the_browser_that_created_it(world):
    browser = Client()
    browser.force_login(world.member)
    browser.post("/account/token/create/", {"name": "laptop", "days": 30})
    del browser.cookies["portal_token_seal"]  # e.g. a copied session cookie without the seal
    assert 'id="token-key"' not in browser.get("/account/").content.decode()


def test_the_token_endpoints_throttle_ignores_a_forged_forwarded_header(world, settings):
    settings.AXES_FAILURE_LIMIT = 100  # the throttle alone
    codes = [
        APIClient(HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")
        .post("/api/token/", {"username": f"nobody{n}", "password": "x"}, format="json")
        .status_code
        for n in range(12)
    ]
    assert codes == [400] * 10 + [429] * 2
