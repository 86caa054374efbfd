"""The session's user (accounts.oidc.LocalAccountBackend.get_user) is read in one statement: the
same user, field for field, as Django's ModelBackend reads, and no user where it gives none."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.oidc import LocalAccountBackend

pytestmark = pytest.mark.django_db


def _fields(user: User) -> dict[str, object]:
    return {field.attname: getattr(user, field.attname) for field in User._meta.concrete_fields}


def test_the_user_read_is_the_orms_field_for_field() -> None:
    user = User.objects.create_user("rëader", email="r@example.com", password="pw-1234-long", first_name="Ré",
                                    is_staff=True)  # fmt: skip
    User.objects.filter(pk=user.pk).update(last_login=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC))
    read, expected = LocalAccountBackend().get_user(user.pk), ModelBackend().get_user(user.pk)
    assert type(read) is User and read.pk == user.pk
    assert _fields(read) == _fields(expected)
    assert (read._state.db, read._state.adding) == (expected._state.db, expected._state.adding)
    assert read.last_login == datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_a_string_id_from_the_session_reads_the_same_user() -> None:
    user = User.objects.create_user("stringy")
    assert LocalAccountBackend().get_user(str(user.pk)).pk == user.pk


def test_no_user_where_modelbackend_gives_none() -> None:
    inactive = User.objects.create_user("gone", is_active=False)
    backend = LocalAccountBackend()
    assert backend.get_user(inactive.pk) is None and ModelBackend().get_user(inactive.pk) is None
    assert backend.get_user(inactive.pk + 1000) is None


def test_a_signed_in_request_reads_its_user_in_one_statement() -> None:
    browser = Client()
    user = User.objects.create_user("api-reader")
    browser.force_login(user, backend="accounts.oidc.LocalAccountBackend")
    with CaptureQueriesContext(connection) as queries:
        response = browser.get("/api/inferencemodels/")
    assert response.status_code == 200
    reads = [query["sql"] for query in queries.captured_queries if '"auth_user"' in query["sql"]]
    assert len(reads) == 1 and reads[0].startswith("SELECT ")
    User.objects.filter(pk=user.pk).update(is_active=False)
    # a deactivated user's session signs nobody in: unauthenticated, 401 with the token challenge
    assert browser.get("/api/inferencemodels/").status_code == 401
