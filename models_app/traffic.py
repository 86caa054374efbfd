"""The model page's traffic charts: requests per minute and p50/p95 latency over the last day, from
the gateway's metrics (``inference_gateway.metrics``) in Prometheus.

Which Prometheus: the model's cluster's ``prometheus_url`` (and auth header), the one right-sizing
reads; docs/gateway.md asks for the gateway's ``/metrics`` to be scraped there. One range query per
figure, a point every ``STEP`` (96 points a day), each a rate over that step, so every request is
counted once. Prometheus unreachable or without the series: the page says so instead of a chart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pygal
from django.utils import timezone
from django.utils.safestring import mark_safe

from common.charts import chart, render
from models_app.models import ServingModel
from scheduler.public import PrometheusClient, PrometheusError

WINDOW = timedelta(days=1)
STEP = timedelta(minutes=15)
TIMEOUT_SECONDS = 5.0


class RangeClient(PrometheusClient):
    """Range queries (``/api/v1/query_range``) beside right-sizing's instant ones, same errors."""

    def query_range(self, promql: str, start: datetime, end: datetime, step: timedelta) -> list[tuple[float, float]]:
        """The first series' (unix time, value) points, NaN dropped; [] when there is no series."""
        form = {
            "query": promql,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": f"{step.total_seconds():g}",
        }
        result = self.post("query_range", form).get("result") or []
        if not result:
            return []
        return [(float(at), float(value)) for at, value in result[0]["values"] if not math.isnan(float(value))]


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def queries(model_id: str) -> dict[str, str]:
    """PromQL of each line of the charts, by legend."""
    selector = f"{{model={_quoted(model_id)}}}"
    window = f"[{int(STEP.total_seconds() // 60)}m]"
    latency = f"sum by (le) (rate(inference_portal_gateway_request_duration_seconds_bucket{selector}{window}))"
    return {
        "requests/min": f"sum(rate(inference_portal_gateway_requests_total{selector}{window})) * 60",
        "p50 ms": f"histogram_quantile(0.5, {latency}) * 1000",
        "p95 ms": f"histogram_quantile(0.95, {latency}) * 1000",
    }


@dataclass
class Traffic:
    """The charts' SVG, or why there is none."""

    svg: str = ""
    note: str = ""


def _chart(title: str, series: dict[str, list[tuple[float, float]]], start: datetime, end: datetime) -> str:
    stamps = []
    moment = start
    while moment <= end:
        stamps.append(moment.timestamp())
        moment += STEP
    graph = chart(pygal.Line, title=title, height=260, dots_size=1.5, x_label_rotation=0, show_minor_x_labels=False)
    graph.x_labels = [
        timezone.localtime(datetime.fromtimestamp(at, tz=start.tzinfo)).strftime("%H:%M") for at in stamps
    ]
    graph.x_labels_major = graph.x_labels[::16]
    for legend, points in series.items():
        by_time = {round(at): value for at, value in points}
        graph.add(legend, [None if by_time.get(round(at)) is None else round(by_time[round(at)], 1) for at in stamps])
    return render(graph)


def traffic(model: ServingModel, now: datetime | None = None) -> Traffic:
    cluster = model.cluster
    if not cluster.prometheus_url:
        return Traffic(note=f"cluster {cluster.name} has no Prometheus URL: no traffic history.")
    refused = cluster.insecure_url_errors().get("prometheus_url")
    if refused:
        return Traffic(note=f"cluster {cluster.name}: prometheus_url {refused}")
    end = now or timezone.now()
    start = end - WINDOW
    try:
        with RangeClient(cluster.prometheus_url, cluster.prometheus_auth_header or "", TIMEOUT_SECONDS) as client:
            lines = {
                legend: client.query_range(promql, start, end, STEP)
                for legend, promql in queries(model.gateway_id).items()
            }
    except PrometheusError as error:
        return Traffic(note=str(error))
    if not any(lines.values()):
        return Traffic(note="No request through the gateway in the last day.")
    rate = {"requests/min": lines.pop("requests/min")}
    # pygal escapes every label it draws; the SVG is ours, not user HTML.
    return Traffic(
        svg=mark_safe(
            _chart("Requests per minute (gateway)", rate, start, end)
            + _chart("Latency (ms, gateway)", lines, start, end)
        )
    )
