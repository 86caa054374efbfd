"""The web process as deployed (``python -m config.web_server``: nginx in front of gunicorn's sync
workers and the probes' own gunicorn): the address a failed login is counted against is the one
that connected (or, through a trusted ingress, the client it names), never nginx's loopback; a
body over the limit is refused with the portal's JSON before it reaches a worker; nginx and both
gunicorns stop together."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
import requests
from axes.models import AccessAttempt

from bench.http_server import production_server
from tests.clusters.conftest import wait_for
from tests.support.services import session_database_url

FORGED = {"X-Forwarded-For": "198.51.100.7", "X-Real-IP": "192.0.2.1"}


def failed_login(url: str, headers: dict[str, str]) -> int:
    body = {"username": "nobody", "password": "wrong", "name": "cli"}
    return requests.post(f"{url}/api/token/", json=body, headers=headers, timeout=30).status_code


@pytest.mark.parametrize(
    ("trusted", "counted"),
    [("", "127.0.0.1"), ("127.0.0.0/8", "198.51.100.7")],
    ids=["direct: the headers are a client's", "through a trusted ingress: the client it names"],
)
def test_a_failed_login_counts_the_address_that_connected(transactional_db, trusted: str, counted: str) -> None:
    with production_server({"DATABASE_URL": session_database_url(), "TRUSTED_PROXIES": trusted}) as server:
        assert failed_login(server.url, FORGED) == 400
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == [counted]


def test_a_body_over_the_limit_is_refused_with_the_portals_error_before_a_worker_reads_it() -> None:
    with production_server({"DATABASE_URL": "sqlite:///:memory:"}) as server:
        answer = requests.post(f"{server.url}/api/token/", data=b"x" * (4 << 20), timeout=30,
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 413
    assert answer.json() == {"detail": "request body: more than the limit 3145728 bytes (3 MiB)"}


def children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has ended, its parent has not reaped it yet
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def program(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("ending", ["gunicorn's master is killed", "SIGTERM"])
def test_nginx_and_gunicorn_live_and_die_together(ending: str) -> None:
    """Either way nothing is left: a dead gunicorn (the pages' or the probes') takes nginx, the other
    gunicorn and the server with it (the container restarts), and a SIGTERM to the server stops all."""
    with production_server({"DATABASE_URL": "sqlite:///:memory:"}) as server:
        started = children(server.pid)
        assert sorted(program(pid).split()[0].rsplit("/", 1)[-1] for pid in started) == ["nginx:", "python", "python"]
        if ending == "SIGTERM":
            os.kill(server.pid, signal.SIGTERM)
        else:
            os.kill(next(pid for pid in started if "gunicorn" in program(pid)), signal.SIGKILL)
        wait_for(lambda: not any(alive(pid) for pid in [server.pid, *started]), timeout=60,
                 message="the web server, nginx and gunicorn to end")  # fmt: skip
