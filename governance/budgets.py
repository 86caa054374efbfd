"""How much of each monthly token budget is used: for the team page, the portal banner and the metric.

The number shown is the one enforced: the gateway's Redis counter of the month
(:mod:`governance.limits`). Without Redis (the embedded demo, one gateway counting in memory) the
month's daily rollups of the ledger are summed instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from functools import cache

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import F, Sum, prefetch_related_objects
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from accounts.models import Team
from governance.limits import budget_key, month_bounds
from governance.models import Limit, UsageDay

WARN_AT = 0.8
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BudgetUse:
    team: str  # "" for a model's budget across every team
    model: str  # "" for every model
    used: int
    limit: int

    @property
    def ratio(self) -> float:
        return self.used / self.limit

    @property
    def warn(self) -> bool:
        return self.ratio >= WARN_AT

    @property
    def percent(self) -> int:
        return int(self.ratio * 100)


@cache
def _redis(url: str) -> redis.Redis:
    timeout = settings.GOVERNANCE_REDIS_TIMEOUT_SECONDS
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


_skip_redis_until = 0.0  # the circuit (as the gateway's, governance.resp): after a failure, Redis is left alone


def _read_counters(url: str, keys: list[str]) -> list[int] | None:
    """The counters' values, or None when Redis failed now or within ``GOVERNANCE_REDIS_RETRY_SECONDS``:
    every portal page shows the banner, and a hung Redis must not add its timeout to each."""
    global _skip_redis_until
    if time.monotonic() < _skip_redis_until:
        return None
    try:
        values = _redis(url).mget(keys)
    except redis.RedisError as error:
        _skip_redis_until = time.monotonic() + settings.GOVERNANCE_REDIS_RETRY_SECONDS
        logger.warning("budget use unavailable for %s s: Redis at the limits' URL: %s",
                       settings.GOVERNANCE_REDIS_RETRY_SECONDS, error)
        return None
    return [int(value or 0) for value in values]


def _ledger_used(limit: Limit, now: float) -> int:
    """The month's tokens of the budget's scope, from the ledger's daily rollups (governance.rollups)."""
    month, _ = month_bounds(now)
    rows = UsageDay.objects.filter(day__gte=date(int(month[:4]), int(month[4:]), 1))
    if limit.team_id is not None:
        rows = rows.filter(team=limit.team.name)
    if limit.model:
        rows = rows.filter(model=limit.model)
    return rows.aggregate(total=Sum(F("prompt_tokens") + F("completion_tokens")))["total"] or 0


def budget_uses(limits: Iterable[Limit] | None = None, now: float | None = None) -> list[BudgetUse]:
    """The month's use of every budget among ``limits`` (all with a monthly budget when None)."""
    now = time.time() if now is None else now
    if limits is None:
        limits = Limit.objects.filter(monthly_tokens__isnull=False).select_related("team")
    limits = [limit for limit in limits if limit.monthly_tokens]
    if not limits:
        return []
    url = settings.GOVERNANCE_REDIS_URL
    if url:
        month, _ = month_bounds(now)
        used = _read_counters(url, [budget_key(limit.scope, month) for limit in limits])
        if used is None:
            return []
    else:
        used = [_ledger_used(limit, now) for limit in limits]
    return [
        BudgetUse(limit.team.name if limit.team_id else "", limit.model, value, limit.monthly_tokens)
        for limit, value in zip(limits, used, strict=True)
    ]


def warnings_for(user_id: int) -> list[BudgetUse]:
    """Budgets of the user's teams at least 80% used (the portal banner, on every page).

    One statement, written as the SQL it is: the ORM's building and compiling of the same query
    (the limits of the user's teams, in the teams' order) was 1.1 of its 1.4 ms of CPU on every
    page, mostly for no rows. Where there are limits, their teams are read in one more query."""
    limits = list(Limit.objects.raw(_user_limits_sql(), [user_id]))
    prefetch_related_objects(limits, "team")
    return [use for use in budget_uses(limits) if use.warn]


@cache
def _user_limits_sql() -> str:
    """The monthly budgets of a user's teams (``%s``: the user's id), ordered as ``Limit`` is."""
    quote = connection.ops.quote_name
    members = Team._meta.get_field("members")
    team_of_limit = f"limits.{quote(Limit._meta.get_field('team').column)}"
    return (
        f"SELECT limits.* FROM {quote(Limit._meta.db_table)} limits "
        f"JOIN {quote(Team._meta.db_table)} teams ON teams.{quote(Team._meta.pk.column)} = {team_of_limit} "
        f"JOIN {quote(members.m2m_db_table())} members ON members.{quote(members.m2m_column_name())} = {team_of_limit} "
        f"WHERE members.{quote(members.m2m_reverse_name())} = %s AND limits.{quote('monthly_tokens')} IS NOT NULL "
        f"ORDER BY teams.{quote('name')}, limits.{quote('model')}"
    )


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    labels = ["team", "model"]
    return (
        GaugeMetricFamily("inference_portal_team_budget_used_tokens",
                          "Tokens used this calendar month (UTC) against a monthly budget.", labels=labels),
        GaugeMetricFamily("inference_portal_team_budget_used_ratio",
                          "Share of a monthly token budget used this month (1 = spent).", labels=labels),
        GaugeMetricFamily("inference_portal_team_budget_warning",
                          "1 when a monthly budget is at least 80% used (the portal warns the team).", labels=labels),
    )


class BudgetCollector(Collector):
    """Every monthly budget's use, read from the limits' counters at scrape time."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from _families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        used, ratio, warning = _families()
        try:
            uses = budget_uses()
        except DatabaseError:  # the database is away: /metrics still answers, /readyz says why
            uses = []
        for use in uses:
            labels = [use.team, use.model]
            used.add_metric(labels, use.used)
            ratio.add_metric(labels, use.ratio)
            warning.add_metric(labels, 1.0 if use.warn else 0.0)
        yield from (used, ratio, warning)
