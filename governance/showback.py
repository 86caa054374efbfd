"""Showback: requests, tokens, GPU-hours and cost per team and model (and per day).

Two sources, joined on (team, model[, day]), both read from their daily rollups
(:mod:`governance.rollups`), never from the raw records:
- the ledger (:class:`~governance.models.UsageDay`): requests and tokens, counted for the team
  that sent them;
- GPU samples (:class:`~governance.models.GpuDay`): GPU-hours a model held, counted for the
  team that owns its namespace, idle ones apart, and the pools' GPUs nobody held (team
  ``unused``). Every sampled GPU-hour is in exactly one row.

Cost = GPU-hours x the price of the pool's GPU product (:class:`~governance.models.GpuPrice`)
+ tokens / 1M x the model's token price when it has one (:class:`~governance.models.TokenPrice`,
charged to the teams that called it). Sums are kept exact (``Decimal`` of GPU-seconds) and
rounded to the cent only when shown. A GPU product without a price costs nothing and is said so
(``unpriced_gpu_hours``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import cached_property, partial
from itertools import chain
from typing import Any, TypeVar

from django.db import connection
from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.template.defaultfilters import floatformat
from rest_framework.exceptions import ValidationError

from accounts.models import Team
from accounts.public import is_unrestricted
from common.lru import LeastRecentlyUsed
from governance.models import (
    UNUSED,
    GpuDay,
    GpuPrice,
    GpuSample,
    LatencyDay,
    TokenPrice,
    UsageDay,
    UsageHour,
    UsageVersion,
)
from governance.rollups import bucket_upper_ms

T = TypeVar("T")

CENT = Decimal("0.01")
MILLION = Decimal(1_000_000)
HOUR = Decimal(3600)


@dataclass(frozen=True)
class UsageQuery:
    """Which rows: teams (None: every team, staff only), a model, days ``start``..``end`` inclusive,
    from hour ``first_hour`` of the first day through hour ``last_hour`` of the last (UTC)."""

    teams: frozenset[str] | None
    model: str | None
    start: date
    end: date
    by_day: bool = False
    first_hour: int = 0
    last_hour: int = 23

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time(self.first_hour), UTC)

    @property
    def until(self) -> datetime:
        """The end of the last hour (exclusive)."""
        return datetime.combine(self.end, time(self.last_hour), UTC) + timedelta(hours=1)

    def before(self, day: date) -> UsageQuery:
        """The part of the query before ``day`` (which is after ``start``)."""
        return self if self.end < day else replace(self, end=day - timedelta(days=1), last_hour=23)

    def from_day(self, day: date) -> UsageQuery:
        """The part of the query from ``day`` on (which is at most ``end``)."""
        return self if self.start >= day else replace(self, start=day, first_hour=0)

    def whole_days(self) -> tuple[date, date]:
        """The first and last day the query covers whole (the first after the last: none)."""
        first = self.start + timedelta(days=1) if self.first_hour else self.start
        last = self.end - timedelta(days=1) if self.last_hour < 23 else self.end
        return first, last

    def partial_hours(self) -> list[tuple[datetime, datetime]]:
        """The spans of hours of the days the query covers in part (none, one or two)."""
        first, last = self.whole_days()
        if first > last:  # within one day, or two days in part
            if self.start == self.end:
                return [(self.since, self.until)]
            return [(self.since, datetime.combine(self.end, time(), UTC)),
                    (datetime.combine(self.end, time(), UTC), self.until)]
        spans = []
        if first > self.start:
            spans.append((self.since, datetime.combine(first, time(), UTC)))
        if last < self.end:
            spans.append((datetime.combine(self.end, time(), UTC), self.until))
        return spans

    @classmethod
    def from_params(cls, params: Mapping[str, str], user: Any, today: date | None = None) -> UsageQuery:
        """From ``team``, ``model``, ``from``, ``to``, ``group_by``; a 400 naming the parameter when bad.
        ``from`` and ``to`` name a day or an hour (UTC), the last one included."""
        today = today or datetime.now(UTC).date()
        start, first_hour = _day_or_hour(params, "from", today.replace(day=1), 0)
        end, last_hour = _day_or_hour(params, "to", today, 23)
        if (end, last_hour) < (start, first_hour):
            raise ValidationError({"to": [f"to: {params.get('to') or end} is before from: "
                                          f"{params.get('from') or start}"]})
        if (end - start).days > 366:
            raise ValidationError({"to": ["from..to: at most 366 days at a time"]})
        group_by = params.get("group_by") or ""
        if group_by not in ("", "day"):
            raise ValidationError({"group_by": [f"group_by: {group_by!r} is not one of: day"]})
        allowed = None if is_unrestricted(user) else frozenset(Team.objects.filter(members=user).values_list(
            "name", flat=True))
        team = params.get("team")
        if team:
            if allowed is not None and team not in allowed:
                raise ValidationError({"team": [f"team: {team!r} is not one of your teams"]})
            teams = frozenset([team])
        else:
            teams = allowed
        return cls(teams, params.get("model") or None, start, end, group_by == "day", first_hour, last_hour)


def _day_or_hour(params: Mapping[str, str], name: str, default: date, hour: int) -> tuple[date, int]:
    """A day (``hour``: the day's first or last hour) or an hour, ``YYYY-MM-DDTHH:00`` (UTC)."""
    value = params.get(name)
    if not value:
        return default, hour
    try:
        return date.fromisoformat(value), hour
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.minute or moment.second or moment.microsecond or moment.utcoffset() not in (
            None, timedelta(0)):
        raise ValidationError({name: [f"{name}: {value[:40]!r} is not a day (YYYY-MM-DD) "
                                      f"or an hour in UTC (YYYY-MM-DDTHH:00)"]}) from None
    return moment.date(), moment.hour


@dataclass
class UsageRow:
    team: str
    model: str
    day: date | None = None
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    gpu_seconds: int = 0
    idle_gpu_seconds: int = 0
    unpriced_gpu_seconds: int = 0
    gpu_cost: Decimal = Decimal(0)
    idle_cost: Decimal = Decimal(0)
    token_cost: Decimal = Decimal(0)

    def add(self, other: UsageRow) -> None:
        """Add ``other``'s figures to this row's (its team, model and day stay): money stays exact."""
        for name in SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost(self) -> Decimal:
        return self.gpu_cost + self.token_cost

    @property
    def gpu_hours(self) -> Decimal:
        return Decimal(self.gpu_seconds) / HOUR

    @property
    def cost_per_million_tokens(self) -> Decimal | None:
        return self.cost * MILLION / self.tokens if self.tokens else None

    def as_dict(self) -> dict[str, Any]:
        """The API's and the CSV's row: GPU-hours to 1/10,000, money to the cent (half to even).

        Written for speed (staff's month by day is 28,000 rows): GPU-hours are rounded from whole
        GPU-seconds as floats, which gives the exact decimal rounding (seconds / 3600 is never within
        float error of a tie at the fourth decimal); only money goes through ``Decimal``."""
        data: dict[str, Any] = {"team": self.team, "model": self.model or None}
        if self.day is not None:
            data["day"] = self.day.isoformat()
        cost = self.gpu_cost + self.token_cost
        tokens = self.prompt_tokens + self.completion_tokens
        data.update({
            "requests": self.requests, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "gpu_hours": round(self.gpu_seconds / 3600, 4), "idle_gpu_hours": round(self.idle_gpu_seconds / 3600, 4),
            "unpriced_gpu_hours": round(self.unpriced_gpu_seconds / 3600, 4),
            "cost": _round(cost), "idle_cost": _round(self.idle_cost),
            "cost_per_million_tokens": _round(cost * MILLION / tokens) if tokens else None,
        })
        return data


SUMMED = tuple(field.name for field in fields(UsageRow) if field.name not in ("team", "model", "day"))


def _round(value: Decimal) -> float:
    """Money to the cent, half to even."""
    return float(value.quantize(CENT)) if value else 0.0


def _filtered(rows: QuerySet, query: UsageQuery, moment: str | None = None) -> QuerySet:
    """A rollup's rows (each has ``day``) of the query's whole days, teams and model; with ``moment``
    (raw or hourly rows: the column of their time), those of its partial days' hours instead."""
    if moment is None:
        first, last = query.whole_days()
        rows = rows.filter(day__gte=first, day__lte=last)
    else:
        hours = Q(pk__in=[])
        for since, until in query.partial_hours():
            hours |= Q(**{f"{moment}__gte": since, f"{moment}__lt": until})
        rows = rows.filter(hours).annotate(day=TruncDate(moment, tzinfo=UTC))
    if query.teams is not None:
        rows = rows.filter(team__in=query.teams)
    if query.model is not None:
        rows = rows.filter(model=query.model)
    return rows


@dataclass
class Showback:
    """A query's rows, sorted by (day,) team and model, and their exact sums. Shared between the
    requests that read the same past days (:func:`showback`): read, never changed."""

    rows: list[UsageRow]
    totals: UsageRow

    @cached_property
    def dicts(self) -> list[dict[str, Any]]:
        """Every row as the CSV writes it, worked out once for every request that reuses it."""
        return [row.as_dict() for row in self.rows]

    @cached_property
    def cells(self) -> list[list[str]]:
        """Every row as the team page's table writes it (model, figures to two places): formatted
        once, not per request; Django's number formatting of ~500 cells was half the page's CPU."""
        return [_cells(row) for row in [*self.dicts, self.totals.as_dict()]]

    @property
    def totals_dict(self) -> dict[str, Any]:
        """The whole selection's sums as a row reads them (no team, model or day): the API pages its
        rows, and a client should not read every page for a sum. Summed exactly (GPU-seconds, Decimal
        money) and rounded once, so they are not the sum of rounded rows."""
        summed = self.totals.as_dict()
        del summed["team"], summed["model"]
        return summed


def _cells(row: dict[str, Any]) -> list[str]:
    figures = [floatformat(row[name], 2) for name in ("gpu_hours", "idle_gpu_hours", "cost", "idle_cost")]
    per_million = row["cost_per_million_tokens"]
    return [row["model"] or "-", str(row["requests"]), str(row["prompt_tokens"]), str(row["completion_tokens"]),
            *figures, "-" if per_million is None else floatformat(per_million, 2)]


Prices = tuple[dict[str, Decimal], dict[str, Decimal]]  # per million tokens by model, per GPU-hour by product


def _prices() -> Prices:
    return (dict(TokenPrice.objects.order_by().values_list("model", "price_per_million_tokens")),
            dict(GpuPrice.objects.order_by().values_list("gpu_product", "price_per_gpu_hour")))


def _summed(query: UsageQuery, prices: Prices) -> Showback:
    """The query's rows summed from the daily rollups (:mod:`governance.rollups`) and priced: a
    month of a team is a few hundred rows whatever the traffic; ``unused`` rows only when every team
    is asked for (staff)."""
    rows: dict[tuple, UsageRow] = {}

    def row(team: str, model: str, day: date | None) -> UsageRow:
        key = (day, team, model)
        entry = rows.get(key)
        if entry is None:
            entry = rows[key] = UsageRow(team, model, day)
        return entry

    token_prices, gpu_prices = prices
    by = ("day", "team", "model") if query.by_day else ("team", "model")
    in_part = bool(query.partial_hours())
    sums = {"r": Sum("requests"), "p": Sum("prompt_tokens"), "c": Sum("completion_tokens")}
    totals = chain(_filtered(UsageDay.objects.order_by(), query).values(*by).annotate(**sums).values_list(
        *by, "r", "p", "c"), _filtered(UsageHour.objects.order_by(), query, "hour").values(*by).annotate(
        **sums).values_list(*by, "r", "p", "c") if in_part else ())
    for *key, requests, prompt, completion in totals:
        day = key[0] if query.by_day else None
        entry = row(key[-2], key[-1], day)
        entry.requests += requests
        entry.prompt_tokens += prompt
        entry.completion_tokens += completion
        price = token_prices.get(key[-1])
        if price is not None:
            entry.token_cost += Decimal(prompt + completion) * price / MILLION

    whole = _filtered(GpuDay.objects.order_by(), query)
    sampled = _filtered(GpuSample.objects.order_by(), query, "sampled_at")  # the partial days' samples
    if query.teams is not None or query.model is not None:
        whole, sampled = whole.exclude(team=UNUSED), sampled.exclude(team=UNUSED)
    held = chain(whole.values(*by, "gpu_product", "idle").annotate(seconds=Sum("gpu_seconds")).values_list(
        *by, "gpu_product", "idle", "seconds"), sampled.values(*by, "gpu_product", "idle").annotate(
        seconds=Sum(F("gpus") * F("period_seconds"))).values_list(*by, "gpu_product", "idle", "seconds")
        if in_part else ())
    for *key, product, idle, seconds in held:
        entry = row(key[-2], key[-1], key[0] if query.by_day else None)
        price = gpu_prices.get(product)
        cost = Decimal(seconds) * price / HOUR if price is not None else Decimal(0)
        entry.gpu_seconds += seconds
        entry.gpu_cost += cost
        if price is None:
            entry.unpriced_gpu_seconds += seconds
        if idle:
            entry.idle_gpu_seconds += seconds
            entry.idle_cost += cost
    ordered = [rows[key] for key in sorted(rows, key=lambda key: (key[0] or date.min, key[1], key[2]))]
    total = UsageRow("", "")
    for entry in ordered:
        total.add(entry)
    return Showback(ordered, total)


def _joined(past: Showback, recent: Showback, by_day: bool) -> Showback:
    """The rows of days before today then of today on: by day, one list after the other (every
    past day sorts first); by team and model, the rows of a pair in both added into a new row (the
    kept ones are shared)."""
    total = replace(past.totals)
    total.add(recent.totals)
    if by_day:
        return Showback([*past.rows, *recent.rows], total)
    rows = {(row.team, row.model): row for row in past.rows}
    for row in recent.rows:
        kept = rows.get((row.team, row.model))
        if kept is None:
            rows[(row.team, row.model)] = row
        else:
            rows[(row.team, row.model)] = added = replace(kept)
            added.add(row)
    return Showback([rows[key] for key in sorted(rows)], total)


def showback(query: UsageQuery) -> Showback:
    """The query's rows and sums. The days before today (PostgreSQL's today) are worked out once
    per version of their rollups and prices and kept in this process (:data:`KEPT`): they change
    only when a writer moves :class:`~governance.models.UsageVersion`, and a month of every team by
    day is 28,000 rows to sum, price and sort (about 300 ms of a request's CPU). Today and later
    are read on every request. Elsewhere than PostgreSQL nothing is kept."""
    prices = _prices()
    return _split(query, lambda part: _summed(part, prices), partial(_joined, by_day=query.by_day),
                  ("showback", *_price_key(prices)))


def _price_key(prices: Prices) -> tuple:
    """The prices as part of a kept result's key: a price changed is a new key."""
    return tuple(sorted(prices[0].items())), tuple(sorted(prices[1].items()))


@dataclass(frozen=True)
class TeamMonth:
    """What a team's usage page shows of a month: rows per model, per day and model (the charts),
    and the latency per day."""

    by_model: Showback
    daily: Showback
    latency: dict[date, tuple[float, float]]


def team_month(query: UsageQuery) -> TeamMonth:
    """The team page's figures, past days kept as :func:`showback` keeps them (one read of the
    prices and the version for all three)."""
    prices = _prices()

    def read(part: UsageQuery) -> TeamMonth:
        return TeamMonth(_summed(replace(part, by_day=False), prices), _summed(part, prices), daily_latency(part))

    def join(past: TeamMonth, recent: TeamMonth) -> TeamMonth:
        return TeamMonth(_joined(past.by_model, recent.by_model, by_day=False),
                         _joined(past.daily, recent.daily, by_day=True), {**past.latency, **recent.latency})

    return _split(replace(query, by_day=True), read, join, ("team", *_price_key(prices)))


KEPT = LeastRecentlyUsed[tuple, Any](32)
"""What showback worked out of past days, per query, version and prices, in this process: a few
MB at most (staff's month by day, 28,000 rows, is the biggest)."""


def _split(query: UsageQuery, read: Callable[[UsageQuery], T], join: Callable[[T, T], T], key: tuple) -> T:
    """``read(query)``, its days before today kept (under ``key``, the query and the past days'
    version) and those from today on read afresh, the two ``join``-ed (past first)."""
    state = _past_version()
    if state is None:
        return read(query)
    version, today = state
    if query.start >= today:
        return read(query)
    past = query.before(today)
    kept_key = (*key, past, version)
    kept = KEPT.get(kept_key)
    if kept is None:
        kept = read(past)
        KEPT.put(kept_key, kept)
    if query.end < today:
        return kept
    return join(kept, read(query.from_day(today)))


def _past_version() -> tuple[str, date] | None:
    """The past days' rollups' version and PostgreSQL's today (UTC); None elsewhere or without
    the row (a flushed table: nothing is kept until a writer makes it again)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version::text, (clock_timestamp() AT TIME ZONE 'UTC')::date "
                       f"FROM {UsageVersion._meta.db_table} WHERE id = 1")
        found = cursor.fetchone()
    return (found[0], found[1]) if found else None


def daily_latency(query: UsageQuery) -> dict[date, tuple[float, float]]:
    """p50 and p95 latency (ms) per day of the query's teams' requests (nearest rank), from the
    daily latency histograms (:class:`~governance.models.LatencyDay`): each figure is the upper
    bound of its bucket, at most 5% above the exact one. Every model: the histograms are per team."""
    counts: dict[date, list[tuple[int, int]]] = defaultdict(list)
    found = _filtered(LatencyDay.objects.order_by(), replace(query, model=None)).values("day", "bucket").annotate(
        n=Sum("requests")).values_list("day", "bucket", "n").order_by("day", "bucket")
    for day, bucket, count in found:
        counts[day].append((bucket, count))
    return {day: (_rank(buckets, 0.5), _rank(buckets, 0.95)) for day, buckets in sorted(counts.items())}


def _rank(buckets: list[tuple[int, int]], share: float) -> float:
    """The nearest-rank ``share`` of a histogram (buckets in order), as its bucket's upper bound."""
    total = sum(count for _, count in buckets)
    rank = max(1, math.ceil(share * total))
    seen = 0
    for bucket, count in buckets:
        seen += count
        if seen >= rank:
            return round(bucket_upper_ms(bucket), 3)
    return round(bucket_upper_ms(buckets[-1][0]), 3)
