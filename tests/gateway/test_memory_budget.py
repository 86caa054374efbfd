"""The gateway's memory is bounded in total, not only per request (inference_gateway/memory.py):
the budget's rules, a gateway serving in a thread whose budget fills with request bodies held by a
silent backend, and ``manage.py gateway`` as a real process whose resident memory is read from
/proc while many large answers arrive at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from devstack.ports import free_port, wait_serving
from inference_gateway.conf import GatewaySettings
from inference_gateway.memory import SMALL_BYTES, Budget
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model
from tests.support.services import session_database_url

MiB = 1024 * 1024


# -- the budget's rules ------------------------------------------------------------------------
def test_a_hold_takes_what_fits_and_gives_everything_back() -> None:
    budget = Budget(80 * MiB)  # 70 MiB for large holders, the last 10 for small ones
    large, other = budget.hold(), budget.hold()
    assert large.take(40 * MiB) and other.take(30 * MiB)
    assert not large.take(1 * MiB)  # 71 MiB: beyond what large holders may use
    assert budget.held == 70 * MiB and large.held == 40 * MiB  # a refusal takes nothing
    small = budget.hold()
    assert small.take(SMALL_BYTES)  # the reserve is a small request's
    assert not small.take(1)  # one byte more and it is a large holder, and large holders are full
    large.release()
    large.release()  # idempotent: a finally may run after an earlier release
    assert budget.held == 30 * MiB + SMALL_BYTES
    assert large.take(39 * MiB)


def test_settle_gives_back_an_unused_reservation_or_takes_the_rest() -> None:
    budget = Budget(80 * MiB)
    hold = budget.hold()
    assert hold.take(32 * MiB)  # a chunked body: the most a body may be, until it has arrived
    assert hold.settle(32 * MiB, 1000)
    assert (hold.held, budget.held) == (1000, 1000)
    assert hold.settle(1000, 5000)  # a compressed body, larger decoded
    assert budget.held == 5000
    assert not hold.settle(5000, 100 * MiB)
    assert budget.held == 5000


def test_a_budget_too_small_for_the_largest_request_is_refused_at_start(settings) -> None:
    settings.GATEWAY_MAX_BYTES_IN_FLIGHT = 64 * MiB
    with pytest.raises(ImproperlyConfigured, match=(
            r"GATEWAY_MAX_BYTES_IN_FLIGHT: 67108864 leaves 58720256 bytes for one request .* less than the largest "
            r"request body and answer together \(GATEWAY_MAX_BODY_BYTES \+ GATEWAY_MAX_RESPONSE_BYTES = 67108864\)")):
        GatewaySettings.from_django()


# -- a full budget refuses large requests, never a small one, and empties as requests end -------
def _chat(content_bytes: int, model: str) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": "x" * content_bytes}]}).encode()


def _held_open(port: int, api_key: str, body: bytes) -> socket.socket:
    """A request sent on a raw socket whose answer is never read: closing the socket is the client
    leaving."""
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                   + f"Authorization: Bearer {api_key}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    return client


@pytest.fixture
def small_budget(gateway_settings):
    """1 MiB bodies and answers, 3 MiB in flight (2.625 MiB for requests above 1 MiB)."""
    gateway_settings.GATEWAY_MAX_BODY_BYTES = 1 * MiB
    gateway_settings.GATEWAY_MAX_RESPONSE_BYTES = 1 * MiB
    gateway_settings.GATEWAY_MAX_BYTES_IN_FLIGHT = 3 * MiB
    return gateway_settings


@pytest.mark.django_db(transaction=True)
def test_a_full_budget_refuses_large_requests_and_frees_as_requests_end(
        small_budget, cluster, gateway, api_key, start_backend) -> None:
    stalled = start_backend("stalled", hostile="stall")  # holds its callers' bodies: it never answers
    serve_model(cluster, "stall", stalled.url)
    serve_model(cluster, "calm", start_backend("calm").url)
    big = _chat(900 * 1024, "team-a/calm")
    held = [_held_open(gateway.port, api_key, _chat(900 * 1024, "team-a/stall")) for _ in range(2)]
    try:
        wait_for(lambda: stalled.stats().get("stall") == 2, timeout=30, message="both bodies to be at the backend")
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        refused = requests.post(f"{gateway.url}/v1/chat/completions", data=big, headers=headers, timeout=30)
        assert (refused.status_code, refused.json()["error"]["code"]) == (503, "gateway_overloaded")
        assert "GATEWAY_MAX_BYTES_IN_FLIGHT" in refused.json()["error"]["message"]
        assert refused.headers["Retry-After"] == "1"
        small = requests.post(f"{gateway.url}/v1/chat/completions", data=_chat(20, "team-a/calm"), headers=headers,
                              timeout=30)
        assert small.status_code == 200, small.text  # the reserve is for requests like it
    finally:
        for client in held:
            client.close()  # the clients leave: their handlers are cancelled, their bytes given back
    wait_for(lambda: requests.post(f"{gateway.url}/v1/chat/completions", data=big, headers=headers,
                                   timeout=30).status_code == 200, timeout=30, message="the budget to empty")


# -- a real gateway process under many large answers at once --------------------------------------
def memory_of(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in bytes, from /proc/<pid>/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


BUDGET = 96 * MiB
ANSWERS = 20


@pytest.fixture
def gateway_process(transactional_db) -> Iterator[tuple[subprocess.Popen, str]]:
    """``manage.py gateway --workers 1``: one process, serving in itself, with a 96 MiB budget and
    the default 32 MiB caps (32 MiB answer + 32 MiB body fit in 7/8 of the budget)."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": session_database_url(), "DEBUG": "false",
           "GATEWAY_MAX_BYTES_IN_FLIGHT": str(BUDGET), "GATEWAY_CATALOG_TTL_SECONDS": "0",
           "GATEWAY_CALLER_TTL_SECONDS": "0"}
    process = subprocess.Popen([sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port),
                                "--workers", "1"], cwd=settings.BASE_DIR, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(f"{url}/healthz", "manage.py gateway", process=process)
        yield process, url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_many_large_answers_at_once_stay_within_the_budget(gateway_process, cluster, api_key, start_backend) -> None:
    """20 answers of 40 MiB at once: each alone would be buffered up to the 32 MiB cap (640 MiB
    together, as before the budget). The gateway's resident memory may grow by the budget, plus
    what the budget does not count: a bytearray's over-allocation (up to 1/8), each connection's
    aiohttp buffers (about 256 KiB), the chunks in transit and the allocator's slack; twice the
    budget bounds all of that with room, and is less than a third of the unbounded growth."""
    process, url = gateway_process
    serve_model(cluster, "huge", start_backend("huge", hostile="huge", size=40 * MiB).url)
    serve_model(cluster, "calm", start_backend("calm").url)
    headers = {"Authorization": f"Bearer {api_key}"}
    calm = {"model": "team-a/calm", "messages": [{"role": "user", "content": "hi"}]}
    assert requests.post(f"{url}/v1/chat/completions", json=calm, headers=headers, timeout=30).status_code == 200
    before = memory_of(process.pid)["VmRSS"]

    answers: list[requests.Response] = []
    neighbour: list[int] = []
    done = threading.Event()

    def large() -> None:
        answers.append(requests.post(f"{url}/v1/chat/completions", json={**calm, "model": "team-a/huge"},
                                     headers=headers, timeout=300))

    def small() -> None:
        with requests.Session() as session:
            while not done.is_set():
                neighbour.append(session.post(f"{url}/v1/chat/completions", json=calm, headers=headers,
                                              timeout=60).status_code)

    threads = [threading.Thread(target=large) for _ in range(ANSWERS)]
    beside = threading.Thread(target=small)
    beside.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    done.set()
    beside.join(timeout=60)

    codes = sorted({(answer.status_code, answer.json()["error"]["code"]) for answer in answers})
    assert len(answers) == ANSWERS
    assert set(codes) <= {(502, "upstream_response_too_large"), (503, "gateway_overloaded")}, codes
    assert (503, "gateway_overloaded") in codes  # the budget was full: the bound below is its doing
    grown = memory_of(process.pid)["VmHWM"] - before
    assert grown < 2 * BUDGET, f"the gateway grew by {grown / MiB:.0f} MiB under a {BUDGET // MiB} MiB budget"
    assert neighbour and set(neighbour) == {200}, neighbour  # the neighbour answered throughout
