"""Sessions read from the shared cache (Redis) where the deploy has one, the database behind it:
ending a session, in any process, ends it for every process on its next request."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from tests.support.services import require_redis

CACHED_DB = "django.contrib.sessions.backends.cached_db"


def engine_with(cache_url: str) -> str:
    """SESSION_ENGINE as a process started with CACHE_URL=``cache_url`` reads it."""
    code = "import django; django.setup(); from django.conf import settings; print(settings.SESSION_ENGINE)"
    environment = {**os.environ, "CACHE_URL": cache_url, "CELERY_BROKER_URL": ""}
    result = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, env=environment,
                            capture_output=True, text=True, check=True)  # fmt: skip
    return result.stdout.strip()


def test_sessions_are_cached_only_in_a_cache_every_process_shares() -> None:
    assert engine_with("redis://127.0.0.1:6379/12") == CACHED_DB
    assert engine_with("") == "django.contrib.sessions.backends.db"  # each process's own memory: no


@pytest.fixture
def shared_cache():
    """The deploy's session setting over the test Redis, keys of this test process only."""
    cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": require_redis(),
             "KEY_PREFIX": f"test-session-cache-{os.getpid()}"}  # fmt: skip
    with override_settings(SESSION_ENGINE=CACHED_DB, CACHES={"default": cache}):
        yield


def signed_in_pair(user: User) -> tuple[Client, Client]:
    """Two clients (two browsers' tabs, or two workers' view of one cookie) on one session."""
    first = Client()
    first.force_login(user)
    second = Client()
    second.cookies = first.cookies
    return first, second


@pytest.mark.django_db
def test_a_session_ended_anywhere_is_ended_on_the_next_request(shared_cache) -> None:
    user = User.objects.create_user("cached", password="pw-1234-long")
    first, second = signed_in_pair(user)
    assert second.get("/").status_code == 200  # read, and now cached
    first.post("/logout/")
    assert second.get("/").status_code == 302  # its cached copy went with it


@pytest.mark.django_db
def test_a_password_changed_elsewhere_ends_a_cached_session(shared_cache) -> None:
    user = User.objects.create_user("cached", password="pw-1234-long")
    first, _ = signed_in_pair(user)
    assert first.get("/").status_code == 200
    user.set_password("another-pw-5678")  # as another process (the admin, a reset) would
    user.save()
    assert first.get("/").status_code == 302
