"""Real services for integration tests: Redis reachability and a Celery worker in a subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from tests.support.database import database_url

REPO_ROOT = Path(__file__).resolve().parents[2]


def _worker_redis_url() -> str:
    """``REDIS_URL`` (default database 15), on a database of its own per pytest-xdist worker: a test
    that flushes its database (the Celery broker's) or counts keys must not see another worker's."""
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) - int(worker[2:])
    if database < 0:
        raise RuntimeError(f"{url}: no Redis database left for xdist worker {worker} (16 databases, one each)")
    return parts._replace(path=f"/{database}").geturl()


REDIS_URL = _worker_redis_url()
# The name this process's files carry where several test processes write beside each other.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


def require_redis() -> str:
    """The Redis URL, or skip (fail under CI, where .ci/run starts Redis) when nothing listens."""
    parts = urlsplit(REDIS_URL)
    try:
        socket.create_connection((parts.hostname, parts.port or 6379), timeout=1).close()
    except OSError:
        if os.environ.get("CI"):
            pytest.fail(f"Redis is not reachable at {REDIS_URL} (CI must start it)")
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    return REDIS_URL


def session_database_url() -> str:
    """A DATABASE_URL naming the database this test session uses, for another process."""
    return database_url(connection.settings_dict, connection.settings_dict["NAME"])


class CeleryWorker:
    """``celery -A config worker`` on the sync and default queues, against the test database."""

    def __init__(self, broker_url: str) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "CELERY_BROKER_URL": broker_url,
            "DATABASE_URL": session_database_url(),
            "DEBUG": "false",
        }
        self.log = REPO_ROOT / "test-artifacts" / f"celery-worker-{WORKER}.log"
        self.log.parent.mkdir(exist_ok=True)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-Q",
                "default,sync",
                "--pool",
                "solo",
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120  # bounds a worker that never starts: tens of seconds on a busy machine
        while "ready." not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()  # a late starter left behind would take later runs' tasks off the queue
                self.process.wait()
                raise RuntimeError(f"celery worker did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
