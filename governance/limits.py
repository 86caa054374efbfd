"""Requests and tokens per minute and tokens per month, counted where every gateway replica sees them.

**Counting.** Each limit (:class:`governance.models.Limit`) is a scope; each of its figures a
counter keyed by the scope and its window: the clock minute (requests, tokens) or the UTC calendar
month (tokens). A request is admitted by one atomic Redis script (:data:`ADMIT`) that reads every
counter that applies to it and, when each has room for what the request adds to it, adds that:
one request to each requests-per-minute counter, and to each tokens counter the tokens the request
may take, **reserved** at admission (:func:`governance.bodies.reservation`: its
completion cap, or ``USAGE_RESERVE_COMPLETION_TOKENS`` when the request sets none, plus its prompt estimated at
``USAGE_RESERVE_BYTES_PER_TOKEN`` bytes a token of its body). Once the answer is in, the
difference between the backend's ``usage`` and the reservation is settled (:meth:`Limiter.charge`,
gathered and sent in one pipeline every ``CHARGE_SECONDS``; a request that failed gives its
reservation back).

**The bound.** Whatever the number of replicas and of requests in flight, no more requests get in
per window than the limit, and a window's tokens exceed their limit by at most what requests use
beyond their reservations: nothing when every request sets ``max_tokens`` and its prompt takes no
more tokens than its body's bytes over ``USAGE_RESERVE_BYTES_PER_TOKEN`` (1 makes that hold for any
byte-level tokenizer; 4, the default, for English text, and estimates as OpenAI does). A request
whose reservation alone is larger than a limit is refused (its ``max_tokens`` is the client's to
lower). Reserving what a request may take refuses some requests near a limit that its actual use
would have let in; the settlement gives the difference back within ``CHARGE_SECONDS``. Busy counters are
leased (:mod:`governance.leases`): a replica takes their next units with an admission and admits
from memory; leased units are in the counter, so the bound holds as it is.

Windows are fixed, aligned to the clock: simple, the same on every replica, and every answer can
say exactly when the window resets (``x-ratelimit-reset-*``, ``Retry-After``). Keys expire with
their window. Without Redis (the embedded single-process demo) :class:`LocalCounters` counts in
memory, the same way.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from governance.leases import IDLE_SECONDS, LEASE_SHARE, Lease, LeaseBook
from governance.resp import PipelinedRedis

REQUESTS, TOKENS, BUDGET = "requests", "tokens", "budget"
MINUTE = 60
PREFIX = "ip:limits"
CHARGE_SECONDS = 0.05

# KEYS: one counter per check. ARGV: per check its limit, its key's lifetime in seconds, what this
# request adds to it (1 for a request, its reserved tokens) and the lease units the replica would
# like beyond that (governance.leases). A counter has room when it stays within its limit after
# adding at least 1 (one at its limit refuses every request). Admitted: returns 0, every counter's
# value after adding, then the units leased from each (at most 1/LEASE_SHARE of the room left).
# Refused: the 1-based index of the first check without room and every value as it was.
ADMIT = """
local values = {}
for i, key in ipairs(KEYS) do
  values[i] = tonumber(redis.call('GET', key) or '0')
end
for i = 1, #KEYS do
  if values[i] + math.max(tonumber(ARGV[4 * i - 1]), 1) > tonumber(ARGV[4 * i - 3]) then
    return {i, unpack(values)}
  end
end
local answer = {0}
local extras = {}
for i, key in ipairs(KEYS) do
  local amount = tonumber(ARGV[4 * i - 1])
  local extra = math.floor((tonumber(ARGV[4 * i - 3]) - values[i] - amount) / SHARE)
  extra = math.max(0, math.min(tonumber(ARGV[4 * i]), extra))
  extras[i] = extra
  if amount + extra > 0 then
    values[i] = redis.call('INCRBY', key, amount + extra)
    if values[i] == amount + extra then redis.call('EXPIRE', key, ARGV[4 * i - 2]) end
  end
  answer[i + 1] = values[i]
end
for i = 1, #KEYS do answer[#KEYS + 1 + i] = extras[i] end
return answer
""".replace("SHARE", str(LEASE_SHARE))

# Units given back: leased and unused, or tokens reserved beyond a request's usage. KEYS: counters;
# ARGV: the units of each. A counter is lowered by at most its value: one that is gone (expired, or
# deleted while the units were in it) stays gone, never negative, which would admit as many beyond
# the limit.
GIVE_BACK = """
for i, key in ipairs(KEYS) do
  local value = tonumber(redis.call('GET', key) or '0')
  local units = math.min(value, tonumber(ARGV[i]))
  if units > 0 then redis.call('DECRBY', key, units) end
end
return 0
"""


@dataclass(frozen=True)
class Check:
    """One counter a request is held to."""

    kind: str  # REQUESTS, TOKENS or BUDGET
    key: str
    limit: int
    resets_at: float  # Unix time the window ends
    team: str


@dataclass
class Decision:
    """The outcome of :meth:`Limiter.admit`: ``refused`` is the check at its limit, or None."""

    checks: Sequence[Check]
    values: list[int]
    refused: Check | None = None
    now: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    reserved: int = 0  # tokens the request reserves in each tokens counter (added when admitted)


def month_bounds(now: float) -> tuple[str, float]:
    """The UTC calendar month of ``now`` ("YYYYMM") and the Unix time it ends."""
    return _month_of_minute(int(now // MINUTE))


@lru_cache(maxsize=4)
def _month_of_minute(minute: int) -> tuple[str, float]:
    moment = datetime.fromtimestamp(minute * MINUTE, UTC)
    days = calendar.monthrange(moment.year, moment.month)[1]
    end = datetime(moment.year, moment.month, days, tzinfo=UTC).timestamp() + 86_400
    return f"{moment.year:04d}{moment.month:02d}", end


def budget_key(scope: str, month: str) -> str:
    return f"{PREFIX}:m:{scope}:{month}"


def checks_for(limits: Sequence[Hashable], token_key: str, now: float, team: str) -> tuple[Check, ...]:
    """Every counter the ``limits`` (frozen views of Limit rows) hold a request of one API token to."""
    return _checks(tuple(limits), token_key, int(now // MINUTE), team)


@lru_cache(maxsize=4096)
def _checks(limits: tuple[Any, ...], token_key: str, minute: int, team: str) -> tuple[Check, ...]:
    """Worked out once per scope, token and minute: the same for every request of that minute."""
    minute_ends = (minute + 1) * MINUTE
    month, month_ends = _month_of_minute(minute)
    checks: list[Check] = []
    for limit in limits:
        scope = limit.scope
        figures = [
            (REQUESTS, f"{PREFIX}:r:{scope}:{minute}", limit.requests_per_minute, minute_ends),
            (TOKENS, f"{PREFIX}:t:{scope}:{minute}", limit.tokens_per_minute, minute_ends),
            (REQUESTS, f"{PREFIX}:r:{scope}:k:{token_key}:{minute}", limit.api_token_requests_per_minute, minute_ends),
            (TOKENS, f"{PREFIX}:t:{scope}:k:{token_key}:{minute}", limit.api_token_tokens_per_minute, minute_ends),
            (BUDGET, budget_key(scope, month), limit.monthly_tokens, month_ends),
        ]
        checks += [Check(kind, key, figure, ends, team) for kind, key, figure, ends in figures if figure]
    return tuple(checks)


class Counters:
    """Where the counters live: :class:`RedisCounters` or :class:`LocalCounters`."""

    async def admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        """Add ``amounts`` to the checks' counters if each has room (see :data:`ADMIT`)."""
        raise NotImplementedError

    async def add(self, amounts: dict[str, tuple[int, int]], now: float) -> None:
        """Add tokens to counters: key -> (tokens, the key's lifetime in seconds from ``now``)."""
        raise NotImplementedError

    async def read(self, keys: list[str]) -> list[int]:
        raise NotImplementedError

    async def release(self, now: float, everything: bool = False) -> None:
        """Give back leased units not in use (none are leased by default)."""

    async def close(self) -> None:
        """Release connections (nothing to release by default)."""


def _lifetime(resets_at: float, now: float) -> int:
    """A counter key's lifetime in seconds: to the end of its window, and a second more."""
    return max(1, int(resets_at - now) + 1)


class RedisCounters(Counters):
    """Counters in one Redis, shared by every gateway replica (one pipelined connection per
    process), with quota leases for busy counters (:mod:`governance.leases`; ``lease_seconds=0``
    turns them off: every request asks Redis)."""

    def __init__(self, url: str, lease_seconds: float = 0.0, idle_seconds: float = IDLE_SECONDS) -> None:
        self.redis = PipelinedRedis(url)
        self.book = LeaseBook(lease_seconds, idle_seconds)
        self._refills: set[asyncio.Task] = set()

    async def admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        takes = self.book.plan(checks, amounts, now)
        if not LeaseBook.all_local(takes):
            remote = [index for index, take in enumerate(takes) if take.by_redis]
            args: list[object] = []
            for index in remote:
                check, take = checks[index], takes[index]
                args += [check.limit, _lifetime(check.resets_at, now), take.remote, take.want]
            try:
                answer = await self.redis.evalsha(ADMIT, [checks[index].key for index in remote], args)
            except BaseException:
                LeaseBook.undo(takes)
                raise
            if refused := int(answer[0]):
                LeaseBook.undo(takes)
                for index, value in zip(remote, answer[1:], strict=True):
                    takes[index].lease.value = int(value)
                return remote[refused - 1] + 1, [take.lease.used for take in takes]
            count = len(remote)
            LeaseBook.granted([takes[index] for index in remote], [int(value) for value in answer[1:1 + count]],
                              [int(extra) for extra in answer[1 + count:]])
        for lease, want in self.book.refills(takes, now):
            task = asyncio.get_running_loop().create_task(self._refill(lease, want, now))
            self._refills.add(task)
            task.add_done_callback(self._refills.discard)
        return 0, [take.lease.used for take in takes]

    async def _refill(self, lease: Lease, want: int, now: float) -> None:
        """:data:`ADMIT` with no request of its own (amount 0): only the lease, off the request path."""
        args = [lease.limit, _lifetime(lease.resets_at, now), 0, want]
        try:
            answer = await self.redis.evalsha(ADMIT, [lease.key], args)
        except OSError:  # RedisUnavailable: the next request goes to Redis itself
            answer = [1, lease.value]
        extra = int(answer[2]) if int(answer[0]) == 0 else 0  # refused: no room left to lease
        self.book.refilled(lease, int(answer[1]), extra)

    async def add(self, amounts: dict[str, tuple[int, int]], now: float) -> None:
        """Charges are added; tokens given back (reservations larger than the usage) go through
        :data:`GIVE_BACK`, which never takes a counter below zero."""
        commands: list[Awaitable[Any]] = []
        back = {key: -tokens for key, (tokens, _) in amounts.items() if tokens < 0}
        for key, (tokens, lifetime) in amounts.items():
            if tokens > 0:
                commands += [self.redis.call("INCRBY", key, tokens), self.redis.call("EXPIRE", key, lifetime, "NX")]
        if back:
            commands.append(self.redis.evalsha(GIVE_BACK, list(back), list(back.values())))
        await asyncio.gather(*commands)
        for key, (tokens, _) in amounts.items():
            self.book.charged(key, tokens)

    async def release(self, now: float, everything: bool = False) -> None:
        returns = self.book.give_back(now, everything)
        if not returns:
            return
        keys = list(returns)
        try:
            await self.redis.evalsha(GIVE_BACK, keys, [returns[key][0] for key in keys])
        except BaseException:
            for key, (units, ends) in returns.items():  # kept for the next release
                self.book.hand_back(key, units, ends)
            raise

    async def close(self) -> None:
        await asyncio.gather(*self._refills)  # their units are in the counter: wait to give them back
        with contextlib.suppress(OSError):  # RedisUnavailable: the units stay counted until their window ends
            await self.release(time.time(), everything=True)
        await self.redis.close()


class LocalCounters(Counters):
    """Counters in this process's memory: for one gateway without Redis (the embedded demo)."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[int, float]] = {}  # key -> (value, expires)

    def _get(self, key: str, now: float) -> int:
        value, expires = self.values.get(key, (0, 0.0))
        return value if expires > now else 0

    async def admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        values = [self._get(check.key, now) for check in checks]
        for index, check in enumerate(checks):
            if values[index] + max(amounts[index], 1) > check.limit:
                return index + 1, values
        for index, check in enumerate(checks):
            if amounts[index] > 0:
                values[index] += amounts[index]
                self.values[check.key] = (values[index], check.resets_at)
        return 0, values

    async def add(self, amounts: dict[str, tuple[int, int]], now: float) -> None:
        for key, (tokens, lifetime) in amounts.items():
            self.values[key] = (self._get(key, now) + tokens, now + lifetime)
        if len(self.values) > 100_000:
            self.values = {key: entry for key, entry in self.values.items() if entry[1] > now}

    async def read(self, keys: list[str]) -> list[int]:
        now = time.time()
        return [self._get(key, now) for key in keys]


def counters_for(url: str, lease_seconds: float = 0.0) -> Counters:
    return RedisCounters(url, lease_seconds) if url else LocalCounters()


def _reset(seconds: float) -> str:
    """OpenAI's ``x-ratelimit-reset-*`` form: ``1m30s``, ``12s``, ``3h2m0s``."""
    return _reset_text(max(1, int(seconds + 0.999)))


@lru_cache(maxsize=4096)
def _reset_text(total: int) -> str:
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def headers_for(decision: Decision) -> dict[str, str]:
    """``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` of the tightest counters, and
    ``Retry-After`` when refused. The monthly budget counts as a tokens limit."""
    tightest: dict[str, tuple[int, float, Check]] = {}  # "requests" / "tokens" -> (remaining, resets_at, check)
    for check, value in zip(decision.checks, decision.values, strict=True):
        suffix = "requests" if check.kind == REQUESTS else "tokens"
        known = tightest.get(suffix)
        if known is None or (check.limit - value, check.resets_at) < known[:2]:
            tightest[suffix] = (check.limit - value, check.resets_at, check)
    headers: dict[str, str] = {}
    for suffix in ("requests", "tokens"):
        if suffix in tightest:
            remaining, resets_at, check = tightest[suffix]
            headers[f"x-ratelimit-limit-{suffix}"] = str(check.limit)
            headers[f"x-ratelimit-remaining-{suffix}"] = str(max(0, remaining))
            headers[f"x-ratelimit-reset-{suffix}"] = _reset(resets_at - decision.now)
    if decision.refused is not None:
        headers["Retry-After"] = str(max(1, int(decision.refused.resets_at - decision.now + 0.999)))
    return headers


class Limiter:
    """Admits requests against the counters, then charges their tokens (sent by :meth:`flush`)."""

    def __init__(self, counters: Counters, clock: Callable[[], float] = time.time) -> None:
        self.counters = counters
        self.clock = clock
        self.pending: dict[str, tuple[int, int]] = {}

    async def admit(self, limits: Sequence[Hashable], token_key: str, team: str, reserve: int = 0) -> Decision:
        """Count a request against ``limits``, ``reserve`` tokens in each tokens counter."""
        now = self.clock()
        checks = checks_for(limits, token_key, now, team)
        if not checks:
            return Decision(checks, [], now=now)
        amounts = [1 if check.kind == REQUESTS else reserve for check in checks]
        refused, values = await self.counters.admit(checks, amounts, now)
        decision = Decision(checks, values, checks[refused - 1] if refused else None, now, reserved=reserve)
        decision.headers = headers_for(decision)
        return decision

    def charge(self, checks: Sequence[Check], tokens: int) -> None:
        """Add ``tokens`` (negative: give back) to the tokens counters of ``checks``, at the next :meth:`flush`."""
        if tokens == 0:
            return
        now, pending = self.clock(), self.pending
        for check in checks:
            if check.kind != REQUESTS:
                known = pending.get(check.key)
                pending[check.key] = (tokens + known[0] if known else tokens, _lifetime(check.resets_at, now))

    async def flush(self) -> None:
        """Give back idle leases, and send the charges gathered since the last flush in one round
        trip; kept on failure."""
        await self.counters.release(self.clock())
        if not self.pending:
            return
        amounts, self.pending = {key: entry for key, entry in self.pending.items() if entry[0]}, {}
        try:
            await self.counters.add(amounts, self.clock())
        except BaseException:
            for key, (tokens, lifetime) in amounts.items():
                added, _ = self.pending.get(key, (0, 0))
                self.pending[key] = (added + tokens, lifetime)
            raise
