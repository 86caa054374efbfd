"""Template filters for memory amounts (bytes -> 78Gi) used by the right-sizing pages."""

from __future__ import annotations

from django import template

from scheduler.rightsizing.policy import format_memory

register = template.Library()


@register.filter
def memory(amount: int | None) -> str:
    """``None`` -> an em dash; negative amounts keep their sign (memory a model needs)."""
    if amount is None:
        return "—"
    return ("-" if amount < 0 else "") + format_memory(abs(amount)) if amount else "0"
