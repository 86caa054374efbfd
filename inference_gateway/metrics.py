"""The gateway's own ``/metrics`` (prometheus_client): per model, requests by status, latency,
time to first token and tokens from the backend's ``usage``.

Series are labelled by the served model name (what clients send as ``model``), the name the model
page queries Prometheus with (``inference_gateway.charts``). Latency is the whole request as the
client sees it, wake included; time to first token is when the first byte of the answer (the
first SSE chunk of a stream) left for the client.

Each series' child (``labels(...)``) is resolved once and kept: ``labels()`` takes a lock and
checks its arguments on every call, three times a request. The label values are bounded: model
names come from the catalog (any other name is counted as ``-``), statuses are HTTP codes.

Several workers (``manage.py gateway --workers N``, inference_gateway/workers.py) share one
``PROMETHEUS_MULTIPROC_DIR``: prometheus_client then keeps every value in a file per process, and
:func:`exposition` answers the sum over the files, so whichever worker Prometheus reaches reports
the whole gateway.
"""

from __future__ import annotations

import os
from functools import cache

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess, values
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase

# the registry and the client-left status are shared with the governance hooks (common.gateway_metrics);
# CLIENT_LEFT is named here as well because the server counts it as ``metrics.CLIENT_LEFT``
from common.gateway_metrics import CLIENT_LEFT as CLIENT_LEFT
from common.gateway_metrics import REGISTRY

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

REQUESTS = Counter(
    "inference_portal_gateway_requests", "Requests through the inference gateway, by model and HTTP status.",
    ["model", "status"], registry=REGISTRY,
)
LATENCY = Histogram(
    "inference_portal_gateway_request_duration_seconds", "Time from request to the last byte of the answer.",
    ["model"], buckets=BUCKETS, registry=REGISTRY,
)
FIRST_TOKEN = Histogram(
    "inference_portal_gateway_time_to_first_token_seconds",
    "Time from request to the first byte (first SSE chunk) of the answer.",
    ["model"], buckets=BUCKETS, registry=REGISTRY,
)
TOKENS = Counter(
    "inference_portal_gateway_tokens", "Tokens the backends reported in usage, by model and type (prompt, completion).",
    ["model", "type"], registry=REGISTRY,
)
UPSTREAM_ERRORS = Counter(
    "inference_portal_gateway_upstream_errors",
    "Replicas that could not be reached (each then skipped for a while), by model.",
    ["model"], registry=REGISTRY,
)
REPLICA_WAITS = Counter(
    "inference_portal_gateway_replica_waits",
    "Requests that found a model just woken with no ready replica listed yet (its Service's EndpointSlices "
    "behind its Pods' readiness) and waited for one, by model.",
    ["model"], registry=REGISTRY,
)
CONTENT_TYPE = CONTENT_TYPE_LATEST


CATALOG_ROWS = Counter(
    "inference_portal_gateway_catalog_rows_read",
    "Serving rows the route catalog read: every row (whole), the rows change notices named (notice), the rows "
    "whose version differed after notices may have been missed (compare)",
    ["read"], registry=REGISTRY,
)


def count_in_files(directory: str) -> None:
    """From now on, this process's gateway series are kept in files in ``directory`` (prometheus_client's
    multiprocess mode), and so are those of every process forked from it, each in its own files.

    Why here and not by the environment alone: prometheus_client picks where values live when it
    is imported (``PROMETHEUS_MULTIPROC_DIR`` then), and the supervisor has imported it, with
    Django's start, before it makes the folder (inference_gateway/workers.py). So the choice is made
    again (``values.get_value_class``) and the series made so far are given new values of that kind:
    the unlabelled ones their value (``_metric_init``), the labelled ones no children yet (none has
    counted anything: the supervisor serves nothing). Relies on prometheus_client's internals as of
    the pinned version (requirements.txt)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    values.ValueClass = values.get_value_class()
    for collector in list(REGISTRY._collector_to_names):
        if not isinstance(collector, MetricWrapperBase):
            continue
        if collector._is_observable():
            collector._metric_init()
        else:
            collector._metrics.clear()
    _series.cache_clear()


@cache
def _series(metric: Counter | Histogram, *labels: str) -> Counter | Histogram:
    """``metric``'s child for these label values, resolved once."""
    return metric.labels(*labels)


def observe(model: str, status: int, seconds: float, first_byte: float | None) -> None:
    _series(REQUESTS, model, str(status)).inc()
    _series(LATENCY, model).observe(seconds)
    if first_byte is not None:
        _series(FIRST_TOKEN, model).observe(first_byte)


def count_usage(model: str, usage: object) -> None:
    """Add a backend's ``usage`` object (OpenAI shape); anything else is ignored."""
    if not isinstance(usage, dict):
        return
    for kind in ("prompt", "completion"):
        value = usage.get(f"{kind}_tokens")
        if isinstance(value, int) and value > 0:
            _series(TOKENS, model, kind).inc(value)


def exposition() -> bytes:
    """This process's series, or with ``PROMETHEUS_MULTIPROC_DIR`` every worker's, summed."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return generate_latest(REGISTRY)
    workers = CollectorRegistry()
    multiprocess.MultiProcessCollector(workers)
    return generate_latest(workers)
