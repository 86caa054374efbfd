"""A gateway of several workers without Redis holds a team's limits for the whole gateway: the
real ``manage.py gateway --workers 3`` (issue 43: each worker counted on its own, and a limit of 5
a minute let 10 of 20 through)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import cycle
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.db.models import F, Sum

from accounts.models import Team
from devstack.ports import free_port, wait_serving
from governance.limits import PREFIX
from governance.models import Limit, RequestRecord
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model
from tests.gateway.test_workers import Supervised, chat
from tests.support.services import session_database_url

pytestmark = pytest.mark.django_db(transaction=True)
WORKERS = 3
NO_REDIS = ("GOVERNANCE_REDIS_URL", "CACHE_URL", "CELERY_BROKER_URL")


class Gateway(Supervised):
    """The supervised gateway, its log, and the file its workers count in."""

    def __init__(self, process: subprocess.Popen, url: str, log: Path, counters: Path) -> None:
        super().__init__(process, url, WORKERS)
        self.log, self.counters = log, counters

    def clear_requests_counters(self) -> None:
        """Every requests-per-minute counter back to zero, as a new minute would set them."""
        with sqlite3.connect(self.counters, timeout=10) as db:
            db.execute("DELETE FROM counters WHERE key LIKE ?", (f"{PREFIX}:r:%",))


@pytest.fixture
def workers_without_redis(transactional_db, tmp_path) -> Iterator[Gateway]:
    """``manage.py gateway --workers 3`` with no Redis anywhere in its settings; its counters' file
    named, so the test can start a window from zero."""
    port, log, counters = free_port(), tmp_path / "gateway.log", tmp_path / "limits.sqlite3"
    env = {name: value for name, value in os.environ.items() if name not in NO_REDIS}
    env |= {"DATABASE_URL": session_database_url(), "DEBUG": "false", "USAGE_LIMITS_SHARED_FILE": str(counters),
            "GATEWAY_CALLER_TTL_SECONDS": "0", "USAGE_LEDGER_FLUSH_SECONDS": "0.02",
            "USAGE_RESERVE_BYTES_PER_TOKEN": "100000"}  # a request reserves its max_tokens, next to nothing more
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port),
             "--workers", str(WORKERS)],
            cwd=settings.BASE_DIR, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )
    running = Gateway(process, f"http://127.0.0.1:{port}", log, counters)
    try:
        wait_serving(f"{running.url}/healthz", "manage.py gateway --workers 3", process=process)
        yield running
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def limit_seen(session: requests.Session, url: str, key: str, model: str, figure: int) -> bool:
    answer = chat(session, url, key, model)
    return answer.headers.get("x-ratelimit-limit-requests") == str(figure)


def test_workers_admit_one_limit_between_them_and_say_where_they_count(
        workers_without_redis, cluster, api_key, start_backend) -> None:
    gateway = workers_without_redis
    backend = start_backend()
    serve_model(cluster, "limited", backend.url)
    serve_model(cluster, "probe", backend.url)
    team = Team.objects.get(name="team-a")
    sessions = list(gateway.sessions().values())
    Limit.objects.bulk_create([Limit(team=team, model="team-a/limited", requests_per_minute=5),
                               Limit(team=team, model="team-a/probe", requests_per_minute=1000)])
    for session in sessions:  # each worker holds the limits read together with the probe's
        wait_for(lambda session=session: limit_seen(session, gateway.url, api_key, "team-a/probe", 1000),
                 timeout=60, message="the worker to read the new limits")
    wait_for(lambda: time.time() % 60 < 30, timeout=40, message="the first half of a minute")
    minute = int(time.time() // 60)
    gateway.clear_requests_counters()
    answers = [chat(session, gateway.url, api_key, "team-a/limited") for session, _ in zip(cycle(sessions), range(20))]
    assert int(time.time() // 60) == minute, "the requests crossed into the next minute: one window's count is unknown"

    assert [answer.status_code for answer in answers] == [200] * 5 + [429] * 15
    assert [answer.headers["x-ratelimit-remaining-requests"] for answer in answers[:6]] == ["4", "3", "2", "1", "0",
                                                                                         "0"]
    assert all(answer.headers["x-ratelimit-limit-requests"] == "5" for answer in answers)
    log = gateway.log.read_text()
    assert log.count(f"limits counted in {gateway.counters}, shared by this gateway's workers") == WORKERS, log


def test_a_changed_limit_applies_in_every_worker(workers_without_redis, cluster, api_key, start_backend) -> None:
    gateway = workers_without_redis
    serve_model(cluster, "probe", start_backend().url)
    limit = Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=1000)
    sessions = list(gateway.sessions().values())
    for session in sessions:
        wait_for(lambda session=session: limit_seen(session, gateway.url, api_key, "team-a/probe", 1000),
                 timeout=60, message="the worker to read the limit")
    limit.requests_per_minute = 2000
    limit.save()
    for session in sessions:  # a notice, or the re-read every second where notices do not come (SQLite)
        wait_for(lambda session=session: limit_seen(session, gateway.url, api_key, "team-a/probe", 2000),
                 timeout=30, message="the worker to apply the changed limit")


def used_in_refusal(answer: requests.Response) -> int:
    assert answer.status_code == 429, answer.text
    return int(re.search(r"used (\d+) tokens", answer.json()["error"]["message"]).group(1))


def test_a_budget_refusal_names_what_the_ledger_records(workers_without_redis, cluster, api_key,
                                                        start_backend) -> None:
    """The workers share one budget counter, so a spent budget's 429 says what the whole gateway
    used, the ledger's figure (it said 120 while the ledger said 240: one worker's half)."""
    gateway = workers_without_redis
    serve_model(cluster, "budgeted", start_backend().url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), monthly_tokens=60)
    sessions = cycle(gateway.sessions().values())

    def ask() -> requests.Response:
        return next(sessions).post(
            f"{gateway.url}/v1/chat/completions", headers={"Authorization": f"Bearer {api_key}"},
            json={"model": "team-a/budgeted", "max_tokens": 8,
                  "messages": [{"role": "user", "content": "one two three"}]}, timeout=30)

    wait_for(lambda: ask().status_code == 429, timeout=120, message="the budget to be spent")

    def ledger() -> int:  # this model's rows: an earlier test's killed gateway may leave rows of its own
        rows = RequestRecord.objects.filter(team="team-a", model="team-a/budgeted")
        return rows.aggregate(total=Sum(F("prompt_tokens") + F("completion_tokens")))["total"] or 0

    wait_for(lambda: used_in_refusal(ask()) == ledger() > 0, timeout=60,
             message="the refusal's figure to be the ledger's (settled, rows written)")
