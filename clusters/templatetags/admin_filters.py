"""``{% filter_choices choices %}``: the choices of a changelist filter written as Django's
``admin/filter.html`` loop writes them, for a fraction of its CPU.

The loop renders four template nodes per choice; the namespace filter of a mirrored kind has a
hundred choices, and rendering them took about a tenth of a changelist page's CPU. Here a choice
Django's filters make (a dict with a plain ``display``, ``query_string`` and ``selected``) is one
string, its values converted and escaped as the template does (``render_value_in_context``); any
other choice is rendered by the loop's own body. ``templates/admin/kube_object_filter.html`` is
Django's template with the loop replaced by this tag (tests/portal/test_admin_lists.py compares
both, and the pages they write).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from django import template
from django.template.base import render_value_in_context
from django.template.context import Context
from django.utils.encoding import iri_to_uri
from django.utils.safestring import SafeData, SafeString, mark_safe

register = template.Library()

# the body of admin/filter.html's loop, for choices the fast path does not cover
CHOICE = """
    <li{% if choice.selected %} class="selected"{% endif %}>
    <a href="{{ choice.query_string|iriencode }}">{{ choice.display }}</a></li>
  """
_KEYS = ("selected", "query_string", "display")


def _shown(value: Any, context: Context) -> str:
    """``{{ value }}``: ``render_value_in_context``, which for plain text (neither localized nor
    converted) comes to ``escape`` where the page is autoescaped."""
    if type(value) is str and context.autoescape:
        return html.escape(value)  # django.utils.html.escape, less its SafeString
    return render_value_in_context(value, context)


@register.simple_tag(takes_context=True)
def filter_choices(context: Context, choices: Iterable[Any]) -> SafeString:
    body = None
    written = []
    for choice in choices:
        if type(choice) is dict and all(key in choice and not callable(choice[key]) for key in _KEYS):
            query = choice["query_string"]
            link = iri_to_uri(str(query))  # the ``iriencode`` filter
            link = _shown(mark_safe(link) if isinstance(query, SafeData) else link, context)
            selected = ' class="selected"' if choice["selected"] else ""
            shown = _shown(choice["display"], context)
            written.append(f'\n    <li{selected}>\n    <a href="{link}">{shown}</a></li>\n  ')
        else:
            body = body or context.template.engine.from_string(CHOICE)
            with context.push(choice=choice):
                written.append(body.render(context))
    return SafeString("".join(written))
