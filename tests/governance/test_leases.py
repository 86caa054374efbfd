"""Quota leases (governance.leases) against the real Redis: busy counters are admitted from memory,
no replica ever lets a window past its limit, and unused units go back to the counter."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from governance.leases import LEASE_SHARE
from governance.limits import PREFIX, Limiter, RedisCounters
from tests.governance.test_limits import Clock, limit
from tests.support.services import REDIS_URL

MOMENT = datetime(2030, 5, 17, 10, 15, 1, tzinfo=UTC)
STEP = 0.001  # seconds between two requests: 1,000 a second, a busy counter
MINUTE_KEY = f"{PREFIX}:r:7:*:{int(MOMENT.timestamp() // 60)}"


class CountingRedis:
    """The counters' real Redis client, counting the scripts that admit or refill (round trips a
    request could wait for)."""

    def __init__(self, counters: RedisCounters) -> None:
        self.inner, self.scripts = counters.redis, 0
        counters.redis = self

    async def evalsha(self, *args: Any) -> Any:
        self.scripts += 1
        return await self.inner.evalsha(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def admit_many(limiter: Limiter, clock: Clock, rule: list, count: int, reserve: int = 0) -> list:
    decisions = []
    for _ in range(count):
        decisions.append(await limiter.admit(rule, "key1", "team-a", reserve))
        clock.now += STEP
        await asyncio.sleep(0)  # a background refill may run, as between requests of a real gateway
    return decisions


def test_a_busy_counter_is_admitted_from_its_lease_with_exact_headers(limits_redis) -> None:
    clock, rule = Clock(MOMENT), [limit(requests_per_minute=100_000)]

    async def busy():
        counters = RedisCounters(REDIS_URL, lease_seconds=0.25)
        scripts = CountingRedis(counters)
        limiter = Limiter(counters, clock)
        decisions = await admit_many(limiter, clock, rule, 2_000)
        held = int(limits_redis.get(MINUTE_KEY))
        await counters.close()  # gives back what it holds
        return decisions, scripts.scripts, held

    decisions, scripts, held = asyncio.run(busy())
    assert all(decision.refused is None for decision in decisions)
    # one replica: every answer's count is exact, leased or not
    assert [decision.values[0] for decision in decisions] == list(range(1, 2_001))
    assert scripts < 2_000 / 20, f"{scripts} round trips to Redis for 2,000 requests"
    assert held > 2_000  # units leased ahead were in the counter ...
    assert int(limits_redis.get(MINUTE_KEY)) == 2_000  # ... and given back on close


def test_two_replicas_with_leases_never_pass_the_limit_and_lose_little_of_it(limits_redis) -> None:
    clock, rule, limit_figure = Clock(MOMENT), [limit(requests_per_minute=1_000)], 1_000

    async def race():
        counters = [RedisCounters(REDIS_URL, lease_seconds=0.25) for _ in range(2)]
        limiters = [Limiter(c, clock) for c in counters]
        admitted = refused_streak = 0
        while refused_streak < 10:
            for limiter in limiters:
                decision = await limiter.admit(rule, "key1", "team-a")
                admitted += decision.refused is None
                refused_streak = refused_streak + 1 if decision.refused else 0
                clock.now += STEP
                await asyncio.sleep(0)
        for limiter in limiters:
            await limiter.counters.close()
        return admitted

    admitted = asyncio.run(race())
    assert admitted <= limit_figure
    # what another replica may still hold when one is refused: under 1/LEASE_SHARE of a nearly spent room
    assert admitted >= limit_figure - 2 * LEASE_SHARE, admitted
    assert int(limits_redis.get(MINUTE_KEY)) == admitted


def test_idle_and_outdated_leases_go_back_to_the_counter(limits_redis) -> None:
    clock = Clock(MOMENT)

    async def lease_then_idle():
        counters = RedisCounters(REDIS_URL, lease_seconds=0.25, idle_seconds=1.0)
        limiter = Limiter(counters, clock)
        await admit_many(limiter, clock, [limit(requests_per_minute=100_000)], 600)
        await asyncio.gather(*counters._refills)  # idle: the last refill is in, as it is long before 1 s passes
        holding = int(limits_redis.get(MINUTE_KEY))
        clock.now += 0.5
        await limiter.flush()  # not idle long enough yet
        still = int(limits_redis.get(MINUTE_KEY))
        clock.now += 0.6
        await limiter.flush()
        idle = int(limits_redis.get(MINUTE_KEY))
        await admit_many(limiter, clock, [limit(requests_per_minute=100_000)], 600)
        await admit_many(limiter, clock, [limit(requests_per_minute=50_000)], 1)  # staff lowered the limit
        await limiter.flush()
        lowered = int(limits_redis.get(MINUTE_KEY)) - counters.book.leases[MINUTE_KEY].held  # less the new lease
        await counters.close()
        return holding, still, idle, lowered

    holding, still, idle, lowered = asyncio.run(lease_then_idle())
    assert holding > 600 and still == holding
    assert idle == 600
    assert lowered == 1_201  # the lease taken under the old limit went back when it changed


def test_tokens_leases_settle_to_the_usage_once_idle(limits_redis) -> None:
    """Reservations from a lease, usage settled after: the counter ends at what was used."""
    clock, rule = Clock(MOMENT), [limit(tokens_per_minute=10_000_000)]

    async def traffic():
        counters = RedisCounters(REDIS_URL, lease_seconds=0.25)
        limiter = Limiter(counters, clock)
        decisions = await admit_many(limiter, clock, rule, 500, reserve=40)
        for decision in decisions:
            limiter.charge(decision.checks, 25 - decision.reserved)  # each used 25 of its 40
        clock.now += 2
        await limiter.flush()
        await counters.close()
        return decisions

    decisions = asyncio.run(traffic())
    assert [decision.values[0] for decision in decisions] == [40 * n for n in range(1, 501)]
    key = f"{PREFIX}:t:7:*:{int(MOMENT.timestamp() // 60)}"
    assert int(limits_redis.get(key)) == 500 * 25


def test_a_new_minute_leases_at_the_rate_its_counter_had(limits_redis) -> None:
    clock, rule = Clock(MOMENT), [limit(requests_per_minute=100_000)]

    async def across_a_minute():
        counters = RedisCounters(REDIS_URL, lease_seconds=0.25)
        limiter = Limiter(counters, clock)
        await admit_many(limiter, clock, rule, 500)
        clock.now = MOMENT.timestamp() - MOMENT.second + 60  # the next minute's first moment
        scripts = CountingRedis(counters)
        decisions = await admit_many(limiter, clock, rule, 50)
        await counters.close()
        return decisions, scripts.scripts

    decisions, scripts = asyncio.run(across_a_minute())
    assert [decision.values[0] for decision in decisions] == list(range(1, 51))  # a fresh count
    assert scripts <= 2, f"{scripts} round trips for the new minute's first 50 requests"


def test_units_given_back_never_take_a_counter_below_zero(limits_redis) -> None:
    """A counter deleted while a gateway leases it (staff clearing counters, Redis restarted): the
    units given back are not in it, and a negative count would admit as many beyond the limit."""
    clock, rule = Clock(MOMENT), [limit(requests_per_minute=100_000)]

    async def lease_then_delete():
        counters = RedisCounters(REDIS_URL, lease_seconds=0.25)
        limiter = Limiter(counters, clock)
        await admit_many(limiter, clock, rule, 300)
        held = counters.book.leases[MINUTE_KEY].held
        limits_redis.delete(MINUTE_KEY)
        limits_redis.set(MINUTE_KEY, 3)  # three requests counted since, by another replica
        await counters.close()
        return held

    assert asyncio.run(lease_then_delete()) > 3
    assert int(limits_redis.get(MINUTE_KEY)) == 0


def test_a_settlement_never_takes_a_deleted_counter_below_zero(limits_redis) -> None:
    """The same for tokens a request reserved beyond its usage, given back after the counter went."""
    clock, rule = Clock(MOMENT), [limit(tokens_per_minute=1_000)]
    key = f"{PREFIX}:t:7:*:{int(MOMENT.timestamp() // 60)}"

    async def settle_after_delete():
        limiter = Limiter(RedisCounters(REDIS_URL), clock)
        decision = await limiter.admit(rule, "key1", "team-a", reserve=40)
        limits_redis.delete(key)
        limiter.charge(decision.checks, 10 - decision.reserved)  # used 10 of its 40
        await limiter.flush()
        await limiter.counters.close()

    asyncio.run(settle_after_delete())
    assert int(limits_redis.get(key) or 0) == 0


async def flushing(limiter: Limiter) -> None:
    """A gateway's flush loop (governance.gateway: every CHARGE_SECONDS), here as often as the loop turns."""
    while True:
        await limiter.flush()
        await asyncio.sleep(0.005)


def busy_then_other(rule: list, reserve: int, first: int) -> tuple[int, int]:
    """Two leasing replicas, flushing as gateways do: ``first`` requests to the first (busy: it
    leases ahead), then every request to the second until it is refused 3 times in a row. The
    first replica's unused units are what the second would be refused for. (requests admitted,
    index of the first refusal)."""
    clock = Clock(MOMENT)

    async def race() -> list:
        limiters = [Limiter(RedisCounters(REDIS_URL, lease_seconds=0.25), clock) for _ in range(2)]
        loops = [asyncio.get_running_loop().create_task(flushing(limiter)) for limiter in limiters]
        decisions, streak = [], 0
        try:
            while streak < 3:
                limiter = limiters[0] if len(decisions) < first else limiters[1]
                decision = await limiter.admit(rule, "key1", "team-a", reserve)
                decisions.append(decision)
                streak = streak + 1 if decision.refused else 0
                clock.now += STEP
                await asyncio.sleep(0)
        finally:
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            for limiter in limiters:
                await limiter.counters.close()
        return decisions

    decisions = asyncio.run(race())
    refusals = [index for index, decision in enumerate(decisions) if decision.refused]
    return len(decisions) - len(refusals), refusals[0]


def test_two_replicas_leasing_a_small_limit_admit_exactly_the_limit(limits_redis) -> None:
    """30 requests a minute between two replicas: what the busy one leased ahead never makes the
    other refuse while the count is below 30 (it is reclaimed first), and never lets a 31st in."""
    admitted, first_refusal = busy_then_other([limit(requests_per_minute=30)], 0, 12)
    assert (admitted, first_refusal) == (30, 30), "refused below the limit, or admitted past it"
    assert int(limits_redis.get(MINUTE_KEY)) == 30


def test_two_replicas_leasing_a_budget_admit_until_it_is_spent(limits_redis) -> None:
    """A 1,000-token monthly budget, requests reserving 10 tokens each and using them all: between
    two leasing replicas it admits 100 requests, no more, and refuses none before."""
    admitted, first_refusal = busy_then_other([limit(monthly_tokens=1_000)], 10, 30)
    assert (admitted, first_refusal) == (100, 100), f"refused at {first_refusal * 10} tokens"
    assert int(limits_redis.get(f"{PREFIX}:m:7:*:{MOMENT:%Y%m}")) == 1_000
