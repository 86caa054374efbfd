"""scheduler.escaping's format_html and format_html_join give Django's HTML, byte for byte, and
mark it safe as Django does, whatever they are given."""

from __future__ import annotations

from typing import Any

from django.utils import html as django_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy

from scheduler import escaping


class Markup:
    """A third party's pre-escaped value (the ``__html__`` convention)."""

    def __html__(self) -> str:
        return "<b>kept</b>"


VALUES: list[Any] = [
    "plain", "a<b>&\"c'd", "", " spaced ", "ünï©ødé → ≥", 0, 42, -7, 3.5, None, True,
    mark_safe("<i>safe</i>"), SafeString("&amp;"), gettext_lazy("<lazy> & 'text'"), Markup(),
    ["list", "<x>"], {"k": "<v>"},
]  # fmt: skip


def test_format_html_escapes_every_value_as_django_does():
    for value in VALUES:
        for template in ("{}", "<td>{}</td>", "{} <small>({})</small>"):
            args = (value,) * template.count("{}")
            ours, theirs = escaping.format_html(template, *args), django_html.format_html(template, *args)
            assert (ours, type(ours)) == (theirs, type(theirs)) and isinstance(ours, SafeString), value


def test_format_html_join_joins_as_django_does():
    rows = [(a, b) for a in VALUES for b in VALUES[:5]]
    for sep in ("", ", ", "<br>", mark_safe("<br>"), "&"):
        for chosen in (rows, rows[:1], []):
            ours = escaping.format_html_join(sep, "<li>{} — {}</li>", iter(chosen))
            theirs = django_html.format_html_join(sep, "<li>{} — {}</li>", iter(chosen))
            assert (ours, type(ours)) == (theirs, type(theirs)), (sep, len(chosen))
