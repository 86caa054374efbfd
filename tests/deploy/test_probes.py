"""/healthz and /readyz as a worker answers them: anonymous, reachable as the kubelet calls them, and
honest about the database, its migrations, the cache and the broker (naming what is missing) without
revealing where any is. tests/deploy/test_busy_probes.py checks them through the deploy's server."""

from __future__ import annotations

import socket

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from config import probes
from tests.support.services import require_redis

POD_ADDRESS = "10.244.0.7:8000"  # the kubelet's Host header: the pod IP, never in ALLOWED_HOSTS


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def production_like(settings):
    """Plain http to an https-only site, as production settings see a probe."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["portal.example.com"]
    return settings


def test_liveness_answers_anonymously_at_the_pod_address(client, production_like) -> None:
    response = client.get("/healthz", HTTP_HOST=POD_ADDRESS)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readiness_checks_database_migrations_cache_and_broker(client, production_like) -> None:
    production_like.CELERY_BROKER_URL = production_like.CACHE_URL = require_redis()
    response = client.get("/readyz", HTTP_HOST=POD_ADDRESS)
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ok", "database": "ok", "migrations": "ok", "cache": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_a_pending_migration_makes_the_portal_unready_and_says_so(client, settings, monkeypatch) -> None:
    """The schema older than the code (the release's migrate job has not run): not ready, and the
    body says what is missing."""
    settings.CELERY_BROKER_URL = settings.CACHE_URL = ""
    monkeypatch.setattr(probes, "_migrated", False)  # a process that has not yet seen them all applied
    MigrationRecorder.Migration.objects.filter(app="scheduler").order_by("-id")[:1].get().delete()  # rolled back
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["migrations"] == "1 pending"
    assert response.json()["missing"] == ["migrations"]


@pytest.mark.django_db
def test_an_unreachable_cache_makes_the_portal_unready_without_showing_its_url(client, settings) -> None:
    settings.CELERY_BROKER_URL = ""
    settings.CACHE_URL = f"redis://:cache-secret@127.0.0.1:{closed_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["cache"].startswith("unreachable (")
    assert response.json()["missing"] == ["cache"]
    assert b"cache-secret" not in response.content and b"127.0.0.1" not in response.content


@pytest.mark.django_db
def test_without_a_broker_tasks_run_in_process_and_the_portal_is_ready(client, settings) -> None:
    settings.CELERY_BROKER_URL = settings.CACHE_URL = ""
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["broker"] == "not configured (tasks run in-process)"


@pytest.mark.django_db
def test_an_unreachable_broker_makes_the_portal_unready_without_showing_its_url(client, settings) -> None:
    settings.CELERY_BROKER_URL = f"redis://:broker-secret@127.0.0.1:{closed_port()}/0"
    settings.CACHE_URL = ""
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["broker"].startswith("unreachable (")
    assert response.json()["missing"] == ["broker"]
    assert b"broker-secret" not in response.content and b"127.0.0.1" not in response.content


def test_an_unreachable_database_makes_the_portal_unready_and_liveness_stays_up(
    client, settings, transactional_db
) -> None:
    settings.CELERY_BROKER_URL = settings.CACHE_URL = ""
    connection.close()
    name = connection.settings_dict["NAME"]
    connection.settings_dict["NAME"] = "/no-such-dir/no-such-database"  # restored before the db teardown
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["database"].startswith("unreachable (")
        assert response.json()["missing"] == ["database", "migrations"]
        assert b"no-such" not in response.content
        assert client.get("/healthz").status_code == 200
    finally:
        connection.close()
        connection.settings_dict["NAME"] = name


def test_probes_are_only_get_and_head(client) -> None:
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code != 200  # not a probe: the normal URL map (no such page)
