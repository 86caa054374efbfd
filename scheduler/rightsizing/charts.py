"""Charts as inline SVG, rendered on the server with pygal (no JavaScript, no CDN)."""

from __future__ import annotations

import pygal
from pygal.style import CleanStyle

from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.report import PoolTotal

GI = 1024**3


def _config() -> dict:
    # js=[]: pygal links its tooltip script from a CDN by default; the portal serves nothing external.
    return {"style": CleanStyle, "js": [], "height": 320, "width": 800, "explicit_size": False}


def _render(chart: pygal.graph.graph.Graph) -> str:
    return chart.render(is_unicode=True, disable_xml_declaration=True)


def pool_chart(totals: list[PoolTotal]) -> str:
    """Per pool: declared vs recommended memory (GiB), with what right-sizing would free."""
    chart = pygal.Bar(title="Memory per node pool (GiB)", x_label_rotation=20, **_config())
    chart.x_labels = [total.node_pool for total in totals]
    chart.add("Declared", [round(total.declared_bytes / GI, 1) for total in totals])
    chart.add("Recommended", [round(total.recommended_bytes / GI, 1) for total in totals])
    chart.add("Freed", [round(total.freed_bytes / GI, 1) for total in totals])
    return _render(chart)


def model_chart(title: str, history: list[Observation]) -> str:
    """One model over time: declared memory against the observed peak of each refresh (GiB)."""
    chart = pygal.DateTimeLine(
        title=title, x_value_formatter=lambda value: value.strftime("%Y-%m-%d %H:%M"), **_config()
    )
    chart.add("Declared", [(o.observed_at, o.declared_bytes / GI) for o in history if o.declared_bytes])
    chart.add("Observed peak", [(o.observed_at, o.peak_bytes / GI) for o in history if o.peak_bytes is not None])
    chart.add(
        "Recommended", [(o.observed_at, o.recommended_bytes / GI) for o in history if o.recommended_bytes is not None]
    )
    return _render(chart)
