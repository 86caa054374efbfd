"""API tokens on the gateway's request path: one check per token at a time, re-checked in the
background before the remembered caller expires, a revoked token forgotten at its re-check.

The checks are the real ones (knox against the test database, in the gateway's worker threads);
``verify`` is wrapped only to count them."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from accounts.models import ApiToken
from accounts.tokens import issue_token
from common.db_thread import close_reads
from inference_gateway import callers as callers_module
from inference_gateway.callers import Callers, NotAuthenticated


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """``scenario()`` on an event loop of its own, in a thread of its own: the suite's browser tests
    (Playwright's sync API) keep an event loop running in the main thread."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(lambda: asyncio.run(scenario())).result()


@pytest.fixture(autouse=True)
def closed_reads():
    """The reads' thread keeps its connection, as in the gateway; closed after each test as the
    gateway closes it when it stops."""
    yield
    run(close_reads)


@pytest.fixture
def checks(monkeypatch) -> list[str]:
    """The keys ``verify`` was called with, in order."""
    seen: list[str] = []
    real = callers_module.verify

    def counting(key: str):
        seen.append(key)
        return real(key)

    monkeypatch.setattr(callers_module, "verify", counting)
    return seen


@pytest.fixture
def key(transactional_db, make_user) -> str:
    return issue_token(make_user("alice"), "gateway")[1]


def test_concurrent_requests_with_an_unknown_token_share_one_check(key, checks):
    async def scenario():
        callers = Callers(ttl=10)
        return await asyncio.gather(*(callers.caller(f"Bearer {key}") for _ in range(50)))

    found = run(scenario)
    assert {caller.username for caller in found} == {"alice"}
    assert checks == [key]


def test_a_caller_past_half_its_time_is_served_at_once_and_checked_again_in_the_background(key, checks, monkeypatch):
    """Twenty requests of a caller past half its time are served from memory while one background
    check runs (held until they are served: none of them waited for it); the check renews the caller
    for another ``ttl``. Times are set, not slept: a loaded machine cannot overshoot them."""
    held = threading.Event()
    counting = callers_module.verify

    def held_check(key: str):
        held.wait(timeout=60)
        return counting(key)

    async def scenario():
        callers = Callers(ttl=60)
        await callers.caller(f"Bearer {key}")
        ((digest, known),) = callers._known.items()
        callers._known[digest] = dataclasses.replace(known, check_again=0.0)  # past half its time, far from expiry
        monkeypatch.setattr(callers_module, "verify", held_check)
        served = await asyncio.gather(*(callers.caller(f"Bearer {key}") for _ in range(20)))
        checking = len(callers._checks)  # the re-check, still held
        held.set()
        while callers._checks:
            await asyncio.sleep(0.01)
        renewed = callers._known[digest]
        return served, checking, renewed.check_again > time.monotonic()

    served, checking, renewed = run(scenario)
    assert {caller.username for caller in served} == {"alice"}
    assert checking == 1, "one background check for the 20 requests, served before it ended"
    assert len(checks) == 2 and renewed, "the re-check renewed the caller for another half of its time"


def test_a_token_revoked_meanwhile_is_refused_once_the_background_check_saw_it(key, checks):
    async def scenario():
        callers = Callers(ttl=60)
        await callers.caller(f"Bearer {key}")
        await asyncio.to_thread(ApiToken.objects.all().delete)
        # past half its time, far from expiry (set, not waited for: a loaded machine cannot overshoot it)
        ((digest, known),) = callers._known.items()
        callers._known[digest] = dataclasses.replace(known, check_again=0.0)
        await callers.caller(f"Bearer {key}")  # still remembered; starts the re-check
        while callers._checks:
            await asyncio.sleep(0.01)
        with pytest.raises(NotAuthenticated, match="invalid API key"):
            await callers.caller(f"Bearer {key}")

    run(scenario)
    assert checks == [key, key, key]


def test_a_refused_token_answers_every_waiting_request_with_the_reason(transactional_db, checks):
    async def scenario():
        callers = Callers(ttl=10)
        return await asyncio.gather(*(callers.caller("Bearer not-a-token") for _ in range(10)),
                                    return_exceptions=True)

    outcomes = run(scenario)
    assert all(isinstance(outcome, NotAuthenticated) for outcome in outcomes)
    assert len(checks) == 1
