"""Showback: requests, tokens, GPU-hours and cost per team and model (and per day).

Two sources, joined on (team, model[, day]):
- the ledger (:class:`~governance.models.RequestRecord`): requests and tokens, counted for the
  team that sent them;
- GPU samples (:class:`~governance.models.GpuSample`): GPU-hours a model held, counted for the
  team that owns its namespace, idle ones apart, and the pools' GPUs nobody held (team
  ``unused``). Every sampled GPU-hour is in exactly one row.

Cost = GPU-hours x the price of the pool's GPU product (:class:`~governance.models.GpuPrice`)
+ tokens / 1M x the model's token price when it has one (:class:`~governance.models.TokenPrice`,
charged to the teams that called it). Sums are kept exact (``Decimal`` of GPU-seconds) and
rounded to the cent only when shown. A GPU product without a price costs nothing and is said so
(``unpriced_gpu_hours``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, QuerySet, Sum
from django.db.models.functions import TruncDate
from rest_framework.exceptions import ValidationError

from accounts.models import Team
from accounts.public import is_unrestricted
from governance.models import UNUSED, GpuPrice, GpuSample, RequestRecord, TokenPrice

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
        data: dict[str, Any] = {"team": self.team, "model": self.model or None}
        if self.day is not None:
            data["day"] = self.day.isoformat()
        per_million = self.cost_per_million_tokens
        data.update({
            "requests": self.requests, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "gpu_hours": _round(self.gpu_hours, "0.0001"), "idle_gpu_hours": _round(self.idle_gpu_seconds / HOUR,
                                                                                    "0.0001"),
            "unpriced_gpu_hours": _round(self.unpriced_gpu_seconds / HOUR, "0.0001"),
            "cost": _round(self.cost), "idle_cost": _round(self.idle_cost),
            "cost_per_million_tokens": _round(per_million) if per_million is not None else None,
        })
        return data


def _round(value: Decimal, step: str = "0.01") -> float:
    return float(Decimal(value).quantize(Decimal(step)))


def _filtered(rows: QuerySet, query: UsageQuery, when: str) -> QuerySet:
    rows = rows.filter(**{f"{when}__gte": query.since, f"{when}__lt": query.until})
    if query.teams is not None:
        rows = rows.filter(team__in=query.teams)
    if query.model is not None:
        rows = rows.filter(model=query.model)
    return rows


def usage_rows(query: UsageQuery) -> list[UsageRow]:
    """Rows sorted by (day,) team and model; ``unused`` rows only when every team is asked for (staff)."""
    rows: dict[tuple, UsageRow] = {}

    def row(team: str, model: str, day: date | None) -> UsageRow:
        key = (day, team, model)
        if key not in rows:
            rows[key] = UsageRow(team, model, day)
        return rows[key]

    day_of = {"day": TruncDate("started_at", tzinfo=UTC)} if query.by_day else {}
    requests = _filtered(RequestRecord.objects.order_by(), query, "started_at").values("team", "model", **day_of)
    token_prices = {price.model: price.price_per_million_tokens for price in TokenPrice.objects.all()}
    for total in requests.annotate(requests=Count("id"), prompt=Sum("prompt_tokens"),
                                   completion=Sum("completion_tokens")):
        entry = row(total["team"], total["model"], total.get("day"))
        entry.requests += total["requests"]
        entry.prompt_tokens += total["prompt"] or 0
        entry.completion_tokens += total["completion"] or 0
        price = token_prices.get(total["model"])
        if price is not None:
            entry.token_cost += Decimal((total["prompt"] or 0) + (total["completion"] or 0)) * price / MILLION

    gpu_prices = {price.gpu_product: price.price_per_gpu_hour for price in GpuPrice.objects.all()}
    sample_day = {"day": TruncDate("sampled_at", tzinfo=UTC)} if query.by_day else {}
    samples = _filtered(GpuSample.objects.order_by(), query, "sampled_at")
    if query.teams is not None or query.model is not None:
        samples = samples.exclude(team=UNUSED)
    held = samples.values("team", "model", "gpu_product", "idle", **sample_day).annotate(
        seconds=Sum(F("gpus") * F("period_seconds")))
    for total in held:
        entry = row(total["team"], total["model"], total.get("day"))
        seconds = total["seconds"] or 0
        price = gpu_prices.get(total["gpu_product"])
        cost = Decimal(seconds) * price / HOUR if price is not None else Decimal(0)
        entry.gpu_seconds += seconds
        entry.gpu_cost += cost
        if price is None:
            entry.unpriced_gpu_seconds += seconds
        if total["idle"]:
            entry.idle_gpu_seconds += seconds
            entry.idle_cost += cost
    return [rows[key] for key in sorted(rows, key=lambda key: (key[0] or date.min, key[1], key[2]))]


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_disc(share) WITHIN GROUP (ORDER BY expression)``."""

    function = "percentile_disc"
    template = "%(function)s(%(share)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def daily_latency(query: UsageQuery) -> dict[date, tuple[float, float]]:
    """p50 and p95 latency (ms) per day of the query's requests (nearest rank): computed by
    PostgreSQL, or here on SQLite (the embedded demo's few rows)."""
    rows = _filtered(RequestRecord.objects.order_by(), query, "started_at").annotate(
        day=TruncDate("started_at", tzinfo=UTC))
    if connection.vendor == "postgresql":
        found = rows.values("day").annotate(p50=Percentile("latency_ms", share=0.5),
                                            p95=Percentile("latency_ms", share=0.95)).order_by("day")
        return {row["day"]: (row["p50"], row["p95"]) for row in found}
    by_day: dict[date, list[float]] = defaultdict(list)
    for day, latency in rows.values_list("day", "latency_ms").iterator(chunk_size=10_000):
        by_day[day].append(latency)
    return {day: (_rank(values, 0.5), _rank(values, 0.95)) for day, values in sorted(by_day.items())}


def _rank(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(share * len(ordered) + 0.999999) - 1))]
