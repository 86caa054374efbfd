"""``{% result_rows cl %}``: Django's ``{% result_list cl %}`` (the changelist's table) with its rows
rendered by clusters.web.admin_rows, in ``kube_object_change_list_results.html``: Django's
``change_list_results.html`` whose loop over the rows is ``{% result_table_rows results %}``, one
string for the hundred rows where the loop rendered five nodes for each (tests/portal/
test_admin_lists.py compares the templates and the pages)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.contrib.admin.templatetags.base import InclusionAdminNode
from django.template.base import Parser, Token, render_value_in_context
from django.template.context import Context
from django.utils.safestring import SafeString

from clusters.web.admin_rows import result_list

register = template.Library()


@register.tag(name="result_rows")
def result_rows_tag(parser: Parser, token: Token) -> InclusionAdminNode:
    return InclusionAdminNode(parser, token, func=result_list, template_name="kube_object_change_list_results.html",
                              takes_context=False)  # fmt: skip


# the body of change_list_results.html's loop, for a row with a form (an editable list's)
ROW = """
{% if result.form and result.form.non_field_errors %}
    <tr><td colspan="{{ result|length }}">{{ result.form.non_field_errors }}</td></tr>
{% endif %}
<tr>{% for item in result %}{{ item }}{% endfor %}</tr>
"""


@register.simple_tag(takes_context=True)
def result_table_rows(context: Context, results: Iterable[Any]) -> SafeString:
    """The rows as the loop writes them: a row without a form is its items, each as ``{{ item }}``."""
    body = None
    written = []
    for result in results:
        if getattr(result, "form", None):
            body = body or context.template.engine.from_string(ROW)
            with context.push(result=result):
                written.append(body.render(context))
        else:
            written.append(f"\n\n<tr>{''.join([render_value_in_context(item, context) for item in result])}</tr>\n")
    return SafeString("".join(written))
