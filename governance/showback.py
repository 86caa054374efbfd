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
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet, Sum
from rest_framework.exceptions import ValidationError

from accounts.models import Team
from accounts.public import is_unrestricted
from governance.models import UNUSED, GpuDay, GpuPrice, LatencyDay, TokenPrice, UsageDay
from governance.rollups import bucket_upper_ms

CENT = Decimal("0.01")
MILLION = Decimal(1_000_000)
HOUR = Decimal(3600)


@dataclass(frozen=True)
class UsageQuery:
    """Which rows: teams (None: every team, staff only), a model, days ``start``..``end`` inclusive."""

    teams: frozenset[str] | None
    model: str | None
    start: date
    end: date
    by_day: bool = False

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time(), UTC)

    @property
    def until(self) -> datetime:
        return datetime.combine(self.end + timedelta(days=1), time(), UTC)

    @classmethod
    def from_params(cls, params: Mapping[str, str], user: Any, today: date | None = None) -> UsageQuery:
        """From ``team``, ``model``, ``from``, ``to``, ``group_by``; a 400 naming the parameter when bad."""
        today = today or datetime.now(UTC).date()
        start = _day(params, "from", today.replace(day=1))
        end = _day(params, "to", today)
        if end < start:
            raise ValidationError({"to": [f"to: {end} is before from: {start}"]})
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
        return cls(teams, params.get("model") or None, start, end, group_by == "day")


def _day(params: Mapping[str, str], name: str, default: date) -> date:
    value = params.get(name)
    if not value:
        return default
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationError({name: [f"{name}: {value!r} is not a date (YYYY-MM-DD)"]}) from None


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


def _round(value: Decimal) -> float:
    """Money to the cent, half to even."""
    return float(value.quantize(CENT)) if value else 0.0


def _filtered(rows: QuerySet, query: UsageQuery) -> QuerySet:
    """A rollup's rows (each has ``day``) of the query's days, teams and model."""
    rows = rows.filter(day__gte=query.start, day__lte=query.end)
    if query.teams is not None:
        rows = rows.filter(team__in=query.teams)
    if query.model is not None:
        rows = rows.filter(model=query.model)
    return rows


def usage_rows(query: UsageQuery) -> list[UsageRow]:
    """Rows sorted by (day,) team and model; ``unused`` rows only when every team is asked for (staff).

    Read from the daily rollups (:mod:`governance.rollups`), never from the raw ledger: a month of
    a team is a few hundred rows whatever the traffic."""
    rows: dict[tuple, UsageRow] = {}

    def row(team: str, model: str, day: date | None) -> UsageRow:
        key = (day, team, model)
        entry = rows.get(key)
        if entry is None:
            entry = rows[key] = UsageRow(team, model, day)
        return entry

    by = ("day", "team", "model") if query.by_day else ("team", "model")
    token_prices = {price.model: price.price_per_million_tokens for price in TokenPrice.objects.all()}
    totals = _filtered(UsageDay.objects.order_by(), query).values(*by).annotate(
        r=Sum("requests"), p=Sum("prompt_tokens"), c=Sum("completion_tokens")).values_list(*by, "r", "p", "c")
    for *key, requests, prompt, completion in totals:
        day = key[0] if query.by_day else None
        entry = row(key[-2], key[-1], day)
        entry.requests += requests
        entry.prompt_tokens += prompt
        entry.completion_tokens += completion
        price = token_prices.get(key[-1])
        if price is not None:
            entry.token_cost += Decimal(prompt + completion) * price / MILLION

    gpu_prices = {price.gpu_product: price.price_per_gpu_hour for price in GpuPrice.objects.all()}
    held = _filtered(GpuDay.objects.order_by(), query)
    if query.teams is not None or query.model is not None:
        held = held.exclude(team=UNUSED)
    held = held.values(*by, "gpu_product", "idle").annotate(seconds=Sum("gpu_seconds")).values_list(
        *by, "gpu_product", "idle", "seconds")
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
    return [rows[key] for key in sorted(rows, key=lambda key: (key[0] or date.min, key[1], key[2]))]


def usage_totals(rows: list[UsageRow]) -> dict[str, Any]:
    """The whole selection's sums, as a row reads them (no team, model or day): the API pages its
    rows, and a client should not read every page for a sum. Summed exactly (GPU-seconds, Decimal
    money) and rounded once, so they are not the sum of rounded rows."""
    total = UsageRow("", "")
    for row in rows:
        total.requests += row.requests
        total.prompt_tokens += row.prompt_tokens
        total.completion_tokens += row.completion_tokens
        total.gpu_seconds += row.gpu_seconds
        total.idle_gpu_seconds += row.idle_gpu_seconds
        total.unpriced_gpu_seconds += row.unpriced_gpu_seconds
        total.gpu_cost += row.gpu_cost
        total.idle_cost += row.idle_cost
        total.token_cost += row.token_cost
    summed = total.as_dict()
    del summed["team"], summed["model"]
    return summed


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
