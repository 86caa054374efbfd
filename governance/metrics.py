"""Prometheus series of usage, limits and the ledger, all named ``inference_portal_...``.

The gateway's counters live in its own registry (``common.gateway_metrics.REGISTRY``, served on
the gateway's ``/metrics``); every replica counts its own requests, so staff sum over replicas.
Budget use is one number across replicas (the Redis counter), so the portal's ``/metrics`` reads
it at scrape time (:class:`governance.budgets.BudgetCollector`) instead of each replica guessing it.

Labels are bounded: team names (a database table staff manage), model names from the gateway's
catalog, HTTP statuses.
"""

from __future__ import annotations

from functools import cache

from prometheus_client import Counter, Gauge

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
    "a line of a dead process's spool could not be read back, or the gateway stopped before writing them "
    "without a spool).",
    registry=GATEWAY_REGISTRY,
)
LEDGER_QUEUED = Gauge(
    "inference_portal_usage_ledger_queued_rows", "Request records waiting to be written to the usage ledger.",
    registry=GATEWAY_REGISTRY,
    multiprocess_mode="livesum",  # summed over the gateway's live workers; a stopped one's queue is gone with it
)
LEDGER_CLAMPED = Counter(
    "inference_portal_usage_ledger_clamped_rows",
    "Request records with a value the ledger's columns cannot hold (a name too long, a count out of range), "
    "written with it cut to fit.",
    registry=GATEWAY_REGISTRY,
)
LEDGER_SET_ASIDE = Counter(
    "inference_portal_usage_ledger_set_aside_rows",
    "Request records the database refused even alone: kept as set-aside records (admin) instead of the ledger.",
    registry=GATEWAY_REGISTRY,
)
LEDGER_RECOVERED = Counter(
    "inference_portal_usage_ledger_recovered_rows",
    "Request records of a gateway process that died before writing them, written from its spool by another.",
    registry=GATEWAY_REGISTRY,
)
LEDGER_FAILURES = Counter(
    "inference_portal_usage_ledger_write_failures", "Batches the ledger writer could not write (retried later).",
    registry=GATEWAY_REGISTRY,
)


@cache
def series(metric: Counter, *labels: str) -> Counter:
    """``metric``'s child for these label values, resolved once (``labels()`` locks on every call)."""
    return metric.labels(*labels)


LIMITS_UNCHECKED = Counter(
    "inference_portal_limit_checks_failed",
    "Requests let through unchecked because the limits' Redis could not be reached.",
    registry=GATEWAY_REGISTRY,
)
LIMITS_REDIS_CIRCUIT_OPENED = Counter(
    "inference_portal_limit_redis_circuit_opened",
    "Times the limits' Redis failed (refused, reset, or no answer within GOVERNANCE_REDIS_TIMEOUT_SECONDS) and "
    "was then left alone for GOVERNANCE_REDIS_RETRY_SECONDS, requests going through unchecked meanwhile.",
    registry=GATEWAY_REGISTRY,
)
LIMITS_COUNTERS_LOST = Counter(
    "inference_portal_limit_counters_lost",
    "Times this gateway found the limits' counters lost (Redis restarted without persistence, or flushed): "
    "the windows in progress were counted from then only.",
    registry=GATEWAY_REGISTRY,
)
