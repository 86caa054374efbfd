"""Limits: the counters (Redis, and in memory for one gateway), and 429s through the real gateway."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TypeVar

import openai
import pytest
import requests

from accounts.models import Team
from devstack.ports import free_port
from governance.gateway import LimitView
from governance.limits import (
    BUDGET,
    PREFIX,
    REQUESTS,
    TOKENS,
    Counters,
    Limiter,
    LocalCounters,
    RedisCounters,
    SharedCounters,
)
from governance.models import Limit
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model
from tests.governance.conftest import metric_value
from tests.support.services import REDIS_URL

T = TypeVar("T")


def limit(**figures: int) -> LimitView:
    values = {"requests_per_minute": None, "tokens_per_minute": None, "monthly_tokens": None,
              "api_token_requests_per_minute": None, "api_token_tokens_per_minute": None, **figures}
    return LimitView(scope="7:*", **values)


class Clock:
    def __init__(self, moment: datetime) -> None:
        self.now = moment.timestamp()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["redis", "memory", "shared"])
def counters(request, limits_redis, tmp_path) -> Callable[[], Counters]:
    """Makes the counters inside the test's event loop (an asyncio Redis client is bound to one):
    Redis, one worker's memory, or the file a gateway's workers share without Redis."""
    made = {"redis": lambda: RedisCounters(REDIS_URL), "memory": LocalCounters,
            "shared": lambda: SharedCounters(str(tmp_path / "limits.sqlite3"))}
    return made[request.param]


def run(work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` on a fresh event loop (one per call, as asyncio.run makes)."""
    return asyncio.run(work())


def test_requests_per_minute_admit_exactly_the_limit_and_say_when_it_resets(counters) -> None:
    clock = Clock(datetime(2030, 5, 17, 10, 15, 45, tzinfo=UTC))
    rule = [limit(requests_per_minute=3)]

    async def burst():
        limiter = Limiter(counters(), clock)
        decisions = [await limiter.admit(rule, "key1", "team-a") for _ in range(5)]
        clock.now += 15  # the next minute
        decisions.append(await limiter.admit(rule, "key1", "team-a"))
        await limiter.counters.close()
        return decisions

    *decisions, next_minute = run(burst)
    assert [decision.refused is None for decision in decisions] == [True, True, True, False, False]
    refused = decisions[3]
    assert refused.refused.kind == REQUESTS
    assert refused.headers == {"x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "0",
                               "x-ratelimit-reset-requests": "15s", "Retry-After": "15"}
    assert decisions[1].values == [2]
    assert next_minute.refused is None


def test_each_api_token_has_its_own_count(counters) -> None:
    rule = [limit(api_token_requests_per_minute=1)]

    async def calls():
        limiter = Limiter(counters(), Clock(datetime(2030, 5, 17, 10, 15, tzinfo=UTC)))
        decisions = [await limiter.admit(rule, key, "team-a") for key in ("key1", "key1", "key2")]
        await limiter.counters.close()
        return decisions

    assert [decision.refused is None for decision in run(calls)] == [True, False, True]


def test_a_spent_monthly_budget_refuses_until_the_month_boundary(counters) -> None:
    clock = Clock(datetime(2030, 11, 30, 23, 59, 0, tzinfo=UTC))
    rule = [limit(monthly_tokens=100, tokens_per_minute=1000)]

    async def month_end():
        limiter = Limiter(counters(), clock)
        first = await limiter.admit(rule, "key1", "team-a")
        limiter.charge(first.checks, 120)  # the answer took the team past its budget
        await limiter.flush()
        spent = await limiter.admit(rule, "key1", "team-a")
        clock.now = datetime(2030, 12, 1, 0, 0, 0, tzinfo=UTC).timestamp()
        fresh = await limiter.admit(rule, "key1", "team-a")
        await limiter.counters.close()
        return first, spent, fresh

    first, spent, fresh = run(month_end)
    assert first.refused is None and first.values == [0, 0]
    assert spent.refused.kind == BUDGET
    assert spent.headers["Retry-After"] == "60"  # seconds to 2030-12-01 00:00 UTC
    assert spent.headers["x-ratelimit-remaining-tokens"] == "0"
    assert fresh.refused is None and fresh.values == [0, 0]


def test_tokens_per_minute_refuse_once_the_window_has_used_them(counters) -> None:
    rule = [limit(tokens_per_minute=50)]

    async def calls():
        limiter = Limiter(counters(), Clock(datetime(2030, 5, 17, 10, 15, tzinfo=UTC)))
        first = await limiter.admit(rule, "key1", "team-a")
        limiter.charge(first.checks, 50)
        await limiter.flush()
        refused = await limiter.admit(rule, "key1", "team-a")
        await limiter.counters.close()
        return refused

    refused = run(calls)
    assert refused.refused is not None and refused.headers["x-ratelimit-limit-tokens"] == "50"


def test_tokens_are_reserved_at_admission_and_the_difference_settled_with_the_usage(counters) -> None:
    rule = [limit(tokens_per_minute=100)]

    async def calls():
        limiter = Limiter(counters(), Clock(datetime(2030, 5, 17, 10, 15, tzinfo=UTC)))
        admitted = [await limiter.admit(rule, "key1", "team-a", reserve=30) for _ in range(3)]
        full = await limiter.admit(rule, "key1", "team-a", reserve=30)  # 90 reserved: no room for 30 more
        for decision in admitted:
            limiter.charge(decision.checks, 10 - decision.reserved)  # each used 10 of its 30
        await limiter.flush()
        again = await limiter.admit(rule, "key1", "team-a", reserve=30)
        too_large = await limiter.admit(rule, "key1", "team-a", reserve=101)
        await limiter.counters.close()
        return admitted, full, again, too_large

    admitted, full, again, too_large = run(calls)
    assert [decision.values for decision in admitted] == [[30], [60], [90]]
    assert [decision.refused for decision in admitted] == [None, None, None]
    assert admitted[1].headers["x-ratelimit-remaining-tokens"] == "40"
    assert full.refused.kind == TOKENS and full.values == [90]
    assert full.headers["x-ratelimit-remaining-tokens"] == "10" and full.headers["Retry-After"] == "60"
    assert again.refused is None and again.values == [60]  # 30 used, 30 reserved
    assert too_large.refused.kind == TOKENS  # more than the limit itself: never admitted


def chat(client: openai.OpenAI, model: str, text: str = "a b c", **options):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **options)


def away_from_minute_end() -> None:
    """Requests-per-minute windows follow the clock: start a burst early in a minute."""
    wait_for(lambda: time.time() % 60 < 40, timeout=25, message="the first 40 seconds of a minute")


@pytest.mark.django_db(transaction=True)
def test_the_gateway_answers_429_in_openai_shape_with_rate_limit_headers(cluster, gateway, api_key,
                                                                         start_backend) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "limited", backend.url)
    serve_model(cluster, "other", backend.url)
    team = Team.objects.get(name="team-a")
    Limit.objects.create(team=team, model="team-a/limited", requests_per_minute=2)  # its gateway id
    client = gateway.client(api_key)
    away_from_minute_end()
    chat(client, "limited")
    chat(client, "limited")
    with pytest.raises(openai.RateLimitError) as refused:
        chat(client, "limited")
    response = refused.value.response
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert response.json()["error"]["type"] == "requests"
    assert response.headers["x-ratelimit-limit-requests"] == "2"
    assert response.headers["x-ratelimit-remaining-requests"] == "0"
    assert response.headers["x-ratelimit-reset-requests"].endswith("s")
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert chat(client, "other").choices  # the limit is the team's on that model only
    assert backend.stats()["/v1/chat/completions"] == 3  # the refused request never reached the backend


@pytest.mark.django_db(transaction=True)
def test_a_spent_budget_answers_insufficient_quota(cluster, light_reservations, gateway, api_key,
                                                   start_backend) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "metered", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), monthly_tokens=10)
    client = gateway.client(api_key)
    # reserves 6 + 1 of the 10, uses 12 (the test backend counts max_tokens words each way)
    assert chat(client, "metered", "one two three four five six", max_tokens=6).usage.total_tokens == 12

    def refused() -> list[requests.Response]:  # in a list: a 429 Response is falsy
        answer = requests.post(f"{gateway.url}/v1/chat/completions", timeout=10,
                               headers={"Authorization": f"Bearer {api_key}"},
                               json={"model": "metered", "max_tokens": 1,
                                     "messages": [{"role": "user", "content": "hi"}]})
        return [answer] if answer.status_code == 429 else []

    [answer] = wait_for(refused, message="the budget refusing (tokens are settled once the answer is in)")
    assert answer.json()["error"]["code"] == answer.json()["error"]["type"] == "insufficient_quota"
    assert answer.headers["x-ratelimit-limit-tokens"] == "10"
    assert answer.headers["x-ratelimit-remaining-tokens"] == "0"
    assert int(answer.headers["Retry-After"]) > 0


def test_redis_away_is_an_error_the_gateway_lets_through_and_counts() -> None:
    from devstack.ports import free_port
    from governance.resp import RedisUnavailable

    async def call():
        limiter = Limiter(RedisCounters(f"redis://127.0.0.1:{free_port()}/0"))
        try:
            await limiter.admit([limit(requests_per_minute=1)], "key1", "team-a")
        finally:
            await limiter.counters.close()

    with pytest.raises(RedisUnavailable) as error:
        run(call)
    assert isinstance(error.value, OSError) and "cannot connect" in str(error.value)


@pytest.mark.django_db(transaction=True)
def test_a_limit_set_while_the_gateway_serves_applies_on_its_change_notice(cluster, gateway, api_key, start_backend,
                                                                            settings) -> None:
    """The gateway holds limits and teams in memory; a change reaches it by notice, not by the
    safety-net re-read (set to an hour here)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("change notices are PostgreSQL's LISTEN/NOTIFY; SQLite has the periodic re-read only")
    settings.USAGE_LIMITS_TTL_SECONDS = 3600
    backend = start_backend("replica-a")
    serve_model(cluster, "noticed", backend.url)
    client = gateway.client(api_key)
    away_from_minute_end()
    assert chat(client, "noticed").choices  # limits and teams read: none applies
    Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=1)

    def refused() -> bool:
        answer = requests.post(f"{gateway.url}/v1/chat/completions", timeout=10,
                               headers={"Authorization": f"Bearer {api_key}"},
                               json={"model": "noticed", "messages": [{"role": "user", "content": "hi"}]})
        return answer.status_code == 429

    wait_for(refused, message="the new limit refusing (read again on its notice)")


def ask(gateway, api_key: str, model: str, **body: object) -> requests.Response:
    return requests.post(f"{gateway.url}/v1/chat/completions", timeout=30,
                         headers={"Authorization": f"Bearer {api_key}"},
                         json={"model": model, "messages": [{"role": "user", "content": "one two three"}], **body})


@pytest.mark.django_db(transaction=True)
def test_every_answer_under_a_limit_carries_the_rate_limit_headers(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "limited", backend.url)
    serve_model(cluster, "free", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), model="team-a/limited", requests_per_minute=5,
                         tokens_per_minute=10_000)
    away_from_minute_end()
    plain = ask(gateway, api_key, "limited", max_tokens=3)
    streamed = ask(gateway, api_key, "limited", max_tokens=3, stream=True)
    assert plain.status_code == streamed.status_code == 200
    assert plain.headers["x-ratelimit-limit-requests"] == streamed.headers["x-ratelimit-limit-requests"] == "5"
    assert plain.headers["x-ratelimit-remaining-requests"] == "4"
    assert streamed.headers["x-ratelimit-remaining-requests"] == "3"
    assert plain.headers["x-ratelimit-limit-tokens"] == "10000"
    reserved = 10_000 - int(plain.headers["x-ratelimit-remaining-tokens"])
    assert reserved >= 6  # the request's max_tokens and its prompt, held until its usage is in
    for answer in (plain, streamed):
        assert answer.headers["x-ratelimit-reset-requests"].endswith("s")
        assert answer.headers["x-ratelimit-reset-tokens"].endswith("s")
        assert "Retry-After" not in answer.headers
    free = ask(gateway, api_key, "free")
    assert free.status_code == 200 and not any(name.lower().startswith("x-ratelimit") for name in free.headers)


@pytest.mark.django_db(transaction=True)
def test_answers_the_gateway_writes_after_admission_carry_the_rate_limit_headers(cluster, gateway, api_key,
                                                                                 start_backend) -> None:
    """An unreachable backend's 502 and a backend's own error carry them too (issue 43: one answer
    had none): they are stamped as any answer's headers go out."""
    serve_model(cluster, "gone", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    serve_model(cluster, "failing", start_backend("failing", fail=500).url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=50)
    away_from_minute_end()
    gone, failing = ask(gateway, api_key, "gone"), ask(gateway, api_key, "failing")
    assert (gone.status_code, gone.json()["error"]["code"]) == (502, "backend_unreachable")
    assert failing.status_code == 500
    assert gone.headers["x-ratelimit-limit-requests"] == failing.headers["x-ratelimit-limit-requests"] == "50"
    assert int(failing.headers["x-ratelimit-remaining-requests"]) < int(gone.headers["x-ratelimit-remaining-requests"])


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_overshoot_a_tokens_limit_by_no_more_than_the_documented_bound(
    cluster, gateway, api_key, start_backend, limits_redis
) -> None:
    """40 requests at once, each held 0.5 s by the backend: without reservations every one would
    be admitted (nothing is charged before an answer), 400 tokens against a limit of 100. Each sets
    max_tokens and the test backend counts fewer prompt tokens than a quarter of the body's bytes,
    so the bound (docs/usage.md) is no overshoot at all."""
    backend = start_backend("replica-a", think=0.5)
    serve_model(cluster, "tpm", backend.url)
    team = Team.objects.get(name="team-a")
    Limit.objects.create(team=team, tokens_per_minute=100)
    away_from_minute_end()
    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(lambda _: ask(gateway, api_key, "tpm", max_tokens=5), range(40)))
    assert {answer.status_code for answer in answers} == {200, 429}
    used = sum(answer.json()["usage"]["total_tokens"] for answer in answers if answer.status_code == 200)
    assert 0 < used <= 100
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.json()["error"]["type"] == "tokens" and "reserves" in refused.json()["error"]["message"]
    minute = int(time.time() // 60)
    # settled: the counter holds what the answers used, the reservations' difference given back
    wait_for(lambda: int(limits_redis.get(f"{PREFIX}:t:{team.pk}:*:{minute}") or 0) == used,
             message=f"the tokens counter settling at the {used} tokens used")
    text = requests.get(f"{gateway.url}/metrics", headers={"Authorization": "Bearer metrics-token-for-tests"},
                        timeout=5).text
    assert metric_value(text, "inference_portal_limit_refusals_total", team="team-a", reason="tokens") > 0


@pytest.mark.django_db(transaction=True)
def test_a_request_that_can_never_fit_a_tokens_limit_is_a_400_not_a_retryable_429(
    cluster, gateway, api_key, start_backend
) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "small", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), tokens_per_minute=50)
    away_from_minute_end()
    answer = ask(gateway, api_key, "small", max_tokens=500)
    error = answer.json()["error"]
    assert answer.status_code == 400 and "Retry-After" not in answer.headers
    assert (error["param"], error["code"]) == ("max_tokens", "reservation_exceeds_limit")
    assert "can never be admitted" in error["message"] and "(50)" in error["message"]
    assert ask(gateway, api_key, "small", max_tokens=5).status_code == 200  # one that fits is let in
    assert backend.stats()["/v1/chat/completions"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_stream_the_client_drops_keeps_its_reservation_charged(
    cluster, gateway, api_key, start_backend, limits_redis
) -> None:
    """Without the backend's usage (the client left before it), what the stream took is unknown:
    giving the reservation back would let a client that drops every stream use tokens for free."""
    backend = start_backend("replica-a", chunk_delay=0.2)
    serve_model(cluster, "streamed", backend.url)
    team = Team.objects.get(name="team-a")
    Limit.objects.create(team=team, tokens_per_minute=100_000)
    away_from_minute_end()
    words = " ".join(f"w{index}" for index in range(40))
    with requests.post(f"{gateway.url}/v1/chat/completions", timeout=30, stream=True,
                       headers={"Authorization": f"Bearer {api_key}"},
                       json={"model": "streamed", "max_tokens": 40, "stream": True,
                             "messages": [{"role": "user", "content": words}]}) as dropped:  # fmt: skip
        reserved = 100_000 - int(dropped.headers["x-ratelimit-remaining-tokens"])
        next(dropped.iter_content(64))  # the first chunk, then the client goes away
    metrics_url, auth = f"{gateway.url}/metrics", {"Authorization": "Bearer metrics-token-for-tests"}

    def finished() -> bool:  # counted as the client leaving, or as the answer it began (whichever the gateway saw)
        text = requests.get(metrics_url, headers=auth, timeout=5).text
        return sum(metric_value(text, "inference_portal_team_requests_total", team="team-a",
                                model="team-a/streamed", status=status) for status in ("499", "200")) == 1  # fmt: skip

    wait_for(finished, message="the dropped stream finishing")
    used = ask(gateway, api_key, "streamed", max_tokens=3).json()["usage"]["total_tokens"]
    minute = int(time.time() // 60)
    wait_for(lambda: int(limits_redis.get(f"{PREFIX}:t:{team.pk}:*:{minute}") or 0) == reserved + used,
             message=f"the dropped stream's {reserved} reserved tokens charged beside the {used} used after it")
