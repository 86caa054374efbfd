"""The team usage page's charts (pygal, through common.charts): one series per day of the month,
each drawn once per set of figures (``common.charts.drawn_once``)."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta

import pygal
from django.utils.safestring import SafeString

from common.charts import chart, drawn_once
from governance.showback import UsageRow


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=offset) for offset in range((end - start).days + 1)]


def usage_charts(rows: list[UsageRow], latency: dict[date, tuple[float, float]], start: date,
                 end: date) -> dict[str, SafeString]:
    """Tokens and requests, p50/p95 latency, GPU-hours and cost per day; ``rows`` grouped by day."""
    days = _days(start, end)
    totals: dict[date, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        day = totals[row.day]
        day["tokens"] += row.tokens
        day["requests"] += row.requests
        day["gpu_hours"] += float(row.gpu_hours)
        day["idle_gpu_hours"] += row.idle_gpu_seconds / 3600
        day["cost"] += float(row.cost)
    labels = [day.strftime("%d") for day in days]

    def series(key: str, digits: int = 4) -> list[float | None]:
        return [round(totals[day][key], digits) if day in totals else None for day in days]

    tokens, requests, idle = series("tokens"), series("requests"), series("idle_gpu_hours")
    busy = [round(totals[day]["gpu_hours"] - totals[day]["idle_gpu_hours"], 3) if day in totals else None
            for day in days]
    p50 = [round(latency[day][0], 1) if day in latency else None for day in days]
    p95 = [round(latency[day][1], 1) if day in latency else None for day in days]
    cost = series("cost")

    def traffic() -> pygal.Graph:
        graph = chart(pygal.Bar, title="Tokens (left) and requests (right) per day", x_labels=labels)
        graph.add("Tokens", tokens)
        if any(requests):  # pygal cannot scale a secondary axis without a value
            graph.add("Requests", requests, secondary=True)
        return graph

    def speed() -> pygal.Graph:
        graph = chart(pygal.Line, title="Latency per day (ms)", x_labels=labels)
        graph.add("p50", p50)
        graph.add("p95", p95)
        return graph

    def gpus() -> pygal.Graph:
        graph = chart(pygal.StackedBar, title="GPU-hours per day", x_labels=labels)
        graph.add("Serving", busy)
        graph.add("Idle", idle)
        return graph

    def spent() -> pygal.Graph:
        graph = chart(pygal.Bar, title="Cost per day", x_labels=labels)
        graph.add("Cost", cost)
        return graph

    # each drawn once per set of figures (a month's page is the same until its figures change)
    return {"traffic": drawn_once("usage-traffic", [labels, tokens, requests], traffic),
            "latency": drawn_once("usage-latency", [labels, p50, p95], speed),
            "gpu_hours": drawn_once("usage-gpu-hours", [labels, busy, idle], gpus),
            "cost": drawn_once("usage-cost", [labels, cost], spent)}
