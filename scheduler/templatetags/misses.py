"""``{{ pool.unplaced|miss_items }}``: a plan's pods that found no node, as ``<li>`` elements."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()
RUNNING_SHOWN = 50


@register.filter
def miss_items(misses: Iterable[dict[str, Any]]) -> SafeString:
    """``<li>model — reason: detail</li>`` per miss, escaped as the template would escape them.

    Every miss of the proposal is listed; of the running models that find no node only the first
    ``RUNNING_SHOWN``, then how many more: an over-committed pool lists thousands (8,500 running
    pods on a 10,000-model cluster made a 2.7 MB page nobody reads), and the plan API lists all.
    """
    misses = list(misses)
    running = [miss for miss in misses if miss.get("origin") == "running"]
    shown = [miss for miss in misses if miss.get("origin") != "running"] + running[:RUNNING_SHOWN]
    items = format_html_join(
        "", "<li>{} — {}{}</li>", ((miss["model"], miss["reason"], _detail(miss["detail"])) for miss in shown)
    )
    if len(running) > RUNNING_SHOWN:
        more = len(running) - RUNNING_SHOWN
        items += format_html("<li>… and {} more running models that find no node (the plan API lists all)</li>", more)
    return items


def _detail(detail: str | None) -> str:
    return f": {detail}" if detail else ""
