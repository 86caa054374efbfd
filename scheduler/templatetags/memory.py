"""``{{ value|gib }}``: bytes shown as GiB with one decimal, the unit the pages use throughout."""

from django import template

register = template.Library()


@register.filter
def gib(amount: int | None) -> str:
    if amount is None:
        return "—"
    return f"{amount / 1024**3:,.1f} GiB"
