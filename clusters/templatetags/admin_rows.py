"""``{% result_rows cl %}``: Django's ``{% result_list cl %}`` (the changelist's table, from the same
overridable ``change_list_results.html``) with its rows rendered by clusters.web.admin_rows."""

from __future__ import annotations

from django import template
from django.contrib.admin.templatetags.base import InclusionAdminNode
from django.template.base import Parser, Token

from clusters.web.admin_rows import result_list

register = template.Library()


@register.tag(name="result_rows")
def result_rows_tag(parser: Parser, token: Token) -> InclusionAdminNode:
    return InclusionAdminNode(parser, token, func=result_list, template_name="change_list_results.html",
                              takes_context=False)  # fmt: skip
