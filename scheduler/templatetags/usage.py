"""``{% usage_bar used total %}``: a fixed-width bar that never spills, with over-commit marked.

A pool over its budget (633 % in the old demo) used to draw a bar six times its cell's width
across the table. The fill is capped at the bar's width; past 100 % the bar turns red and the
text says by how much the pool is over, so over-commit shows clearly without breaking layout.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html

register = template.Library()


@register.simple_tag
def usage_bar(used: int | None, total: int | None) -> str:
    if not total:
        return "no budget"
    percent = round(100 * (used or 0) / total)
    if percent <= 100:
        return format_html('<span class="bar" title="{0} %"><span style="width: {0}%"></span></span> {0} %', percent)
    over = f"{((used or 0) - total) / 1024**3:,.1f}"
    return format_html(
        '<span class="bar over" title="{0} %"><span style="width: 100%"></span></span> '
        '<strong class="over">{0} %: over by {1} GiB</strong>',
        percent,
        over,
    )
