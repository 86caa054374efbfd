"""metav1.Condition lists, updated the way controllers do: the transition time moves only on change."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils.dateparse import parse_datetime


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def as_rfc3339(value: str) -> str:
    """A time the typed client turned into ISO form (``+00:00``) back to Kubernetes' ``...Z``."""
    parsed = parse_datetime(value)
    return rfc3339(parsed.astimezone(UTC)) if parsed else value


def set_condition(
    conditions: list[dict[str, Any]] | None,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None = None,
) -> list[dict[str, Any]]:
    """A new list with condition ``type_`` set; ``lastTransitionTime`` moves only when the status
    flips (``meta.SetStatusCondition``): a new reason or message for the same status keeps it."""
    text = "True" if status else "False"
    result = [dict(condition) for condition in conditions or [] if condition.get("type") != type_]
    previous = next((c for c in conditions or [] if c.get("type") == type_), None)
    unchanged = previous and previous.get("status") == text and previous.get("lastTransitionTime")
    condition = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": previous["lastTransitionTime"] if unchanged else rfc3339(now),
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    order = [c.get("type") for c in conditions or []]
    result.append(condition)
    return sorted(result, key=lambda c: order.index(c["type"]) if c["type"] in order else len(order))
