"""The lockout cannot be turned against another person from any address, spraying is limited per
address where the address is a client's (trusted proxies), the client address believes
X-Forwarded-For only from trusted proxies, and no live API key is ever
written to the database (sessions included)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from accounts.client_address import client_address, client_ip
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


INGRESS = "10.0.0.2"  # the ingress controller's pod, in TRUSTED_PROXIES where the tests set them


def via_ingress(client: str, api: bool = False) -> Client:
    """A browser (or API client) behind the ingress, which names it in X-Forwarded-For."""
    return (APIClient if api else Client)(REMOTE_ADDR=INGRESS, HTTP_X_FORWARDED_FOR=client)


def admin_login(browser: Client, username: str, password: str) -> int:
    response = browser.post("/admin/login/", {"username": username, "password": password, "next": "/admin/"})
    return response.status_code


def token_request(client: APIClient, username: str, password: str) -> int:
    return client.post("/api/token/", {"username": username, "password": password}, format="json").status_code


@pytest.mark.parametrize("trusted", [[], ["10.0.0.0/8"]], ids=["no-trusted-proxies", "trusted-ingress"])
def test_nobody_can_lock_other_people_out_from_any_address(world, settings, trusted):
    """Issue 40 item 4: one person's wrong passwords (for someone, and sprayed over many names) once
    locked every new browser and CLI behind the one ingress out. Now only strangers to the account
    guessed at wait; other people sign in from new browsers, the admin and the API, staff too."""
    settings.TRUSTED_PROXIES = trusted

    def attacker(api: bool = False) -> Client:
        return via_ingress("198.51.100.7", api) if trusted else (APIClient() if api else Client())

    assert [login(attacker(), "vera", f"guess-{n}") for n in range(LIMIT + 1)][-1] == 429
    for n in range(LIMIT + 1):
        admin_login(attacker(), f"sprayed{n}", "Winter2026!")
        token_request(attacker(api=True), f"sprayed-api{n}", "Winter2026!")
    if trusted:  # the attacker's own address is a client's: it is locked out, whoever it names
        assert login(attacker(), "otto", "pw-for-tests") == 429
        elsewhere = lambda api=False: via_ingress("203.0.113.9", api)  # noqa: E731
    else:  # the address is the ingress's, everyone's: it counts for nobody
        elsewhere = attacker
    assert login(elsewhere(), "otto", "pw-for-tests") == 302
    assert admin_login(elsewhere(), "stan", "pw-for-tests") == 302
    assert token_request(elsewhere(api=True), "wes", "pw-for-tests") == 201
    assert login(elsewhere(), "vera", "pw-for-tests") == 429  # only the person guessed at, from new devices


def test_known_devices_of_a_person_under_attack_sign_in_everywhere(world):
    browser = signed_in_once("vera")
    cli = APIClient()
    assert token_request(cli, "vera", "pw-for-tests") == 201  # a CLI that keeps its cookies
    assert COOKIE in cli.cookies
    attacker = Client()
    for n in range(LIMIT + 1):
        login(attacker, "vera", f"guess-{n}")
        token_request(APIClient(), "vera", f"guess-{n}")
    assert token_request(APIClient(), "vera", "pw-for-tests") == 429
    assert login(browser, "vera", "pw-for-tests") == 302
    assert admin_login(browser, "vera", "pw-for-tests") == 200  # past the lockout, to "not a staff account"
    assert token_request(cli, "vera", "pw-for-tests") == 201


def test_spraying_many_user_names_from_one_client_address_is_limited(world, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    codes = [login(via_ingress("198.51.100.7"), f"user{n}", "Winter2026!") for n in range(LIMIT + 5)]
    assert codes[: LIMIT - 1] == [200] * (LIMIT - 1) and set(codes[LIMIT:]) == {429}
    assert login(via_ingress("198.51.100.7"), "vera", "pw-for-tests") == 429  # a right password from there waits
    assert token_request(via_ingress("198.51.100.7", api=True), "vera", "pw-for-tests") == 429
    assert login(via_ingress("203.0.113.9"), "vera", "pw-for-tests") == 302  # elsewhere, unaffected


def test_without_trusted_proxies_nothing_is_counted_per_address(world, settings):
    settings.TRUSTED_PROXIES = []
    codes = [login(Client(REMOTE_ADDR="198.51.100.7"), f"user{n}", "Winter2026!") for n in range(LIMIT + 5)]
    assert set(codes) == {200}  # each name once: only the per-person counts, none reached
    assert login(Client(REMOTE_ADDR="198.51.100.7"), "vera", "pw-for-tests") == 302


def test_a_trusted_proxy_that_names_nobody_is_not_counted_as_a_client(world, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    codes = [login(Client(REMOTE_ADDR=INGRESS), f"user{n}", "Winter2026!") for n in range(LIMIT + 5)]
    assert set(codes) == {200}
    assert login(Client(REMOTE_ADDR=INGRESS), "vera", "pw-for-tests") == 302


def test_a_success_does_not_reset_the_addresss_count(world, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    for round_ in range(3):
        for n in range(LIMIT // 3):
            login(via_ingress("198.51.100.7"), f"user{round_}-{n}", "Winter2026!")
        login(via_ingress("198.51.100.7"), "otto", "pw-for-tests")  # the sprayer's own account
    assert login(via_ingress("198.51.100.7"), "someone", "Winter2026!") == 429


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


def test_the_token_endpoints_throttle_counts_per_person_and_per_client_address(world, settings):
    settings.AXES_FAILURE_LIMIT = 100  # the throttle alone
    forged = [token_request(APIClient(HTTP_X_FORWARDED_FOR=f"192.0.2.{n}"), " nobody " if n % 2 else "nobody", "x")
              for n in range(12)]  # fmt: skip
    assert forged == [400] * 10 + [429] * 2  # one person (spaces trimmed as the check does): no fresh allowance
    assert token_request(APIClient(), "otto", "pw-for-tests") == 201  # another person, the same address
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    sprayed = [token_request(via_ingress("198.51.100.7", api=True), f"someone{n}", "x") for n in range(12)]
    assert sprayed == [400] * 10 + [429] * 2  # one client address, where it is a client's
    assert token_request(via_ingress("203.0.113.9", api=True), "wes", "pw-for-tests") == 201


def test_the_address_counted_is_a_clients_only_with_trusted_proxies(settings):
    settings.TRUSTED_PROXIES = []
    assert client_address(request_from("198.51.100.7")) is None  # maybe an ingress: nobody's
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_address(request_from("10.1.2.3", "198.51.100.7")) == "198.51.100.7"
    assert client_address(request_from("10.1.2.3", "10.0.0.1, 10.0.0.2")) == "10.0.0.1"  # named by the ingress
    assert client_address(request_from("10.1.2.3")) is None  # the ingress named nobody
    assert client_address(request_from("203.0.113.5", "1.2.3.4")) == "203.0.113.5"  # direct: its own
