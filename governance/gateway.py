"""The gateway's hooks for limits and the usage ledger: everything but the calls lives here.

``inference_gateway.server`` calls, per request: :meth:`Governance.admit` once it knows the
caller and the model (a 429 when a limit is reached, else the body to send, asking a stream for
usage), :meth:`Governance.tap` / :meth:`Governance.usage` as the answer passes (tokens from the
backend's ``usage``) and :meth:`Governance.finish` at the end (the ledger row, the per-team
metrics, the tokens charged to the limits). The ledger holds every request for a model the caller
may use, whatever its outcome; requests refused before (no key, no such model) are only counted
by the gateway's own metrics.

The limits and a caller's teams are read from the database in the gateway's read thread and
remembered for a few seconds (``USAGE_LIMITS_TTL_SECONDS``, ``GATEWAY_CALLER_TTL_SECONDS``),
refreshed in the background while requests go on with the copy they have. Redis unreachable:
requests go through unchecked and are counted (``inference_portal_limit_checks_failed_total``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from aiohttp import web
from django.conf import settings

from governance import metrics
from governance.ledger import LedgerWriter, default_sink
from governance.limits import BUDGET, CHARGE_SECONDS, REQUESTS, Decision, Limiter, counters_for
from governance.models import Limit
from governance.sse import UsageTap, with_usage_requested
from governance.teams import CallerTeams, caller_teams
from inference_gateway.public import read

logger = logging.getLogger(__name__)
T = TypeVar("T")


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


class Remembered(Generic[T]):
    """Values loaded in the read thread, kept ``ttl`` seconds, then refreshed in the background."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._values: dict[Hashable, tuple[float, T]] = {}
        self._loading: dict[Hashable, asyncio.Task] = {}

    async def get(self, key: Hashable, load: Callable[[], T]) -> T:
        known = self._values.get(key)
        if known is not None and time.monotonic() < known[0]:
            return known[1]
        task = self._loading.get(key)
        if task is None:
            task = self._loading[key] = asyncio.ensure_future(self._load(key, load))
            task.add_done_callback(lambda _: self._loading.pop(key, None))
        return known[1] if known is not None else await asyncio.shield(task)

    async def _load(self, key: Hashable, load: Callable[[], T]) -> T:
        value = await read(load)
        self._values[key] = (time.monotonic() + self.ttl, value)
        return value


def refusal(decision: Decision, team: str) -> web.Response:
    """The 429 in OpenAI's shape: ``insufficient_quota`` for a spent budget, else ``rate_limit_exceeded``."""
    check = decision.refused
    who = f"team {team}" if team else "your requests"
    wait = decision.headers["Retry-After"]
    if check.kind == BUDGET:
        ends = datetime.fromtimestamp(check.resets_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        message = (f"You exceeded your current quota: {who} used its monthly budget of {check.limit} tokens; "
                   f"it resets at {ends}.")
        error = {"message": message, "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
    else:
        per = "requests per minute" if check.kind == REQUESTS else "tokens per minute"
        message = f"Rate limit reached for {who} on {per}: limit {check.limit}. Please try again in {wait}s."
        error = {"message": message, "type": "requests" if check.kind == REQUESTS else "tokens", "param": None,
                 "code": "rate_limit_exceeded"}
    return web.json_response({"error": error}, status=429, headers=decision.headers)


class Governance:
    """Limits and ledger for one gateway process; ``enabled=False`` makes every hook a no-op."""

    def __init__(self, enabled: bool, limiter: Limiter | None, writer: LedgerWriter | None,
                 limits_ttl: float, teams_ttl: float) -> None:
        self.enabled = enabled
        self.limiter = limiter
        self.writer = writer
        self.limits: Remembered[dict] = Remembered(limits_ttl)
        self.teams: Remembered[CallerTeams] = Remembered(teams_ttl)
        self._charging: asyncio.Task | None = None

    @classmethod
    def from_django(cls) -> Governance:
        if not settings.USAGE_LIMITS:
            return cls(False, None, None, 0, 0)
        writer = LedgerWriter(default_sink(), settings.USAGE_LEDGER_QUEUE_ROWS, settings.USAGE_LEDGER_BATCH_ROWS,
                              settings.USAGE_LEDGER_FLUSH_SECONDS)
        return cls(True, Limiter(counters_for(settings.GOVERNANCE_REDIS_URL)), writer,
                   settings.USAGE_LIMITS_TTL_SECONDS, settings.GATEWAY_CALLER_TTL_SECONDS)

    async def start(self, _app: web.Application) -> None:
        if self.writer is not None:
            self.writer.start()
        if self.limiter is not None:
            self._charging = asyncio.get_running_loop().create_task(self._charge_every(CHARGE_SECONDS))

    async def stop(self, _app: web.Application) -> None:
        if self._charging is not None:
            self._charging.cancel()
            await self._charge()
        if self.writer is not None:
            await self.writer.stop()
        if self.limiter is not None:
            await self.limiter.counters.close()

    async def _charge_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            await self._charge()

    async def _charge(self) -> None:
        try:
            await self.limiter.flush()
        except OSError as error:  # RedisUnavailable: kept for the next flush
            logger.warning("tokens not charged to the limits yet, Redis unreachable: %s", error)

    async def admit(
        self, request: web.Request, caller: Any, route: Any, body: bytes
    ) -> tuple[bytes, web.Response | None]:
        """The body to send upstream, or a 429 to answer instead."""
        if not self.enabled:
            return body, None
        teams = await self.teams.get(caller.user_id, lambda: caller_teams(caller.user_id))
        team, team_id = teams.team_for(route.cluster_id, route.namespace)
        limits = await self.limits.get(None, load_limits)
        scopes = dict.fromkeys([(team_id, ""), (team_id, route.id), (None, route.id)])
        applicable = [limits[key] for key in scopes if key in limits and key != (None, "")]
        try:
            decision = await self.limiter.admit(applicable, caller.token_key, team)
        except OSError as error:  # RedisUnavailable
            metrics.LIMITS_UNCHECKED.inc()
            logger.warning("limits unchecked, Redis unreachable: %s", error)
            decision = Decision([], [], now=time.time())
        admission = Admission(datetime.now(UTC), team, caller.username, caller.token_name, route.id,
                              route.cluster_id, route.namespace, decision)
        request[ADMISSION] = admission
        if decision.refused is not None:
            metrics.series(metrics.LIMITED, team, decision.refused.kind).inc()
            return body, refusal(decision, team)
        body, admission.stream, strip = with_usage_requested(body)
        if admission.stream:
            admission.tap = UsageTap(strip)
        return body, None

    @staticmethod
    def tap(request: web.Request) -> UsageTap | None:
        """The stream's usage reader (and usage-chunk remover), or None."""
        admission = request.get(ADMISSION)
        return admission.tap if admission is not None else None

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
        team, model = admission.team, admission.model
        metrics.series(metrics.TEAM_REQUESTS, team, model, str(status)).inc()
        if prompt:
            metrics.series(metrics.TEAM_TOKENS, team, model, "prompt").inc(prompt)
        if completion:
            metrics.series(metrics.TEAM_TOKENS, team, model, "completion").inc(completion)
        self.writer.add((admission.started_at, team, admission.username, admission.token_name, model,
                         admission.cluster_id, admission.namespace, status, seconds * 1000,
                         first_byte * 1000 if first_byte is not None else None, prompt, completion, admission.stream))
        self.limiter.charge(admission.decision.checks, prompt + completion)


def _tokens(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value > 0 else 0
