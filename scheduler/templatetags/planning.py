"""The planning page's repeated rows, written here rather than by template loops.

``{% account_rows accounts %}``: a row per pool of the accounts table; ``{% node_rows pool.nodes %}``:
a row per node of a planned pool, with the models placed on it. The template engine resolved,
filtered and escaped each of their cells one by one: a third of the page's rendering for 5 pools
of a 10,000-model cluster. The rows are the same HTML, escaped the same way (``format_html``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from scheduler.admission.accounting import PoolAccount
from scheduler.templatetags.memory import gib
from scheduler.templatetags.usage import pool_bar

register = template.Library()


@register.simple_tag
def account_rows(accounts: Iterable[PoolAccount]) -> SafeString:
    """Each pool's books and its biggest holders (how many more, and how many of other teams)."""
    return format_html_join(
        "",
        "\n    <tr><td>{}/{}</td>\n        <td>{}</td>\n        <td>{}</td><td>{}</td>\n        <td>{}</td><td>{}</td>"
        "\n        <td>{}</td><td>{}</td><td>{}</td>\n        <td>{}</td></tr>\n  ",
        (
            (account.cluster_name, account.pool, pool_bar(account),
             gib(account.budget_bytes), gib(account.allocated_bytes), gib(account.reserved_bytes),
             gib(account.observed_bytes), gib(account.free_bytes), account.gpus_used,
             gib(account.rightsizing_savings_bytes), _holders(account))
            for account in accounts
        ),
    )  # fmt: skip


def _holders(account: PoolAccount) -> SafeString:
    holders = format_html_join(
        ", ",
        "{}/{} ({}{})",
        (
            (holder.namespace, holder.name, gib(holder.memory_bytes),
             f", {holder.gpu_count} GPU{'' if holder.gpu_count == 1 else 's'}" if holder.gpu_count else "")
            for holder in account.holders
        ),
    )  # fmt: skip
    if not account.holders and not account.other_team_holders:
        holders = SafeString("none")
    if account.holders_total > len(account.holders):
        holders += format_html(" ({} of {} shown)", len(account.holders), account.holders_total)
    if account.other_team_holders:
        holders += format_html("{}{} model(s) of other teams", "; " if account.holders else "",
                               account.other_team_holders)  # fmt: skip
    return holders


@register.simple_tag
def node_rows(nodes: Iterable[dict[str, Any]]) -> SafeString:
    """Each node's memory and GPUs, and the models placed on it (the plan's first ones, and how many more)."""
    return format_html_join(
        "",
        "\n      <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "\n          <td>{}{}</td>\n          <td>{}{}</td></tr>\n    ",
        (
            (node["name"], gib(node["capacity_bytes"]), gib(node["used_bytes"]), gib(node["free_bytes"]),
             node["used_gpus"], "" if node["gpus"] is None else f" / {node['gpus']}",
             format_html_join(", ", "{} <small>({})</small>", ((m["model"], m["origin"]) for m in node["models"])),
             format_html(" and {} more", node["models_more"]) if node.get("models_more") else "")
            for node in nodes
        ),
    )  # fmt: skip
