"""Server-side SVG charts (pygal): no JavaScript, the page stays one server-rendered document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pygal
from django.utils.safestring import SafeString
from pygal.graph.graph import Graph
from pygal.style import LightSolarizedStyle, Style

from common.charts import chart, drawn_once
from scheduler.admission.accounting import PoolAccount
from scheduler.admission.quotas import QuotaRow

GI = 1024**3


def drawn(name: str, make: Callable[[], Graph], labels: list[str], series: dict[str, list[Any]]) -> SafeString:
    """The chart ``make`` sets up, with these labels and series, as inline SVG, cached by its
    content (:func:`common.charts.drawn_once`): pygal took 100-200 ms to draw 50 pools on every
    dashboard and planning page. ``name`` keeps charts of equal data but other settings apart."""

    def draw() -> Graph:
        graph = make()
        graph.x_labels = labels
        for title, values in series.items():
            graph.add(title, values)
        return graph

    return drawn_once("scheduler", [name, labels, series], draw)


def pool_usage_chart(accounts: list[PoolAccount]) -> str:
    """Budget, allocated (running + reserved) and observed peak per pool, in Gi, as inline SVG."""
    return drawn(
        "pool-usage",
        lambda: chart(
            pygal.Bar, height=320, style=LightSolarizedStyle, x_label_rotation=20, legend_at_bottom=True,
            y_title="GiB", title="Pool memory: budget vs allocated vs observed",
        ),
        [f"{a.cluster_name}/{a.pool}{' (no nodes)' if a.without_nodes else ''}" for a in accounts],
        {
            "budget": [round((a.budget_bytes or 0) / GI, 1) for a in accounts],
            "allocated": [round(a.committed_bytes / GI, 1) for a in accounts],
            "observed": [round(a.observed_bytes / GI, 1) for a in accounts],
        },
    )  # fmt: skip


def quota_chart(rows: list[QuotaRow]) -> str:
    """Each team's guaranteed, used and borrowed memory per pool, in Gi, as inline SVG."""
    return drawn(
        "quota",
        lambda: chart(
            pygal.Bar, height=320, style=LightSolarizedStyle, x_label_rotation=20, legend_at_bottom=True,
            y_title="GiB", title="Team quotas: guaranteed vs used vs borrowed",
        ),
        [f"{row.cluster}/{row.pool} {row.team}" for row in rows],
        {
            "guaranteed": [round(row.guaranteed.bytes / GI, 1) for row in rows],
            "used": [round(row.used.bytes / GI, 1) for row in rows],
            "borrowed": [round(row.borrowed.bytes / GI, 1) for row in rows],
        },
    )  # fmt: skip


PLACEMENT_STYLE = Style(
    background="transparent", plot_background="#fff", colors=("#2e90fa", "#f79009", "#e3e8ee"),
    foreground="#344054", foreground_strong="#101828", foreground_subtle="#98a2b3",
)  # fmt: skip
"""Running in blue, the proposal in orange, free space in the pages' neutral grey."""
PLACEMENT_NODES = 40
"""Nodes drawn at most: the pools the proposal lands in (or misses) come first."""


def placement_chart(plan: dict[str, Any]) -> str:
    """Each node of the plan's pools as two bars, memory and GPU memory, in % of the node's capacity,
    filled by the models running there, then by the proposal, then free; tooltips name the models.

    Works on the plan as the page shows it (already redacted): models of other teams count in
    the running share of a bar without their names.
    """
    proposed = {entry["model"] for entry in plan["models"]}
    # a proposed model that missed missed in its own pool: no walk of the pools' misses finds it
    missed = {model["pool"] for model, entry in zip(plan["models"], plan["proposal"], strict=True) if not entry["fits"]}
    pools = sorted(plan["pools"], key=lambda pool: not _touches(pool, proposed, missed))
    rows: list[tuple[str, dict[str, Any], str]] = []
    for pool in pools:
        for node in pool["nodes"]:
            rows.append((f"{pool['name']}/{node['name']}", node, "memory"))
            if node.get("gpus") and node.get("gpu_memory_bytes"):
                rows.append((f"{pool['name']}/{node['name']} GPUs", node, "gpu"))
    rows = rows[:PLACEMENT_NODES]
    series: dict[str, list[dict[str, Any]]] = {"running": [], "proposed": [], "free": []}
    for _, node, dimension in rows:
        for name, value in zip(series, _shares(node, dimension, proposed), strict=True):
            series[name].append(value)
    return drawn(
        "placement",
        lambda: chart(
            pygal.HorizontalStackedBar, height=max(200, 26 * len(rows) + 120), style=PLACEMENT_STYLE,
            legend_at_bottom=True, x_title="% of the node's capacity", range=(0, 100),
            title="Placement: memory and GPU memory of each node, by model",
        ),
        [label for label, _, _ in rows],
        series,
    )  # fmt: skip


def _touches(pool: dict[str, Any], proposed: set[str], missed: set[str]) -> bool:
    """Whether a proposed model landed on the pool's nodes or missed them (``missed``: their pools)."""
    return pool["name"] in missed or any(item["model"] in proposed for node in pool["nodes"] for item in node["models"])


def _shares(node: dict[str, Any], dimension: str, proposed: set[str]) -> list[dict[str, Any]]:
    """(running, proposed, free) of one node's memory or GPU memory, each a pygal value with a tooltip."""
    if dimension == "memory":
        capacity, used = node["capacity_bytes"], node["used_bytes"]
        figure = "memory_bytes"
    else:
        # A GPU given to a pod is the pod's alone: it holds all of that GPU's memory.
        capacity = node["gpus"] * node["gpu_memory_bytes"]
        used = node["used_gpus"] * node["gpu_memory_bytes"]
        figure = "gpus"
    mine = [item for item in node["models"] if item["model"] in proposed]
    new = sum(item.get(figure) or 0 for item in mine) * (node["gpu_memory_bytes"] if dimension == "gpu" else 1)
    others = [item["model"] for item in node["models"] if item["model"] not in proposed]
    capacity = max(capacity, 1)

    def share(amount: int, names: list[str]) -> dict[str, Any]:
        label = f"{amount / GI:.1f} GiB" + (": " + ", ".join(sorted(set(names))[:8]) if names else "")
        return {"value": round(100 * max(amount, 0) / capacity, 1), "label": label}

    return [share(used - new, others), share(new, [item["model"] for item in mine]), share(capacity - used, [])]
