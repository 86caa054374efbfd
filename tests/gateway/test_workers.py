"""``manage.py gateway --workers 2`` as a real process tree: two workers on one port (SO_REUSEPORT)
under a supervisor (inference_gateway/workers.py), against the test database and real backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.db import connection

from devstack.ports import free_port, wait_serving
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import sample_value, serve_model, settles_at
from tests.support.services import session_database_url

pytestmark = pytest.mark.django_db(transaction=True)
WORKERS = 2
METRICS_TOKEN = "metrics-token-for-worker-tests"


class Supervised:
    """The supervisor process and what its workers answer on the shared port."""

    def __init__(self, process: subprocess.Popen, url: str, count: int = WORKERS) -> None:
        self.process, self.url, self.count = process, url, count

    def worker(self, session: requests.Session | None = None) -> tuple[int, str]:
        """The pid of the worker that answers (a new connection unless ``session``), and whether
        it listens for catalog notices."""
        answer = (session or requests).get(f"{self.url}/healthz", timeout=10)
        return int(answer.headers["X-Gateway-Worker"]), answer.headers["X-Catalog-Notices"]

    def sessions(self) -> dict[int, requests.Session]:
        """One keep-alive session held on each worker: new connections until every worker has
        answered one (the kernel spreads connections over the listening sockets by hash)."""
        found: dict[int, requests.Session] = {}

        def one_more() -> bool:
            session = requests.Session()
            pid, _ = self.worker(session)
            if pid in found:
                session.close()
            else:
                found[pid] = session
            return len(found) == self.count

        wait_for(one_more, timeout=120, message=f"{self.count} workers to answer")
        return found

    def children(self) -> set[int]:
        """The supervisor's live child processes (zombies are not)."""
        pids = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid and fields[0] != "Z":
                pids.add(int(stat.parent.name))
        return pids


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def supervised(transactional_db) -> Iterator[Supervised]:
    """``manage.py gateway --workers 2`` in a session of its own (Ctrl-C reaches its process group);
    the periodic catalog reload an hour away, so only notices refresh routes."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": session_database_url(),
        "DEBUG": "false",
        "METRICS_TOKEN": METRICS_TOKEN,
        "GATEWAY_CATALOG_TTL_SECONDS": "3600",
        "GATEWAY_CALLER_TTL_SECONDS": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port), "--workers", str(WORKERS)],
        cwd=settings.BASE_DIR,
        env=env,
        start_new_session=True,
    )
    running = Supervised(process, f"http://127.0.0.1:{port}")
    try:
        wait_serving(f"{running.url}/healthz", "manage.py gateway --workers 2", process=process)
        yield running
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def chat(session: requests.Session, url: str, key: str, model: str) -> requests.Response:
    return session.post(
        f"{url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )


def test_every_worker_routes_a_new_model_at_once(supervised, cluster, api_key, start_backend) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("catalog notices are PostgreSQL's LISTEN/NOTIFY; SQLite has the periodic reload only")
    backend = start_backend()
    sessions = supervised.sessions()
    for session in sessions.values():
        wait_for(
            lambda session=session: supervised.worker(session)[1] == "listening",
            timeout=60,
            message="the worker to listen for catalog notices",
        )
        assert chat(session, supervised.url, api_key, "team-a/fresh").status_code == 404  # its table is loaded
    serve_model(cluster, "fresh", backend.url)
    for pid, session in sessions.items():
        answer = chat(session, supervised.url, api_key, "team-a/fresh")
        assert answer.status_code == 200, (pid, answer.text)
        assert supervised.worker(session)[0] == pid  # the same worker answered


def test_metrics_of_every_worker_are_summed(supervised, cluster, api_key, start_backend) -> None:
    serve_model(cluster, "counted", start_backend().url)
    sessions = supervised.sessions()
    for session in sessions.values():
        for _ in range(3):
            assert chat(session, supervised.url, api_key, "team-a/counted").status_code == 200
    for session in sessions.values():  # whichever worker Prometheus reaches reports the whole gateway

        def scraped(name: str, session: requests.Session = session, **labels: str) -> float:
            text = session.get(
                f"{supervised.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
            ).text
            return sample_value(text, name, **labels)

        assert settles_at(lambda: scraped("inference_portal_gateway_requests_total", model="team-a/counted",
                                          status="200"), 3 * WORKERS)
        # a series without labels, made when the supervisor imported it, before the workers were forked
        assert settles_at(lambda: scraped("inference_portal_usage_ledger_written_rows_total"), 3 * WORKERS)


def test_a_killed_worker_is_replaced(supervised, cluster, api_key, start_backend) -> None:
    serve_model(cluster, "kept", start_backend().url)
    before = set(supervised.sessions())
    killed = min(before)
    os.kill(killed, signal.SIGKILL)
    wait_for(
        lambda: len(supervised.children()) == WORKERS and killed not in supervised.children(),
        timeout=60,
        message="the supervisor to start another worker",
    )
    after = supervised.sessions()  # the new worker serves, on the same port
    assert killed not in after and len(after) == WORKERS
    for session in after.values():
        assert chat(session, supervised.url, api_key, "team-a/kept").status_code == 200
    assert supervised.process.poll() is None


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c", "supervisor-killed"])
def test_stopping_leaves_no_process_behind(supervised, how: str) -> None:
    workers = set(supervised.sessions())
    assert workers == supervised.children()
    if how == "sigterm":
        supervised.process.send_signal(signal.SIGTERM)
    elif how == "ctrl-c":  # the terminal sends SIGINT to the whole foreground process group
        os.killpg(supervised.process.pid, signal.SIGINT)
    else:  # no chance to pass anything on: the workers' parent-death signal ends them
        supervised.process.kill()
    code = supervised.process.wait(timeout=60)
    assert code == (-signal.SIGKILL if how == "supervisor-killed" else 0)
    wait_for(lambda: not any(alive(pid) for pid in workers), timeout=60, message="every worker to end")
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{supervised.url}/healthz", timeout=5)
