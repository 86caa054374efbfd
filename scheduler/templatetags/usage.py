"""``{% usage_bar used total %}``: a fixed-width bar that never spills, with over-commit marked.

A pool over its budget (633 % in the old demo) used to draw a bar six times its cell's width
across the table. The fill is capped at the bar's width; past 100 % the bar turns red and the
text says by how much the pool is over, so over-commit shows clearly without breaking layout.

``{% pool_totals_rows accounts %}``: the dashboard's pool usage rows, one per pool.
"""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from scheduler.accounting import PoolAccount
from scheduler.templatetags.memory import gib

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


@register.simple_tag
def pool_totals_rows(accounts: Iterable[PoolAccount]) -> SafeString:
    """The dashboard's table rows (pool, bar, allocated, budget, free, GPUs) written here, not by a
    template loop: a page holds a row for every pool of every cluster (60 at the bench's 10
    clusters), and the template engine's seven lookups, filters and escapes a row were a third of
    the dashboard's rendering."""
    return format_html_join(
        "\n",
        "<tr><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (account.cluster_name, account.pool, usage_bar(account.committed_bytes, account.budget_bytes),
             gib(account.committed_bytes), gib(account.budget_bytes),
             gib(account.free_bytes), account.gpus_used)
            for account in accounts
        ),
    )  # fmt: skip
