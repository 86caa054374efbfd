"""``{% usage_bar used total %}``: a fixed-width bar that never spills, with over-commit marked.

A pool over its budget (633 % in the old demo) used to draw a bar six times its cell's width
across the table. The fill is capped at the bar's width; past 100 % the bar turns red and the
text says by how much the pool is over, so over-commit shows clearly without breaking layout.

``{% pool_totals_rows accounts %}``: the dashboard's pool usage rows, one per pool.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from django import template
from django.utils.safestring import SafeString, mark_safe

from scheduler.admission.accounting import PoolAccount
from scheduler.templatetags.memory import gib

register = template.Library()


def _bar(used: int | None, total: int | None) -> str:
    """The bar's HTML. Written from numbers alone (a percentage, an amount of GiB), so there is
    nothing to escape: ``format_html``'s escaping of each argument was most of its cost."""
    if not total:
        return "no budget"
    percent = round(100 * (used or 0) / total)
    if percent <= 100:
        return f'<span class="bar" title="{percent} %"><span style="width: {percent}%"></span></span> {percent} %'
    over = f"{((used or 0) - total) / 1024**3:,.1f}"
    return (
        f'<span class="bar over" title="{percent} %"><span style="width: 100%"></span></span> '
        f'<strong class="over">{percent} %: over by {over} GiB</strong>'
    )


@register.simple_tag
def usage_bar(used: int | None, total: int | None) -> SafeString:
    return mark_safe(_bar(used, total))  # numbers only (see _bar)


NO_NODES = '<span class="no-nodes" title="no node of the cluster is in this pool: not capacity">no nodes</span>'


def pool_bar(account: PoolAccount) -> SafeString:
    """A pool's bar, or "no nodes" for a pool nothing can run in (``PoolAccount.without_nodes``): its
    declared memory and GPUs are shown as declared, never as a share of capacity it does not have."""
    return mark_safe(NO_NODES if account.without_nodes else _bar(account.committed_bytes, account.budget_bytes))


@register.simple_tag
def pool_totals_rows(accounts: Iterable[PoolAccount]) -> SafeString:
    """The dashboard's table rows (pool, bar, allocated, budget, free, GPUs) written here, not by a
    template loop: a page holds a row for every pool of every cluster (60 at the bench's 10
    clusters), and the template engine's seven lookups, filters and escapes a row were a third of
    the dashboard's rendering. Only the cluster's and the pool's names are text to escape (with
    the standard library's ``html.escape``, which Django's ``escape`` calls, without its lazy-string
    wrapper); the other cells are numbers and :func:`gib`'s amounts: ``format_html`` escaping
    all seven cells of 60 rows took 1.6 ms of the dashboard."""
    return mark_safe(  # the names escaped, the rest numbers
        "\n".join(
            f"<tr><td>{escape(account.cluster_name)}/{escape(account.pool)}</td>"
            f"<td>{pool_bar(account)}</td><td>{gib(account.committed_bytes)}</td>"
            f"<td>{gib(account.budget_bytes)}</td><td>{gib(account.free_bytes)}</td><td>{account.gpus_used}</td></tr>"
            for account in accounts
        )
    )
