"""Template filters for memory amounts (bytes -> 78Gi) used by the right-sizing pages."""

from __future__ import annotations

from django import template
from django.urls import reverse

from scheduler.rightsizing.kinds import slug_of
from scheduler.rightsizing.policy import format_memory
from scheduler.rightsizing.report import ReportRow

register = template.Library()


@register.filter
def memory(amount: int | None) -> str:
    """``None`` -> an em dash; negative amounts keep their sign (memory a model needs)."""
    if amount is None:
        return "—"
    return ("-" if amount < 0 else "") + format_memory(abs(amount)) if amount else "0"


@register.filter
def history_url(row: ReportRow) -> str:
    """The history page of a report row's object, whatever its kind."""
    return reverse("rightsizing-object", args=[slug_of(row.kind), row.model_id])


@register.filter
def apply_url(row: ReportRow) -> str:
    """Where to apply a report row's recommendation (the page offers it for ``apply_kinds`` only)."""
    return reverse("rightsizing-object-apply", args=[slug_of(row.kind), row.model_id])
