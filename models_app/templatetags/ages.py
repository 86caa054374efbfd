"""``{{ value|age }}``: a moment as people read it in kubectl and Headlamp, its age ("3 minutes
ago", "in 2 days"), with the exact time (seconds, UTC, never microseconds) on hover.

Takes a datetime or the RFC 3339 text Kubernetes sends (``creationTimestamp``,
``lastTransitionTime``); anything else, or nothing, is shown as the argument (default "—").
Every timestamp of the portal's pages goes through it, so they all read the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince, timeuntil

register = template.Library()


def as_moment(value: Any) -> datetime | None:
    """An aware datetime (UTC when none is said) from a datetime or RFC 3339 text, else None."""
    if isinstance(value, str):
        try:
            value = parse_datetime(value.strip())
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def exact(moment: datetime) -> str:
    """``2026-11-26 10:04:37 UTC``: to the second, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# timesince's units, in seconds: a span is said in the largest that fits it
UNITS = (365 * 86_400, 30 * 86_400, 7 * 86_400, 86_400, 3_600, 60)


def rounded(seconds: float) -> float:
    """``seconds`` rounded to the nearest whole of its largest unit. Django's ``timesince`` cuts
    instead: a token made to last 7 days read "in 6 days" a second after it was made (issue 43)."""
    for unit in UNITS:
        if seconds >= unit:
            return round(seconds / unit) * unit
    return seconds


def relative(moment: datetime, now: datetime | None = None) -> str:
    """``3 minutes ago`` / ``in 2 days`` (the largest unit only, rounded to the nearest); ``just
    now`` under a minute."""
    now = now or timezone.now()
    seconds = abs((now - moment).total_seconds())
    if seconds < 60:
        return "just now"
    span = timedelta(seconds=rounded(seconds))
    if moment <= now:
        return f"{timesince(now - span, now, depth=1)} ago"
    return f"in {timeuntil(now + span, now, depth=1)}"


@register.filter
def age(value: Any, missing: str = "—") -> SafeString | str:
    moment = as_moment(value)
    if moment is None:
        return missing if value in (None, "") else str(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"), exact(moment), relative(moment),
    )  # fmt: skip
