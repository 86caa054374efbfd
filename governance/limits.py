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
their window. Without Redis, :class:`SharedCounters` counts the same way for every worker of one
gateway (a SQLite file the supervisor names), and :class:`LocalCounters` in the memory of a gateway
of one worker.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from governance import metrics
from governance.leases import (
    IDLE_SECONDS,
    LEASE_SHARE,
    RECLAIM_FLAG_SECONDS,
    RECLAIM_POLL_SECONDS,
    RECLAIM_SECONDS,
    Lease,
    LeaseBook,
)
from governance.resp import PipelinedRedis

logger = logging.getLogger(__name__)
REQUESTS, TOKENS, BUDGET = "requests", "tokens", "budget"
MINUTE = 60
PREFIX = "ip:limits"
MARKER = f"{PREFIX}-counted-since"  # outside PREFIX: staff clearing the counters by pattern keep it
CHARGE_SECONDS = 0.05
# on answers whose windows began before the counters were (Redis lost them): when counting began
COUNTED_SINCE = "x-ratelimit-counted-since"

# KEYS: one counter per check, then MARKER. ARGV: per check its limit, its key's lifetime in
# seconds, what this request adds to it (1 for a request, its reserved tokens) and the lease units
# the replica would like beyond that (governance.leases); then the replica's id. A counter has room
# when it stays within its limit after adding at least 1 (one at its limit refuses every request).
# Admitted: returns 0, SINCE, every counter's value after adding, then the units leased from each
# (at most 1/LEASE_SHARE of the room left; each replica's leased units are kept in the counter's
# HELD hash). Refused: the 1-based index of the first check without room, SINCE and every value as
# it was; the index is negative when the room is there but leased to other replicas, unused as far
# as they last said: then the counter's RECLAIM flag asks them to give their units back, and the
# replica asks again (governance.leases, "Leases never refuse below the limit").
# SINCE: the Unix time (Redis' clock) the counters have been counted since, kept in MARKER, a key
# without expiry: when Redis lost its data (restarted without persistence, flushed) MARKER is gone
# with the counters and is set again, so every answer says which windows were counted in full.
ADMIT = """
local n = #KEYS - 1
local rid = ARGV[4 * n + 1]
local since = redis.call('GET', KEYS[n + 1])
if not since then
  local t = redis.call('TIME')
  since = t[1] .. '.' .. string.format('%06d', t[2])
  redis.call('SET', KEYS[n + 1], since)
end
local values = {}
for i = 1, n do
  values[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
end
for i = 1, n do
  local limit, amount = tonumber(ARGV[4 * i - 3]), math.max(tonumber(ARGV[4 * i - 1]), 1)
  if values[i] + amount > limit then
    local code, others = i, 0
    local held = redis.call('HGETALL', KEYS[i] .. ':h')
    for j = 1, #held, 2 do
      if held[j] ~= rid then others = others + tonumber(held[j + 1]) end
    end
    if others > 0 and values[i] - others + amount <= limit then
      redis.call('SET', KEYS[i] .. ':r', '1', 'PX', RECLAIM_MS)
      code = -i
    end
    return {code, since, unpack(values)}
  end
end
local answer = {0, since}
local extras = {}
for i = 1, n do
  local amount = tonumber(ARGV[4 * i - 1])
  local extra = math.floor((tonumber(ARGV[4 * i - 3]) - values[i] - amount) / SHARE)
  extra = math.max(0, math.min(tonumber(ARGV[4 * i]), extra))
  extras[i] = extra
  if amount + extra > 0 then
    values[i] = redis.call('INCRBY', KEYS[i], amount + extra)
    if values[i] == amount + extra then redis.call('EXPIRE', KEYS[i], ARGV[4 * i - 2]) end
  end
  if extra > 0 then
    redis.call('HINCRBY', KEYS[i] .. ':h', rid, extra)
    redis.call('EXPIRE', KEYS[i] .. ':h', ARGV[4 * i - 2])
  end
  answer[i + 2] = values[i]
end
for i = 1, n do answer[n + 2 + i] = extras[i] end
return answer
""".replace("SHARE", str(LEASE_SHARE)).replace("RECLAIM_MS", str(int(RECLAIM_FLAG_SECONDS * 1000)))

# Units given back: leased and unused, or tokens reserved beyond a request's usage. KEYS: counters;
# ARGV: the units of each, then (for leases) the replica's id, whose HELD entry goes: it gives back
# every unit it held. A counter is lowered by at most its value: one that is gone (expired, or
# deleted while the units were in it) stays gone, never negative, which would admit as many beyond
# the limit.
GIVE_BACK = """
for i, key in ipairs(KEYS) do
  local value = tonumber(redis.call('GET', key) or '0')
  local units = math.min(value, tonumber(ARGV[i]))
  if units > 0 then redis.call('DECRBY', key, units) end
  if ARGV[#KEYS + 1] then redis.call('HDEL', key .. ':h', ARGV[#KEYS + 1]) end
end
return 0
"""

# What a replica holds unused of each leased counter, as of now (KEYS: counters; ARGV: the
# replica's id, then per counter its units and its key's lifetime). Returns per counter whether
# another replica was refused for want of units leased (the RECLAIM flag): then this one gives
# them back.
REPORT = """
local rid = ARGV[1]
local flags = {}
for i, key in ipairs(KEYS) do
  local units = tonumber(ARGV[2 * i])
  if units > 0 then
    redis.call('HSET', key .. ':h', rid, units)
    redis.call('EXPIRE', key .. ':h', ARGV[2 * i + 1])
  else
    redis.call('HDEL', key .. ':h', rid)
  end
  flags[i] = redis.call('EXISTS', key .. ':r')
end
return flags
"""


@dataclass(frozen=True)
class Check:
    """One counter a request is held to."""

    kind: str  # REQUESTS, TOKENS or BUDGET
    key: str
    limit: int
    resets_at: float  # Unix time the window ends
    team: str
    starts_at: float = 0.0  # Unix time the window began


@dataclass
class Decision:
    """The outcome of :meth:`Limiter.admit`: ``refused`` is the check at its limit, or None."""

    checks: Sequence[Check]
    values: list[int]
    refused: Check | None = None
    now: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    reserved: int = 0  # tokens the request reserves in each tokens counter (added when admitted)
    since: float = 0.0  # the counters' (Counters.since) as of this admission


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
    month_starts = datetime(int(month[:4]), int(month[4:]), 1, tzinfo=UTC).timestamp()
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
        checks += [Check(kind, key, figure, ends, team, ends - MINUTE if kind != BUDGET else month_starts)
                   for kind, key, figure, ends in figures if figure]
    return tuple(checks)


class Counters:
    """Where the counters live: :class:`RedisCounters` or :class:`LocalCounters`.

    ``since``: the Unix time the counters have been counted since (Redis lost them, or this process
    started, for counters in memory); a window that began before it was counted in full."""

    since: float = 0.0

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
    turns them off: every request asks Redis). ``timeout`` and ``retry_seconds``: the client's
    (:class:`governance.resp.PipelinedRedis`: a hung Redis costs one timeout per ``retry_seconds``)."""

    def __init__(self, url: str, lease_seconds: float = 0.0, idle_seconds: float = IDLE_SECONDS,
                 timeout: float = 0.25, retry_seconds: float = 1.0) -> None:
        self.redis = PipelinedRedis(url, timeout, retry_seconds, on_open=metrics.LIMITS_REDIS_CIRCUIT_OPENED.inc)
        self.book = LeaseBook(lease_seconds, idle_seconds)
        self.replica = uuid.uuid4().hex[:16]  # names this process's leased units in Redis
        self._refills: set[asyncio.Task] = set()

    def _counted_since(self, since: Any) -> None:
        """SINCE of an answer: a new one (other than the first this process sees) means Redis lost the counters."""
        since = float(since)
        if self.since and since > self.since:
            metrics.LIMITS_COUNTERS_LOST.inc()
            logger.warning("the limits' counters were lost (Redis restarted without persistence, or flushed): "
                           "windows that began before %s were counted from then only, and their answers say so "
                           "(x-ratelimit-counted-since)", datetime.fromtimestamp(since, UTC).isoformat())
        self.since = max(self.since, since)

    async def admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        """:meth:`_admit`; a refusal for want of units other replicas leased waits for them to be
        given back (:mod:`governance.leases`, at most ``RECLAIM_SECONDS``) and asks again."""
        deadline = None
        while True:
            refused, values = await self._admit(checks, amounts, now)
            if refused >= 0:
                return refused, values
            deadline = deadline or time.monotonic() + RECLAIM_SECONDS
            if time.monotonic() >= deadline:
                return -refused, values
            await asyncio.sleep(RECLAIM_POLL_SECONDS)

    async def _admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        takes = self.book.plan(checks, amounts, now)
        if not LeaseBook.all_local(takes):
            remote = [index for index, take in enumerate(takes) if take.by_redis]
            args: list[object] = []
            for index in remote:
                check, take = checks[index], takes[index]
                args += [check.limit, _lifetime(check.resets_at, now), take.remote, take.want]
            for index in remote:
                takes[index].lease.granting += 1
            try:
                answer = await self.redis.evalsha(ADMIT, [*(checks[index].key for index in remote), MARKER],
                                                  [*args, self.replica])
            except BaseException:
                LeaseBook.undo(takes)
                raise
            finally:
                for index in remote:
                    takes[index].lease.granting -= 1
            self._counted_since(answer[1])
            if refused := int(answer[0]):
                LeaseBook.undo(takes)
                for index, value in zip(remote, answer[2:], strict=True):
                    takes[index].lease.value = int(value)
                index = remote[abs(refused) - 1] + 1
                return index if refused > 0 else -index, [take.lease.used for take in takes]
            count = len(remote)
            LeaseBook.granted([takes[index] for index in remote], [int(value) for value in answer[2:2 + count]],
                              [int(extra) for extra in answer[2 + count:]])
        for lease, want in self.book.refills(takes, now):
            task = asyncio.get_running_loop().create_task(self._refill(lease, want, now))
            self._refills.add(task)
            task.add_done_callback(self._refills.discard)
        return 0, [take.lease.used for take in takes]

    async def _refill(self, lease: Lease, want: int, now: float) -> None:
        """:data:`ADMIT` with no request of its own (amount 0): only the lease, off the request path."""
        args = [lease.limit, _lifetime(lease.resets_at, now), 0, want, self.replica]
        try:
            answer = await self.redis.evalsha(ADMIT, [lease.key, MARKER], args)
            self._counted_since(answer[1])
        except OSError:  # RedisUnavailable: the next request goes to Redis itself
            answer = [1, 0, lease.value]
        extra = int(answer[3]) if int(answer[0]) == 0 else 0  # refused: no room left to lease
        self.book.refilled(lease, int(answer[2]), extra)

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
        """Tell Redis what this replica holds unused (:data:`REPORT`), give back what another
        replica is waiting for, and what is idle or outdated (:data:`GIVE_BACK`)."""
        reports = [] if everything else self.book.reports(now)
        if reports:
            args: list[object] = [self.replica]
            for lease in reports:
                args += [lease.held, _lifetime(lease.resets_at, now)]
            sent = [lease.held for lease in reports]
            flags = await self.redis.evalsha(REPORT, [lease.key for lease in reports], args)
            for lease, held, flag in zip(reports, sent, flags, strict=True):
                lease.reported = held
                if int(flag):
                    self.book.reclaim(lease)
        returns = self.book.give_back(now, everything)
        if not returns:
            return
        keys = list(returns)
        try:
            await self.redis.evalsha(GIVE_BACK, keys, [*(returns[key][0] for key in keys), self.replica])
        except BaseException:
            for key, (units, ends) in returns.items():  # kept for the next release
                self.book.hand_back(key, units, ends)
            raise
        for key in keys:  # its entry went with them; a lease that holds units again says so at the next flush
            if (lease := self.book.leases.get(key)) is not None:
                lease.reported = 0 if not lease.held else -1

    async def close(self) -> None:
        await asyncio.gather(*self._refills)  # their units are in the counter: wait to give them back
        with contextlib.suppress(OSError):  # RedisUnavailable: the units stay counted until their window ends
            await self.release(time.time(), everything=True)
        await self.redis.close()


def _first_without_room(checks: Sequence[Check], values: list[int], amounts: list[int]) -> int:
    """The 1-based index of the first check whose counter has no room for its amount (0: every one
    has): :data:`ADMIT`'s rule, for the counters kept without Redis."""
    for index, check in enumerate(checks):
        if values[index] + max(amounts[index], 1) > check.limit:
            return index + 1
    return 0


class LocalCounters(Counters):
    """Counters in this process's memory: for a gateway of one worker without Redis (the embedded
    demo); they are counted since the process started (``since``)."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[int, float]] = {}  # key -> (value, expires)
        self.since = time.time()

    def _get(self, key: str, now: float) -> int:
        value, expires = self.values.get(key, (0, 0.0))
        return value if expires > now else 0

    async def admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        values = [self._get(check.key, now) for check in checks]
        if refused := _first_without_room(checks, values, amounts):
            return refused, values
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


class SharedCounters(Counters):
    """Counters every worker of one gateway shares without Redis: one SQLite file, named by the
    supervisor (``USAGE_LIMITS_SHARED_FILE``, inference_gateway/workers.py). Without it each worker
    counted on its own and a limit of 5 a minute let 5 through per worker (issue 43).

    SQLite because it is the atomic read-check-add across processes that Python ships with: each
    admission is one ``BEGIN IMMEDIATE`` transaction (the file's write lock, held for microseconds),
    so the workers together admit exactly the limit, as :data:`ADMIT` does in Redis. The calls run
    on a thread of their own, so a worker waiting for the lock never stalls its event loop. No
    leases: the workers are on one host, and the lock is cheaper than Redis' round trip. ``since``:
    when the file was made (the supervisor's start)."""

    SCHEMA = ("CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, value INTEGER NOT NULL, "
              "expires REAL NOT NULL) WITHOUT ROWID",
              "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value REAL NOT NULL)")
    PURGE_SECONDS = 60.0  # expired counters are deleted at most this often

    def __init__(self, path: str, busy_seconds: float = 5.0) -> None:
        self.path, self.busy_seconds = path, busy_seconds
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="limits-shared")
        self.db: sqlite3.Connection | None = None
        self.purged_at = 0.0

    def _connection(self) -> sqlite3.Connection:
        """Opened on first use, on the counters' thread: the schema and ``since`` made by the first
        worker, read by the others."""
        if self.db is None:
            db = sqlite3.connect(self.path, timeout=self.busy_seconds, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # counters live as long as the gateway, not past the machine
            with self._transaction(db):
                for statement in self.SCHEMA:
                    db.execute(statement)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('since', ?)", (time.time(),))
            self.since = db.execute("SELECT value FROM meta WHERE name = 'since'").fetchone()[0]
            self.db = db
        return self.db

    @staticmethod
    @contextlib.contextmanager
    def _transaction(db: sqlite3.Connection) -> Any:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    async def _run(self, work: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.thread, work, *args)

    @staticmethod
    def _values(db: sqlite3.Connection, keys: Sequence[str], now: float) -> list[int]:
        return [row[0] if row else 0 for row in
                (db.execute("SELECT value FROM counters WHERE key = ? AND expires > ?", (key, now)).fetchone()
                 for key in keys)]

    def _admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        db = self._connection()
        with self._transaction(db):
            values = self._values(db, [check.key for check in checks], now)
            if refused := _first_without_room(checks, values, amounts):
                return refused, values
            for index, check in enumerate(checks):
                if amounts[index] > 0:
                    values[index] += amounts[index]
                    db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?, ?)",
                               (check.key, values[index], check.resets_at))
        return 0, values

    def _add(self, amounts: dict[str, tuple[int, int]], now: float) -> None:
        db = self._connection()
        with self._transaction(db):
            for key, (tokens, lifetime) in amounts.items():  # never below zero, as GIVE_BACK in Redis
                value = self._values(db, [key], now)[0]
                db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?, ?)",
                           (key, max(0, value + tokens), now + lifetime))
            if now - self.purged_at > self.PURGE_SECONDS:
                db.execute("DELETE FROM counters WHERE expires <= ?", (now,))
                self.purged_at = now

    def _read(self, keys: list[str]) -> list[int]:
        return self._values(self._connection(), keys, time.time())

    async def admit(self, checks: Sequence[Check], amounts: list[int], now: float) -> tuple[int, list[int]]:
        return await self._run(self._admit, checks, amounts, now)

    async def add(self, amounts: dict[str, tuple[int, int]], now: float) -> None:
        await self._run(self._add, amounts, now)

    async def read(self, keys: list[str]) -> list[int]:
        return await self._run(self._read, keys)

    async def close(self) -> None:
        if self.db is not None:
            await self._run(self.db.close)
        self.thread.shutdown(wait=False)


def counters_for(url: str, lease_seconds: float = 0.0, timeout: float = 0.25, retry_seconds: float = 1.0,
                 shared_file: str = "") -> Counters:
    """Redis at ``url``; without it, the workers' ``shared_file``; without either, this process's memory."""
    if url:
        return RedisCounters(url, lease_seconds, timeout=timeout, retry_seconds=retry_seconds)
    return SharedCounters(shared_file) if shared_file else LocalCounters()


def counting(url: str, shared_file: str) -> str:
    """Where :func:`counters_for` counts, in words: the gateway says it at start (issue 43: without
    Redis every worker counted on its own, and nothing said so)."""
    if url:
        return "limits counted in Redis (GOVERNANCE_REDIS_URL), shared by every gateway replica and worker"
    alone = "no Redis (GOVERNANCE_REDIS_URL is empty), so another gateway replica counts on its own"
    if shared_file:
        return f"limits counted in {shared_file}, shared by this gateway's workers; {alone}"
    return f"limits counted in this worker's memory; {alone}"


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
    if decision.since and any(check.starts_at < decision.since for check in decision.checks):
        headers[COUNTED_SINCE] = _iso(decision.since)
    return headers


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(int(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        decision = Decision(checks, values, checks[refused - 1] if refused else None, now, reserved=reserve,
                            since=self.counters.since)
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
