"""Two real gateway processes (``manage.py gateway``) behind one Redis enforce one limit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.conf import settings

from accounts.models import Team
from devstack.ports import free_port, wait_serving
from governance.limits import PREFIX
from governance.models import Limit
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model
from tests.support.services import REDIS_URL, session_database_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def replicas():
    """Two ``manage.py gateway`` processes on the test database and the test Redis."""
    env = {**os.environ, "DATABASE_URL": session_database_url(), "GOVERNANCE_REDIS_URL": REDIS_URL,
           "GATEWAY_CATALOG_TTL_SECONDS": "0", "GATEWAY_CALLER_TTL_SECONDS": "0", "USAGE_LIMITS_TTL_SECONDS": "0",
           "DEBUG": "false"}
    ports = [free_port(), free_port()]
    processes = [subprocess.Popen([sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port)],
                                  cwd=settings.BASE_DIR, env=env) for port in ports]
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_serving(f"http://127.0.0.1:{port}/healthz", "manage.py gateway", process=process)
        yield [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def test_two_replicas_admit_one_limit_between_them(cluster, api_key, start_backend, replicas, limits_redis) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "shared", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=10)

    def ask(url: str) -> requests.Response:
        return requests.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {api_key}"},
                             json={"model": "shared", "messages": [{"role": "user", "content": "hi"}]}, timeout=30)

    for url in replicas:  # both replicas have read the limit and the caller before the burst
        assert ask(url).status_code == 200
    # windows follow the clock minute: start the burst early in one, its counters from zero
    wait_for(lambda: time.time() % 60 < 30, timeout=40, message="the first half of a minute")
    for key in limits_redis.scan_iter(f"{PREFIX}:r:*"):
        limits_redis.delete(key)
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, replicas * 15))
    assert all(answer.status_code in (200, 429) for answer in answers), [answer.status_code for answer in answers]
    admitted = sum(answer.status_code == 200 for answer in answers)
    # the contract is at most one over per replica; the atomic count admits none over
    assert admitted <= 10 + len(replicas)
    assert admitted == 10
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["x-ratelimit-limit-requests"] == "10"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
