"""Probes never wait in the pages' queue: with every page worker of the deploy's web server
(``python -m config.web_server``) held by a request, /healthz (answered by nginx) and /readyz
(answered by the probes' own gunicorn worker) still answer. Under the former layout both went
through the page workers, and 16 busy clients held the liveness probe 2.8-4.7 s (issue 41)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg
import requests

from bench.http_server import production_server
from config import gunicorn
from tests.clusters.conftest import wait_for
from tests.support.services import require_redis, session_database_url

# the first tables a failed sign-in reads (the lockout's attempts, the users): a page request that
# touches them waits for this test's lock, in its worker, for as long as the test holds it
HELD_TABLES = "axes_accessattempt, auth_user"


def waiting_on_locks(observer: psycopg.Connection) -> int:
    """Backends of the test database waiting for a lock: each is a page worker held in its request."""
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return row[0] if row else 0


def failed_sign_in(url: str) -> int:
    body = {"username": "nobody", "password": "wrong", "name": "cli"}
    return requests.post(f"{url}/api/token/", json=body, timeout=120).status_code


def test_probes_answer_while_every_page_worker_is_held(transactional_db) -> None:
    database = session_database_url()
    redis = require_redis()
    env = {"DATABASE_URL": database, "CELERY_BROKER_URL": redis, "CACHE_URL": redis}
    pages = gunicorn.workers  # config/gunicorn.py, as the server reads it (WEB_CONCURRENCY or 3)
    with (
        production_server(env) as server,
        psycopg.connect(database) as holder,
        psycopg.connect(database, autocommit=True) as observer,
        ThreadPoolExecutor(pages + 2) as pool,
    ):
        holder.execute(f"LOCK TABLE {HELD_TABLES} IN ACCESS EXCLUSIVE MODE")  # until the rollback below
        sign_ins = [pool.submit(failed_sign_in, server.url) for _ in range(pages + 2)]  # 2 more wait for a worker
        wait_for(lambda: waiting_on_locks(observer) == pages, timeout=60, message="every page worker to be held")
        liveness = requests.get(f"{server.url}/healthz", timeout=30)
        readiness = requests.get(f"{server.url}/readyz", timeout=30)
        still_held = waiting_on_locks(observer)
        unanswered = sum(not sign_in.done() for sign_in in sign_ins)
        holder.rollback()
        assert [sign_in.result() for sign_in in sign_ins] == [400] * (pages + 2)  # served once released
    assert (still_held, unanswered) == (pages, pages + 2), "the probes answered while every page worker was held"
    assert (liveness.status_code, liveness.json()) == (200, {"status": "ok"})
    assert readiness.status_code == 200, readiness.text
    assert readiness.json() == {"status": "ok", "database": "ok", "migrations": "ok", "cache": "ok", "broker": "ok"}
