"""The gateway's hooks for limits and the usage ledger: everything but the calls lives here.

``inference_gateway.server`` calls, per request: :meth:`Governance.admit` once it knows the
caller and the model (a 429 when a limit is reached, else the body to send, asking a stream for
usage), :meth:`Governance.tap` / :meth:`Governance.usage` as the answer passes (tokens from the
backend's ``usage``) and :meth:`Governance.finish` at the end (the ledger row, the per-team
metrics, the tokens charged to the limits). The ledger holds every request for a model the caller
may use, whatever its outcome; requests refused before (no key, no such model) are only counted
by the gateway's own metrics.

**What a request costs** (the target: ``gateway.limits_overhead_p99_ms``): at most one Redis round
trip (the admission script, pipelined with the other requests of the same event-loop turn; none
for a busy counter this replica holds a lease of, :mod:`governance.leases`) and no database query:
the limits and every team's members and grants are held in memory (:class:`Snapshot`), re-read in
the background when the catalog notices say they changed. Tokens are charged to the counters in
one pipeline every ``CHARGE_SECONDS`` and ledger rows appended to a queue, both off the request
path. Redis unreachable: requests go through unchecked and are counted
(``inference_portal_limit_checks_failed_total``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from django.conf import settings
from django.db import DatabaseError, connection

from common.db_thread import close_reads, read
from common.gateway_metrics import CLIENT_LEFT
from governance import metrics
from governance.bodies import Asked, BodyRefused, asked, capped, prompt_estimate, reservation
from governance.ledger import LedgerWriter, default_sink, spool_folder_for
from governance.limits import BUDGET, CHARGE_SECONDS, REQUESTS, TOKENS, Decision, Limiter, counters_for, counting
from governance.models import Limit
from governance.resp import CircuitOpen
from governance.sse import UsageTap, upstream_body
from governance.teams import Directory, load_directory

logger = logging.getLogger(__name__)
# The tables' re-reads have a thread (and kept connection) of their own: in the gateway's read
# thread, the re-read a change notice starts got ahead of the catalog's, and a new model waited
# for both before its first request was routed.
TABLE_READS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="governance-db")
MOST_TOKENS = 2**40  # a usage count beyond this is a broken backend's: held here, Redis counters never overflow
EMBEDDINGS = "/v1/embeddings"  # the one API path whose answers generate no tokens
# the tables load_tables reads, whose change notices (governance migration 0003 and, for grants,
# inference_gateway's 0002) make them read again
NOTICE_TABLES = frozenset({"governance_limit", "accounts_team", "accounts_team_members", "accounts_namespacegrant"})
# Where no change notices come (SQLite: make run's demo), the tables are read again this often, so a
# changed limit applies in every worker within it (issue 43: one worker used the old limit 41 s on,
# waiting for the safety net of USAGE_LIMITS_TTL_SECONDS).
UNNOTIFIED_READ_SECONDS = 1.0
RATELIMIT = "x-ratelimit-"


@dataclass
class Admission:
    """One admitted (or refused) request, from its admission to its ledger row."""

    started_at: datetime
    team: str
    username: str
    token_name: str
    model: str
    cluster_id: int
    namespace: str
    decision: Decision
    stream: bool = False
    tap: UsageTap | None = None
    tokens: dict[str, Any] | None = field(default=None)
    prompt_estimate: int = 0  # the prompt's tokens as reserved: recorded when a stream brings no usage


ADMISSION = web.RequestKey("usage_admission", Admission)


@dataclass(frozen=True)
class LimitView:
    """A Limit row detached from the ORM: what :mod:`governance.limits` reads."""

    scope: str
    requests_per_minute: int | None
    tokens_per_minute: int | None
    monthly_tokens: int | None
    api_token_requests_per_minute: int | None
    api_token_tokens_per_minute: int | None


def load_limits() -> dict[tuple[int | None, str], LimitView]:
    return {
        (row.team_id, row.model): LimitView(row.scope, row.requests_per_minute, row.tokens_per_minute,
                                            row.monthly_tokens, row.api_token_requests_per_minute,
                                            row.api_token_tokens_per_minute)
        for row in Limit.objects.all()
    }


class Tables:
    """The limits and the team directory as read at one moment; what a request needs of them is
    worked out once per scope and kept with them."""

    def __init__(self, limits: dict[tuple[int | None, str], LimitView], directory: Directory) -> None:
        self.limits = limits
        self.directory = directory
        self._applicable: dict[tuple[int | None, str], tuple[LimitView, ...]] = {}

    def applicable(self, team_id: int | None, model: str) -> tuple[LimitView, ...]:
        """The limits a request of this team (None: no team) for this model is held to."""
        known = self._applicable.get((team_id, model))
        if known is None:
            scopes = dict.fromkeys([(team_id, ""), (team_id, model), (None, model)])
            known = tuple(self.limits[key] for key in scopes if key in self.limits and key != (None, ""))
            self._applicable[(team_id, model)] = known
        return known


def load_tables() -> Tables:
    return Tables(load_limits(), load_directory())


class Snapshot:
    """The governance tables in memory, so that a request does no query.

    Read before the first request that needs them (the only read a request waits for), then again
    in the background on every change notice (:meth:`changed`: the PostgreSQL triggers on limits,
    teams, memberships and grants) and when older than ``ttl`` seconds (the safety net for a lost
    notice, and all there is on SQLite). Requests go on with the tables they find meanwhile, so a
    change applies once its notice arrived and one read is done: milliseconds, not a TTL. A read
    that fails keeps the tables it had (and is tried again at the next notice or ``ttl``).
    """

    def __init__(self, ttl: float, loader: Callable[[], Tables] = load_tables) -> None:
        self.ttl, self.loader = ttl, loader
        self.tables: Tables | None = None
        self.loaded_at = 0.0
        self._reading: asyncio.Task | None = None
        self._again = False  # a notice came during the read under way, which may predate the change

    async def get(self) -> Tables:
        if self.tables is None:
            return await asyncio.shield(self._read())
        if time.monotonic() - self.loaded_at > self.ttl:
            self._read()
        return self.tables

    def changed(self) -> None:
        """A change notice: read again now, or right after the read under way."""
        if self._reading is not None and not self._reading.done():
            self._again = True
        elif self.tables is not None:
            self._read()

    def _read(self) -> asyncio.Task:
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._reads())
            self._reading.add_done_callback(_retrieve_outcome)
        return self._reading

    async def _reads(self) -> Tables:
        while True:
            self._again = False
            started = time.monotonic()
            try:
                self.tables = await read(self.loader, TABLE_READS)
            except Exception as error:
                if self.tables is None:
                    raise  # the first read: the request that waits for it answers (503 for the database)
                if isinstance(error, DatabaseError):
                    logger.warning("limits and teams not re-read, the database refused: %s", error)
                else:
                    logger.exception("limits and teams not re-read; the tables read before stay in use")
                return self.tables
            self.loaded_at = started
            if not self._again:
                return self.tables


def _retrieve_outcome(task: asyncio.Task) -> None:
    """A failed first read is the waiting request's to report; retrieving it here keeps asyncio
    from logging it again as never retrieved."""
    if not task.cancelled():
        task.exception()


def refusal(decision: Decision, team: str) -> web.Response:
    """The 429 in OpenAI's shape: ``insufficient_quota`` for a spent budget, else ``rate_limit_exceeded``;
    a 400 (no ``Retry-After``) for a request whose reservation alone exceeds a tokens limit, which
    no wait would let in (OpenAI's clients retry a 429 by themselves)."""
    check = decision.refused
    who = f"team {team}" if team else "your requests"
    if check.kind != REQUESTS and decision.reserved > check.limit:
        per = "monthly budget" if check.kind == BUDGET else "tokens per minute limit"
        message = (f"This request reserves {_reserves(decision)}, more than the {per} of {who} "
                   f"({check.limit}): it can never be admitted. Lower max_tokens.")
        error = {"message": message, "type": "invalid_request_error", "param": "max_tokens",
                 "code": "reservation_exceeds_limit"}
        headers = {name: value for name, value in decision.headers.items() if name != "Retry-After"}
        return web.json_response({"error": error}, status=400, headers=headers)
    wait = decision.headers["Retry-After"]
    if check.kind == BUDGET:
        ends = datetime.fromtimestamp(check.resets_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        message = (f"You exceeded your current quota: {who} used {_used(decision)} tokens of its monthly budget "
                   f"of {check.limit} (what the usage ledger records, and what requests in flight reserve), and "
                   f"this request reserves {decision.reserved}; it resets at {ends}.")
        error = {"message": message, "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
    else:
        per = "requests per minute" if check.kind == REQUESTS else "tokens per minute"
        message = f"Rate limit reached for {who} on {per}: limit {check.limit}. Please try again in {wait}s."
        if check.kind == TOKENS:
            message += (f" This request reserves {_reserves(decision)}, {_used(decision)} of the limit are used "
                        "or reserved.")
        error = {"message": message, "type": "requests" if check.kind == REQUESTS else "tokens", "param": None,
                 "code": "rate_limit_exceeded"}
    return web.json_response({"error": error}, status=429, headers=decision.headers)


class Governance:
    """Limits and ledger for one gateway process; ``enabled=False`` makes every hook a no-op."""

    def __init__(self, enabled: bool, limiter: Limiter | None, writer: LedgerWriter | None,
                 tables_ttl: float, completion_reserve: int = 0, bytes_per_token: float = 4.0,
                 counted: str = "limits off (USAGE_LIMITS=false)") -> None:
        self.enabled = enabled
        self.counting = counted  # where the limits are counted, in words: said at the gateway's start
        self.completion_reserve = completion_reserve
        self.bytes_per_token = bytes_per_token
        self.limiter = limiter
        self.writer = writer
        self.tables = Snapshot(tables_ttl)
        self._charging: asyncio.Task | None = None
        self._rereading: asyncio.Task | None = None

    @classmethod
    def from_django(cls) -> Governance:
        if not settings.USAGE_LIMITS:
            return cls(False, None, None, 0)
        sink = default_sink()
        writer = LedgerWriter(sink, settings.USAGE_LEDGER_QUEUE_ROWS, settings.USAGE_LEDGER_BATCH_ROWS,
                              settings.USAGE_LEDGER_FLUSH_SECONDS, spool_folder_for(sink))
        url, shared_file = settings.GOVERNANCE_REDIS_URL, settings.USAGE_LIMITS_SHARED_FILE
        counters = counters_for(url, settings.USAGE_LIMITS_LEASE_SECONDS, settings.GOVERNANCE_REDIS_TIMEOUT_SECONDS,
                                settings.GOVERNANCE_REDIS_RETRY_SECONDS, shared_file)
        return cls(True, Limiter(counters), writer,
                   settings.USAGE_LIMITS_TTL_SECONDS, settings.USAGE_RESERVE_COMPLETION_TOKENS,
                   settings.USAGE_RESERVE_BYTES_PER_TOKEN, counting(url, shared_file))

    def changed(self, table: str | None) -> None:
        """A change notice of ``table`` (None: of any): the tables are read again when they read it."""
        if self.enabled and (table is None or table in NOTICE_TABLES):
            self.tables.changed()

    async def start(self, _app: web.Application) -> None:
        if self.writer is not None:
            self.writer.start()
        if self.limiter is not None:
            self._charging = asyncio.get_running_loop().create_task(self._charge_every(CHARGE_SECONDS))
        if self.enabled and connection.vendor != "postgresql":  # no notices (inference_gateway.notices)
            self._rereading = asyncio.get_running_loop().create_task(self._reread_every(UNNOTIFIED_READ_SECONDS))

    async def _reread_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.tables.changed()

    async def stop(self, _app: web.Application) -> None:
        if self._rereading is not None:
            self._rereading.cancel()
        if self._charging is not None:
            self._charging.cancel()
            await self._charge()
        if self.writer is not None:
            await self.writer.stop()
        if self.limiter is not None:
            await self.limiter.counters.close()
        if self.enabled:
            await close_reads(TABLE_READS)

    async def _charge_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            await self._charge()

    async def _charge(self) -> None:
        try:
            await self.limiter.flush()
        except OSError as error:  # RedisUnavailable: kept for the next flush
            if not isinstance(error, CircuitOpen):
                logger.warning("tokens not charged to the limits yet, Redis unreachable: %s", error)

    async def admit(
        self, request: web.Request, caller: Any, route: Any, body: bytes, data: dict[str, Any]
    ) -> tuple[bytes, web.Response | None]:
        """The body to send upstream, or a 429 to answer instead (``data``: the body, parsed)."""
        if not self.enabled:
            return body, None
        generates = request.path != EMBEDDINGS
        try:
            wanted = asked(data, request.path) if generates else Asked(None, 0, False)
        except BodyRefused as error:  # before any counter: a field an engine would read otherwise than the gateway
            return body, error.response()
        tables = await self.tables.get()
        team, team_id = tables.directory.caller(caller.user_id).team_for(route.cluster_id, route.namespace)
        reserve = reservation(wanted, len(body), self.completion_reserve, self.bytes_per_token, generates)
        try:
            decision = await self.limiter.admit(tables.applicable(team_id, route.id), caller.token_key, team, reserve)
        except OSError as error:  # RedisUnavailable
            metrics.LIMITS_UNCHECKED.inc()
            if not isinstance(error, CircuitOpen):  # logged once per failure, not for every request after it
                logger.warning("limits unchecked, Redis unreachable: %s", error)
            decision = Decision([], [], now=time.time())
        admission = Admission(datetime.now(UTC), team, caller.username, caller.token_name, route.id,
                              route.cluster_id, route.namespace, decision, stream=wanted.stream,
                              prompt_estimate=prompt_estimate(len(body), self.bytes_per_token))
        request[ADMISSION] = admission
        if decision.refused is not None:
            metrics.series(metrics.LIMITED, team, decision.refused.kind).inc()
            return body, refusal(decision, team)
        # held to a tokens counter: every engine is told the cap that was reserved (governance.bodies)
        held = generates and any(check.kind != REQUESTS for check in decision.checks)
        body, strip = upstream_body(body, data, wanted.stream, capped(data, wanted, self.completion_reserve)
                                    if held else {})
        if wanted.stream:
            admission.tap = UsageTap(strip)
        return body, None

    @staticmethod
    def tap(request: web.Request) -> UsageTap | None:
        """The stream's usage reader (and usage-chunk remover), or None."""
        admission = request.get(ADMISSION)
        return admission.tap if admission is not None else None

    @staticmethod
    def stamp(request: web.BaseRequest, headers: MutableMapping[str, str]) -> None:
        """Every answer to a request a limit applies to carries its ``x-ratelimit-*`` (as counted at
        its admission), in place of any the backend sent: whole answers, streams and every error
        the gateway writes after admission (a wake that failed, an unreachable backend, a
        timeout). The gateway calls it on the headers of every answer it sends (issue 43: one
        answer came without them); a plain call, not aiohttp's ``on_response_prepare`` signal,
        whose coroutine per answer was a visible share of a request's CPU."""
        admission = request.get(ADMISSION)
        if admission is None or not admission.decision.headers:
            return
        for name in {name for name in headers if name.lower().startswith(RATELIMIT)}:
            headers.pop(name, None)  # a case-insensitive map drops every spelling at the first
        headers.update({name: value for name, value in admission.decision.headers.items()
                        if name.startswith(RATELIMIT)})  # Retry-After is the refusal's own

    @staticmethod
    def usage(request: web.Request, usage: Any) -> None:
        """The ``usage`` of a whole (not streamed) answer."""
        admission = request.get(ADMISSION)
        if admission is not None and isinstance(usage, dict):
            admission.tokens = usage

    def finish(self, request: web.Request, status: int, seconds: float, first_byte: float | None) -> None:
        """The request's ledger row, per-team metrics and tokens charged to its limits."""
        admission = request.get(ADMISSION)
        if admission is None:
            return
        usage = admission.tap.usage if admission.tap is not None else admission.tokens
        prompt, completion = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
        counted = not _reported(usage) and admission.tap is not None and admission.tap.streamed > 0
        if counted:  # a stream that ended without its usage chunk: its events, and the prompt as reserved
            prompt, completion = admission.prompt_estimate, admission.tap.streamed
        team, model = admission.team, admission.model
        metrics.series(metrics.TEAM_REQUESTS, team, model, str(status)).inc()
        if prompt:
            metrics.series(metrics.TEAM_TOKENS, team, model, "prompt").inc(prompt)
        if completion:
            metrics.series(metrics.TEAM_TOKENS, team, model, "completion").inc(completion)
        self.writer.add((admission.started_at, team, admission.username, admission.token_name, model,
                         admission.cluster_id, admission.namespace, status, seconds * 1000,
                         first_byte * 1000 if first_byte is not None else None, prompt, completion, admission.stream))
        decision = admission.decision
        if decision.refused is not None:
            return
        if _reported(usage):  # settle: what the backend reported, less what was reserved
            self.limiter.charge(decision.checks, prompt + completion - decision.reserved)
        elif counted:  # the reservation stands (what was generated is counted, not reported), and any excess
            self.limiter.charge(decision.checks, max(0, prompt + completion - decision.reserved))
        elif first_byte is None or 400 <= status != CLIENT_LEFT:
            self.limiter.charge(decision.checks, -decision.reserved)  # nothing generated: all given back
        # else the backend answered (or was cut off by the client) without its usage: what it took
        # is unknown, so the reservation stands, the most a request may take (docs/usage.md)


def _reserves(decision: Decision) -> str:
    """What a request reserves, and why that much (governance.bodies.reservation)."""
    return (f"{decision.reserved} tokens (the larger of its max_tokens and max_completion_tokens, or "
            f"{settings.USAGE_RESERVE_COMPLETION_TOKENS} without either, times the completions it asks for, "
            "plus its prompt, estimated)")


def _used(decision: Decision) -> int:
    """The refused counter's value: what the window used or reserved before this request."""
    return decision.values[list(decision.checks).index(decision.refused)]


def _reported(usage: Any) -> bool:
    """Whether the backend's ``usage`` counts any tokens (an answer it gave without one does not)."""
    return isinstance(usage, dict) and any(isinstance(usage.get(name), int)
                                           for name in ("prompt_tokens", "completion_tokens"))  # fmt: skip


def _tokens(usage: Any, name: str) -> int:
    """A count of the backend's ``usage``, not believed beyond ``MOST_TOKENS`` (a backend's 10**30
    would overflow the limits' Redis counters and the spool's JSON; the ledger fits what is left
    to its columns)."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return min(value, MOST_TOKENS) if isinstance(value, int) and value > 0 else 0
