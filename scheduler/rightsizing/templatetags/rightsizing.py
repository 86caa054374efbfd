"""Template filters for memory amounts (bytes -> 78Gi) used by the right-sizing pages."""

from __future__ import annotations

from django import template
from django.urls import reverse

from scheduler.rightsizing.policy import format_memory
from scheduler.rightsizing.report import KIND_SLUGS, ReportRow

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
    slug = next(slug for slug, kind in KIND_SLUGS.items() if kind == row.kind)
    return reverse("rightsizing-object", args=[slug, row.model_id])
