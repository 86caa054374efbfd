"""Charts as inline SVG, rendered on the server with pygal (no JavaScript, no CDN).

Time series start their value axis at zero (``include_x_axis``): a declared 80Gi against a 75Gi
peak must look like 94%, not like the peak at the bottom of an axis that starts at 60.
"""

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


def _time_series(title: str, series: dict[str, list[tuple[object, float]]]) -> str:
    chart = pygal.DateTimeLine(
        title=title,
        x_value_formatter=lambda value: value.strftime("%m-%d %H:%M"),
        x_label_rotation=20,
        include_x_axis=True,  # the value axis starts at zero
        dots_size=2,
        **_config(),
    )
    for name, points in series.items():
        chart.add(name, points)
    return _render(chart)


def model_chart(title: str, history: list[Observation]) -> str:
    """One object over time: declared memory against the observed peak of each refresh (GiB)."""
    return _time_series(
        title,
        {
            "Declared": [(o.observed_at, o.declared_bytes / GI) for o in history if o.declared_bytes],
            "Observed peak": [(o.observed_at, o.peak_bytes / GI) for o in history if o.peak_bytes is not None],
            "Recommended": [
                (o.observed_at, o.recommended_bytes / GI) for o in history if o.recommended_bytes is not None
            ],
        },
    )


def gpu_chart(title: str, history: list[Observation]) -> str:
    """GPU framebuffer of the largest pod (summed over its GPUs) against its GPUs' memory; empty without GPU data."""
    if not any(o.gpu_memory_peak_bytes is not None for o in history):
        return ""
    return _time_series(
        title,
        {
            "GPU memory": [(o.observed_at, o.gpu_capacity_bytes / GI) for o in history if o.gpu_capacity_bytes],
            "Framebuffer peak": [
                (o.observed_at, o.gpu_memory_peak_bytes / GI) for o in history if o.gpu_memory_peak_bytes is not None
            ],
        },
    )
