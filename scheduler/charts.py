"""Server-side SVG charts (pygal): no JavaScript, the page stays one server-rendered document."""

from __future__ import annotations

import pygal
from pygal.style import LightSolarizedStyle

from scheduler.accounting import PoolAccount

GI = 1024**3


def pool_usage_chart(accounts: list[PoolAccount]) -> str:
    """Budget, allocated (running + reserved) and observed peak per pool, in Gi, as inline SVG."""
    chart = pygal.Bar(
        height=320,
        style=LightSolarizedStyle,
        x_label_rotation=20,
        legend_at_bottom=True,
        disable_xml_declaration=True,
        y_title="GiB",
        title="Pool memory: budget vs allocated vs observed",
    )
    chart.x_labels = [f"{a.cluster_name}/{a.pool}" for a in accounts]
    chart.add("budget", [round((a.budget_bytes or 0) / GI, 1) for a in accounts])
    chart.add("allocated", [round(a.committed_bytes / GI, 1) for a in accounts])
    chart.add("observed", [round(a.observed_bytes / GI, 1) for a in accounts])
    return chart.render(is_unicode=True)
