"""API tokens: hashed at rest, several per person, named, expiring, shown once; CSRF on the forms;
``/api/token/`` always issues a new token; password guessing is throttled and locked out."""

from __future__ import annotations

import importlib
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db

KEY = re.compile(r'<code id="token-key">([^<]+)</code>')


def create(browser: Client, name: str, days: int = 30) -> str:
    """Post the form, follow the redirect (post/redirect/get) and read the key shown once."""
    response = browser.post("/account/token/create/", {"name": name, "days": days})
    assert response.status_code == 302 and response["Location"] == "/account/"
    shown = browser.get("/account/")
    assert "no-store" in shown["Cache-Control"]
    return KEY.search(shown.content.decode()).group(1)


def test_reloading_the_page_after_creating_a_token_neither_creates_another_nor_shows_the_key(world):
    browser = world.browser("member")
    key = create(browser, "laptop")
    reloaded = browser.get("/account/").content.decode()  # what a reload of the redirected page does
    assert key not in reloaded and 'id="token-key"' not in reloaded
    assert ApiToken.objects.filter(user=world.member).count() == 1


def api_with(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def test_tokens_are_named_several_shown_once_hashed_and_revoked_one_by_one(world):
    browser = world.browser("member")
    assert "You have no API token" in browser.get("/account/").content.decode()
    ci, laptop = create(browser, "ci"), create(browser, "laptop", days=7)
    page = browser.get("/account/").content.decode()
    assert "ci" in page and "laptop" in page and ci not in page and laptop not in page

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        dump = repr(cursor.fetchall())
    assert ci not in dump and laptop not in dump  # only digests (and the first characters) are stored

    listed = api_with(ci).get("/api/inferencemodels/").json()["results"]
    assert {item["metadata"]["namespace"] for item in listed} == {"vision"}  # as scoped as its user
    laptop_row = ApiToken.objects.get(name="laptop")
    assert timedelta(days=6) < laptop_row.expiry - timezone.now() <= timedelta(days=7)

    browser.post(f"/account/token/{laptop_row.digest}/revoke/")
    stale = api_with(laptop).get("/api/inferencemodels/")
    assert (stale.status_code, stale.headers["WWW-Authenticate"], stale.json()["detail"]) == (
        401, "Token", "Invalid token.")
    assert api_with(ci).get("/api/inferencemodels/").status_code == 200  # the other one still works


def test_expired_tokens_stop_working(world):
    key = create(world.browser("member"), "old", days=1)
    ApiToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    expired = api_with(key).get("/api/inferencemodels/")
    assert (expired.status_code, expired.headers["WWW-Authenticate"], expired.json()["detail"]) == (
        401, "Token", "Invalid token.")


def test_nobody_revokes_another_persons_token(world):
    key = create(world.browser("member"), "mine")
    world.browser("other").post(f"/account/token/{ApiToken.objects.get().digest}/revoke/")
    assert api_with(key).get("/api/inferencemodels/").status_code == 200


@override_settings(API_TOKEN_LIMIT=2)
def test_tokens_per_person_are_limited(world):
    browser = world.browser("member")
    create(browser, "a"), create(browser, "b")
    refused = browser.post("/account/token/create/", {"name": "c", "days": 30})
    assert refused.status_code == 400 and "revoke one first" in refused.content.decode()


def test_token_forms_need_csrf_and_login(world):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.member)
    assert strict.post("/account/token/create/", {"name": "x", "days": 30}).status_code == 403
    assert not ApiToken.objects.exists()
    page = strict.get("/account/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    created = strict.post("/account/token/create/", {"csrfmiddlewaretoken": token, "name": "x", "days": 30})
    assert created.status_code == 302
    digest = ApiToken.objects.get().digest
    assert strict.post(f"/account/token/{digest}/revoke/").status_code == 403
    anonymous = Client()
    assert anonymous.get("/account/").status_code == 302
    assert anonymous.post("/account/token/create/").status_code == 302
    assert strict.get("/account/token/create/").status_code == 405


def test_api_token_endpoint_issues_a_new_token_each_time(world):
    api = APIClient()
    first = api.post("/api/token/", {"username": "vera", "password": "pw-for-tests", "name": "ci"}, format="json")
    second = api.post("/api/token/", {"username": "vera", "password": "pw-for-tests"}, format="json")
    assert first.status_code == second.status_code == 201
    assert first.json()["token"] != second.json()["token"] and first.json()["expiry"]
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["api", "ci"]
    assert api_with(first.json()["token"]).get("/api/inferencemodels/").status_code == 200
    world.member.refresh_from_db()
    assert world.member.last_login is not None  # a password login, recorded like the form's


def test_wrong_passwords_lock_the_user_out_of_the_login_form_and_the_api(world, settings):
    settings.AXES_FAILURE_LIMIT = 5
    browser = Client()
    for attempt in range(120):
        response = browser.post("/login/", {"username": "vera", "password": f"guess-{attempt}"})
        if response.status_code == 429:
            break
    assert attempt == 4  # the 5th wrong password (LOGIN_FAILURE_LIMIT) locks the pair out
    refused = browser.post("/login/", {"username": "vera", "password": "pw-for-tests"})
    assert refused.status_code == 429  # even the right password, until the cool-off ends
    api = APIClient().post("/api/token/", {"username": "vera", "password": "pw-for-tests"}, format="json")
    assert api.status_code == 429 and not ApiToken.objects.exists()


def test_api_token_endpoint_is_throttled_per_person(world, settings):
    settings.AXES_FAILURE_LIMIT = 100  # the throttle alone (the lockout would come first)
    api = APIClient()
    codes = [
        api.post("/api/token/", {"username": "vera", "password": f"x{n}"}, format="json").status_code
        for n in range(12)
    ]
    assert codes == [400] * 10 + [429] * 2  # TOKEN_THROTTLE_RATE: 10/min by default


def test_account_page_lists_the_teams_grants(world):
    page = world.browser("viewer").get("/account/").content.decode()
    assert "watchers" in page and "vision" in page and "View</td>" in page


def test_migration_hashes_drf_plaintext_tokens_and_keeps_them_working(world):
    from django.apps import apps

    migration = importlib.import_module("accounts.migrations.0002_api_tokens")
    key = "0123456789abcdef" * 2 + "01234567"  # a DRF key: 40 hex digits, stored as is
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, user_id integer, created timestamp)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)", [key, world.member.pk, timezone.now()])
    with connection.schema_editor() as editor:
        migration.hash_drf_tokens(apps, editor)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone() == (0,)
    assert ApiToken.objects.get().name == "migrated"
    assert api_with(key).get("/api/inferencemodels/").status_code == 200
