"""The limits' Redis failing: one that accepts and never answers, one that refuses, one restarted
without persistence. Real sockets and a real ``redis-server`` of the test's own (the shared one is
never restarted)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import uvloop

from common.gateway_metrics import REGISTRY
from governance import budgets
from governance.limits import COUNTED_SINCE, Limiter, RedisCounters
from governance.models import Limit
from governance.resp import PipelinedRedis, RedisUnavailable
from tests.clusters.conftest import wait_for
from tests.governance.test_limits import limit
from tests.support.services import REDIS_URL
from tests.support.tcp_relay import TcpRelay


class HungServer:
    """Accepts connections and never answers a byte: a hung Redis. Counts the connections."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self) -> None:
        self.listener.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def hung() -> Iterator[HungServer]:
    server = HungServer()
    yield server
    server.close()


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_a_hung_redis_costs_one_timeout_then_requests_fail_at_once(hung) -> None:
    """The first request waits the timeout; the next ones, until the retry period ends, fail without
    touching the network (the gateway lets them through unchecked and counts them); then one tries again."""
    opened = sample("inference_portal_limit_redis_circuit_opened_total")

    async def requests() -> tuple[list[str], int, str, int]:
        counters = RedisCounters(f"redis://127.0.0.1:{hung.port}/0", timeout=0.2, retry_seconds=3600)
        limiter = Limiter(counters)
        errors = []
        for _ in range(20):
            with pytest.raises(RedisUnavailable) as error:
                await limiter.admit([limit(requests_per_minute=30)], "key1", "team-a")
            errors.append(str(error.value))
        during = len(hung.connections)
        counters.redis.clock = lambda: time.monotonic() + 3600  # the retry period is over
        with pytest.raises(RedisUnavailable) as again:
            await limiter.admit([limit(requests_per_minute=30)], "key1", "team-a")
        await counters.redis.close()
        return errors, during, str(again.value), len(hung.connections)

    errors, during, again, after = asyncio.run(requests())
    assert "did not answer within 0.2 s" in errors[0]
    assert all("not asked for" in error for error in errors[1:]), errors
    assert during == 1  # one connection, one timeout: nineteen requests never waited for it
    assert "did not answer within 0.2 s" in again and after == 2
    assert sample("inference_portal_limit_redis_circuit_opened_total") == opened + 2


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_gateway_loop_stalled_past_the_timeout_is_not_a_redis_failure(run, limits_redis) -> None:
    """The gateway's own event loop stalls (a busy machine, a long callback) after sending a
    command, past the timeout: Redis' answer is there (or comes at once) when the loop runs again,
    so the command answers and no circuit opens (requests were let through the limits unchecked
    for a second each time a busy gateway's timer fired late). A hung Redis still costs one
    timeout (the test above)."""
    async def stalled() -> tuple[Any, float]:
        client = PipelinedRedis(REDIS_URL, timeout=0.2, retry_seconds=3600)
        await client.call("PING")  # connected
        answer = asyncio.ensure_future(client.call("SET", "stalled-loop-test", "1"))
        await asyncio.sleep(0)  # the command is queued; the loop then stalls past its timeout
        time.sleep(0.6)
        try:
            return await answer, client.open_until
        finally:
            await client.close()

    assert run(stalled()) == (b"OK", 0.0)  # answered, and no circuit opened


def test_a_redis_back_after_refusing_is_used_again_once_the_retry_period_ends(limits_redis) -> None:
    host, port = REDIS_URL.split("//")[1].split("/")[0].split(":")
    relay = TcpRelay(host, int(port)).start()
    now = [0.0]

    async def requests() -> tuple[str, str, list[int]]:
        counters = RedisCounters(f"redis://127.0.0.1:{relay.port}/{REDIS_URL.rsplit('/', 1)[1]}", retry_seconds=5)
        counters.redis.clock = lambda: now[0]
        limiter = Limiter(counters)
        rule = [limit(requests_per_minute=1_000)]
        await limiter.admit(rule, "key1", "team-a")
        relay.cut()
        with pytest.raises(RedisUnavailable) as refused:
            await limiter.admit(rule, "key1", "team-a")
        relay.restore()
        with pytest.raises(RedisUnavailable) as skipped:  # within the retry period: not asked
            await limiter.admit(rule, "key1", "team-a")
        now[0] += 5
        values = [(await limiter.admit(rule, "key1", "team-a")).values[0] for _ in range(2)]
        await counters.close()
        return str(refused.value), str(skipped.value), values

    try:
        refused, skipped, values = asyncio.run(requests())
    finally:
        relay.close()
    assert "connection to Redis lost" in refused or "cannot connect" in refused
    assert "not asked for 5.00 s" in skipped
    assert values == [2, 3]  # counted on from where it was


@pytest.mark.django_db
def test_the_portal_banner_waits_for_a_hung_redis_once_per_retry_period(hung, settings) -> None:
    """Every portal page reads the budgets for its banner: a hung Redis costs the first read its
    timeout and the following reads nothing until the retry period ends."""
    from accounts.models import Team

    settings.GOVERNANCE_REDIS_URL = f"redis://127.0.0.1:{hung.port}/0"
    settings.GOVERNANCE_REDIS_TIMEOUT_SECONDS = 0.2
    settings.GOVERNANCE_REDIS_RETRY_SECONDS = 3600
    budgets._redis.cache_clear()
    budgets._skip_redis_until = 0.0
    Limit.objects.create(team=Team.objects.create(name="banner"), monthly_tokens=1_000)
    try:
        assert [budgets.budget_uses() for _ in range(10)] == [[]] * 10  # unknown, never a page error
        assert len(hung.connections) == 1
    finally:
        budgets._redis.cache_clear()
        budgets._skip_redis_until = 0.0


@pytest.fixture
def own_redis() -> Iterator[tuple[int, list[subprocess.Popen]]]:
    """A redis-server of this test's own, without persistence (restartable without touching the shared one)."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    processes: list[subprocess.Popen] = []

    def start() -> None:
        processes.append(subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                           "--appendonly", "no"], stdout=subprocess.DEVNULL))
        wait_for(lambda: _pings(port), message=f"redis-server on port {port}")

    start()
    yield port, processes, start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def _pings(port: int) -> bool:
    try:
        return redis.Redis(port=port, socket_timeout=1).ping()
    except redis.RedisError:
        return False


def test_counters_lost_by_a_redis_restart_are_said_lost(own_redis, caplog) -> None:
    """Redis restarted without persistence starts every counter from zero: the windows in progress
    were not counted in full, and the gateway says so (a log line, a metric, a header on each answer
    of those windows) instead of passing it over."""
    port, processes, start = own_redis
    lost = sample("inference_portal_limit_counters_lost_total")
    rule = [limit(requests_per_minute=1_000)]

    async def around_a_restart():
        counters = RedisCounters(f"redis://127.0.0.1:{port}/0", retry_seconds=0)
        limiter = Limiter(counters)
        before = [await limiter.admit(rule, "key1", "team-a") for _ in range(3)]
        processes[-1].terminate()
        processes[-1].wait(timeout=10)
        start()
        after = None
        while after is None:  # the connection the restart cut fails once; the next reconnects
            try:
                after = await limiter.admit(rule, "key1", "team-a")
            except RedisUnavailable:
                await asyncio.sleep(0.01)
        await counters.close()
        return before, after

    before, after = asyncio.run(around_a_restart())
    if int(time.time() // 60) != int(before[0].now // 60):
        pytest.skip("the minute ended during the test: its window began after the restart")
    assert [decision.values[0] for decision in before] == [1, 2, 3]
    assert after.values == [1]  # counted from zero again
    assert after.headers[COUNTED_SINCE] >= before[-1].headers[COUNTED_SINCE]
    assert sample("inference_portal_limit_counters_lost_total") == lost + 1
    assert "the limits' counters were lost" in caplog.text


@pytest.fixture
def hung_limits(hung, settings) -> HungServer:
    """The gateway's limits pointed at a hung Redis (listed before ``gateway``, which reads it)."""
    settings.GOVERNANCE_REDIS_URL = f"redis://127.0.0.1:{hung.port}/0"
    settings.GOVERNANCE_REDIS_RETRY_SECONDS = 3600
    return hung


@pytest.mark.django_db(transaction=True)
def test_the_gateway_serves_through_a_hung_redis_unchecked_and_counted(cluster, hung_limits, gateway, api_key,
                                                                       start_backend) -> None:
    """Fail-open: every request is answered, the first after one timeout, the others without
    asking Redis; each is counted as unchecked."""
    from accounts.models import Team
    from tests.gateway.conftest import serve_model, settles_at

    unchecked = sample("inference_portal_limit_checks_failed_total")  # the gateway serves in this process
    backend = start_backend("replica-a")
    serve_model(cluster, "limited", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=1)
    client = gateway.client(api_key)
    answers = [client.chat.completions.with_raw_response.create(
        model="limited", messages=[{"role": "user", "content": "hi"}]) for _ in range(5)]
    assert [answer.http_response.status_code for answer in answers] == [200] * 5  # a limit of 1, unchecked
    assert not any(name.startswith("x-ratelimit") for name in answers[-1].headers)
    assert len(hung_limits.connections) == 1
    settles_at(lambda: sample("inference_portal_limit_checks_failed_total"), unchecked + 5)


@pytest.fixture
def restartable_limits(own_redis, settings):
    """The gateway's limits in this test's own Redis (listed before ``gateway``, which reads it)."""
    port, _, _ = own_redis
    settings.GOVERNANCE_REDIS_URL = f"redis://127.0.0.1:{port}/0"
    settings.GOVERNANCE_REDIS_RETRY_SECONDS = 0
    return own_redis


@pytest.mark.django_db(transaction=True)
def test_the_gateway_says_which_answers_were_counted_since_a_redis_restart(cluster, restartable_limits, gateway,
                                                                           api_key, start_backend) -> None:
    from accounts.models import Team
    from tests.gateway.conftest import serve_model
    from tests.governance.test_limits import ask, away_from_minute_end

    _, processes, start = restartable_limits
    backend = start_backend("replica-a")
    serve_model(cluster, "limited", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=1_000)
    away_from_minute_end()  # the restart's window is the minute of the answers
    first = ask(gateway, api_key, "limited")
    processes[-1].terminate()
    processes[-1].wait(timeout=10)
    start()
    # fail-open while the connection the restart cut fails once; then counted again, said since when
    after = wait_for(lambda: [answer for answer in [ask(gateway, api_key, "limited")]
                              if answer.headers.get("x-ratelimit-remaining-requests") == "999"],
                     message="an answer counted by the restarted Redis")[0]
    assert after.status_code == 200
    assert after.headers[COUNTED_SINCE] >= first.headers[COUNTED_SINCE]
    assert after.headers[COUNTED_SINCE].endswith("Z")
