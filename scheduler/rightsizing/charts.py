"""Charts as inline SVG, rendered on the server with pygal (no JavaScript, no CDN).

Time series start their value axis at zero (``include_x_axis``): a declared 80Gi against a 75Gi
peak must look like 94%, not like the peak at the bottom of an axis that starts at 60.
"""

from __future__ import annotations

import pygal

from common.charts import chart, render
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.report import PoolTotal

GI = 1024**3


def pool_chart(totals: list[PoolTotal]) -> str:
    """Per pool: declared vs recommended memory (GiB), with what right-sizing would free."""
    graph = chart(pygal.Bar, title="Memory per node pool (GiB)", x_label_rotation=20, height=320)
    graph.x_labels = [total.node_pool for total in totals]
    graph.add("Declared", [round(total.declared_bytes / GI, 1) for total in totals])
    graph.add("Recommended", [round(total.recommended_bytes / GI, 1) for total in totals])
    graph.add("Freed", [round(total.freed_bytes / GI, 1) for total in totals])
    return render(graph)


def _time_series(title: str, series: dict[str, list[tuple[object, float]]]) -> str:
    graph = chart(
        pygal.DateTimeLine,
        title=title,
        height=320,
        x_value_formatter=lambda value: value.strftime("%m-%d %H:%M"),
        x_label_rotation=20,
        include_x_axis=True,  # the value axis starts at zero
        dots_size=2,
    )
    for name, points in series.items():
        graph.add(name, points)
    return render(graph)


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
