"""Every chart of the portal: pygal SVG rendered on the server and inlined in the page.

One place holds what every chart must be, so no chart can miss it: no script linked from
pygal's CDN (``js=[]``; by default each chart pulls ``pygal-tooltips.min.js`` from
kozea.github.io, and a portal page fetches nothing from the internet), a width that follows the
page (``explicit_size=False``), and markup without an XML declaration, ready to inline.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.utils.safestring import SafeString, mark_safe
from pygal.graph.graph import Graph
from pygal.style import CleanStyle

ChartT = TypeVar("ChartT", bound=Graph)
SHARED = {"js": [], "explicit_size": False, "disable_xml_declaration": True, "width": 800, "style": CleanStyle}


def chart(kind: type[ChartT], **options: Any) -> ChartT:
    """A pygal chart of ``kind`` with the portal's shared settings (``options`` may restyle it)."""
    return kind(**{**SHARED, **options})


def render(graph: Graph) -> SafeString:
    """The chart as inline SVG; pygal escapes every label and value it draws, so it is safe HTML."""
    return mark_safe(graph.render(is_unicode=True))
