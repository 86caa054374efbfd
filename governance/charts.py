"""The team usage page's charts (pygal, through common.charts): one series per day of the month."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta

import pygal
from django.utils.safestring import SafeString

from common.charts import chart, render
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

    def series(graph: pygal.graph.graph.Graph, name: str, key: str) -> None:
        graph.add(name, [round(totals[day][key], 4) if day in totals else None for day in days])

    traffic = chart(pygal.Bar, title="Tokens (left) and requests (right) per day", x_labels=labels)
    series(traffic, "Tokens", "tokens")
    requests = [totals[day]["requests"] if day in totals else None for day in days]
    if any(requests):  # pygal cannot scale a secondary axis without a value
        traffic.add("Requests", requests, secondary=True)
    speed = chart(pygal.Line, title="Latency per day (ms)", x_labels=labels)
    speed.add("p50", [round(latency[day][0], 1) if day in latency else None for day in days])
    speed.add("p95", [round(latency[day][1], 1) if day in latency else None for day in days])
    gpus = chart(pygal.StackedBar, title="GPU-hours per day", x_labels=labels)
    busy = {day: totals[day]["gpu_hours"] - totals[day]["idle_gpu_hours"] for day in totals}
    gpus.add("Serving", [round(busy[day], 3) if day in busy else None for day in days])
    series(gpus, "Idle", "idle_gpu_hours")
    cost = chart(pygal.Bar, title="Cost per day", x_labels=labels)
    series(cost, "Cost", "cost")
    return {"traffic": render(traffic), "latency": render(speed), "gpu_hours": render(gpus), "cost": render(cost)}
