"""Run durations as inline SVG (pygal, no JavaScript, nothing external): how long each run took,
coloured by how it ended, so a run that suddenly takes three times as long stands out."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pygal
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pygal.style import Style

from common.charts import chart, render
from runs_app.models import InferenceRun

SERIES = ("Succeeded", "Failed", "Running")
# green, red, amber: the badges' colours for Succeeded, Failed and Running
STYLE = Style(background="white", plot_background="white", colors=("#12b76a", "#f04438", "#f79009"))
UNITS = ((7200, 3600, "hours"), (120, 60, "minutes"), (0, 1, "seconds"))


@dataclass(frozen=True)
class Duration:
    name: str
    phase: str
    seconds: float


def _time(value: object) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def durations(runs: Iterable[InferenceRun], now: datetime | None = None) -> list[Duration]:
    """Each started run's time from its Job's start to its completion (to now while Running),
    oldest first; runs that never started have no duration and are left out."""
    now = now or timezone.now()
    found = []
    for run in runs:
        status = run.status or {}
        start = _time(status.get("startTime"))
        end = _time(status.get("completionTime")) or (now if run.phase == "Running" else None)
        if start is None or end is None or run.phase not in SERIES:
            continue
        found.append((start, Duration(run.name, run.phase, max((end - start).total_seconds(), 0.0))))
    return [duration for _, duration in sorted(found, key=lambda pair: pair[0])]


def duration_chart(runs: Iterable[InferenceRun], title: str = "Run durations") -> str:
    """A bar per run in the unit that suits the longest; empty when no run has a duration yet."""
    bars = durations(runs)
    if not bars:
        return ""
    longest = max(bar.seconds for bar in bars)
    divisor, unit = next((size, name) for floor, size, name in UNITS if longest >= floor)
    graph = chart(
        pygal.Bar, title=f"{title} ({unit})", style=STYLE, height=320, x_label_rotation=30, legend_at_bottom=True,
        y_title=unit, truncate_label=24,
    )  # fmt: skip
    graph.x_labels = [bar.name for bar in bars]
    for phase in SERIES:
        label = "Running (so far)" if phase == "Running" else phase
        graph.add(label, [round(bar.seconds / divisor, 2) if bar.phase == phase else None for bar in bars])
    return render(graph)
