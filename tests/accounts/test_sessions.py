"""The portal's session engine (accounts/sessions.py) reads what Django's database sessions read:
the key's session while it has not expired, else an empty one and no key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from accounts.sessions import SessionStore

pytestmark = pytest.mark.django_db


def test_the_portal_uses_it() -> None:
    assert settings.SESSION_ENGINE == "accounts.sessions"


def test_a_saved_session_reads_back_until_it_expires() -> None:
    saved = SessionStore()
    saved["team"], saved["seen"] = "ml<1>", [1, 2]
    saved.save()
    assert SessionStore(saved.session_key).load() == {"team": "ml<1>", "seen": [1, 2]}
    Session.objects.filter(pk=saved.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    expired = SessionStore(saved.session_key)
    assert (expired.load(), expired.session_key) == ({}, None)


def test_an_unknown_key_reads_as_no_session() -> None:
    unknown = SessionStore("x" * 32)
    assert (unknown.load(), unknown.session_key) == ({}, None)


def test_a_signed_in_browser_stays_signed_in_until_its_session_ends() -> None:
    browser = Client()
    browser.force_login(User.objects.create_user("reader", password="pw-1234-long"))
    assert browser.get("/").status_code == 200
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = browser.get("/")
    assert (response.status_code, response["Location"]) == (302, "/login/?next=/")
