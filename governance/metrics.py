"""Prometheus series of usage, limits and the ledger, all named ``inference_portal_...``.

The gateway's counters live in its own registry (``common.gateway_metrics.REGISTRY``, served on
the gateway's ``/metrics``); every replica counts its own requests, so staff sum over replicas.
Budget use is one number across replicas (the Redis counter), so the portal's ``/metrics`` reads
it at scrape time (:class:`BudgetCollector`) instead of each replica guessing it.

Labels are bounded: team names (a database table staff manage), model names from the gateway's
catalog, HTTP statuses.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from common.gateway_metrics import REGISTRY as GATEWAY_REGISTRY

TEAM_REQUESTS = Counter(
    "inference_portal_team_requests", "Gateway requests per team, model and HTTP status.",
    ["team", "model", "status"], registry=GATEWAY_REGISTRY,
)
TEAM_TOKENS = Counter(
    "inference_portal_team_tokens", "Tokens the backends reported per team, model and type (prompt, completion).",
    ["team", "model", "type"], registry=GATEWAY_REGISTRY,
)
LIMITED = Counter(
    "inference_portal_limit_refusals", "Requests refused with 429 per team and reason (requests, tokens, budget).",
    ["team", "reason"], registry=GATEWAY_REGISTRY,
)
LEDGER_WRITTEN = Counter(
    "inference_portal_usage_ledger_written_rows", "Request records written to the usage ledger.",
    registry=GATEWAY_REGISTRY,
)
LEDGER_LOST = Counter(
    "inference_portal_usage_ledger_lost_rows",
    "Request records the usage ledger could not keep (its queue was full while the database was unreachable, "
    "or the gateway stopped before writing them).",
    registry=GATEWAY_REGISTRY,
)
LEDGER_QUEUED = Gauge(
    "inference_portal_usage_ledger_queued_rows", "Request records waiting to be written to the usage ledger.",
    registry=GATEWAY_REGISTRY,
    multiprocess_mode="livesum",  # summed over the gateway's live workers; a stopped one's queue is gone with it
)
LEDGER_FAILURES = Counter(
    "inference_portal_usage_ledger_write_failures", "Batches the ledger writer could not write (retried later).",
    registry=GATEWAY_REGISTRY,
)


@cache
def series(metric: Counter, *labels: str) -> Counter:
    """``metric``'s child for these label values, resolved once (``labels()`` locks on every call)."""
    return metric.labels(*labels)


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    labels = ["team", "model"]
    return (
        GaugeMetricFamily("inference_portal_team_budget_used_tokens",
                          "Tokens used this calendar month (UTC) against a monthly budget.", labels=labels),
        GaugeMetricFamily("inference_portal_team_budget_used_ratio",
                          "Share of a monthly token budget used this month (1 = spent).", labels=labels),
        GaugeMetricFamily("inference_portal_team_budget_warning",
                          "1 when a monthly budget is at least 80% used (the portal warns the team).", labels=labels),
    )


class BudgetCollector(Collector):
    """Every monthly budget's use, read from the limits' counters at scrape time."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from _families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db import DatabaseError

        from governance.budgets import budget_uses

        used, ratio, warning = _families()
        try:
            uses = budget_uses()
        except DatabaseError:  # the database is away: /metrics still answers, /readyz says why
            uses = []
        for use in uses:
            labels = [use.team, use.model]
            used.add_metric(labels, use.used)
            ratio.add_metric(labels, use.ratio)
            warning.add_metric(labels, 1.0 if use.warn else 0.0)
        yield from (used, ratio, warning)


LIMITS_UNCHECKED = Counter(
    "inference_portal_limit_checks_failed",
    "Requests let through unchecked because the limits' Redis could not be reached.",
    registry=GATEWAY_REGISTRY,
)
