"""Every chart of the portal: pygal SVG rendered on the server and inlined in the page.

One place holds what every chart must be, so no chart can miss it: no script linked from
pygal's CDN (``js=[]``; by default each chart pulls ``pygal-tooltips.min.js`` from
kozea.github.io, and a portal page fetches nothing from the internet), a width that follows the
page (``explicit_size=False``), and markup without an XML declaration, ready to inline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from django.core.cache import cache
from django.utils.safestring import SafeString, mark_safe
from pygal.graph.graph import Graph
from pygal.style import CleanStyle

from common.lru import LeastRecentlyUsed

ChartT = TypeVar("ChartT", bound=Graph)
SHARED = {"js": [], "explicit_size": False, "disable_xml_declaration": True, "width": 800, "style": CleanStyle}


def chart(kind: type[ChartT], **options: Any) -> ChartT:
    """A pygal chart of ``kind`` with the portal's shared settings (``options`` may restyle it)."""
    return kind(**{**SHARED, **options})


def render(graph: Graph) -> SafeString:
    """The chart as inline SVG; pygal escapes every label and value it draws, so it is safe HTML."""
    return mark_safe(graph.render(is_unicode=True))


CHART_CACHE_SECONDS = 600
# The drawings this process used last, in front of the shared cache: a dashboard's chart is 120 kB
# of SVG, which the cache unpickled (and Redis sent) on every load, 0.4 ms of the page's CPU.
KEPT_DRAWINGS = LeastRecentlyUsed[str, str](16)


def drawn_once(namespace: str, content: Any, draw: Callable[[], Graph]) -> SafeString:
    """The chart ``draw`` makes, as inline SVG, cached by ``content`` (everything it is drawn
    from, as JSON): pygal takes 100-200 ms a chart, and the same figures always draw the same
    picture, so any changed figure is a new key (no invalidation to forget, in the shared cache or
    in :data:`KEPT_DRAWINGS`)."""
    key = f"{namespace}:chart:{hashlib.blake2b(orjson.dumps(content), digest_size=16).hexdigest()}"
    svg = KEPT_DRAWINGS.get(key) or cache.get(key)
    if svg is None:
        svg = str(render(draw()))
        cache.set(key, svg, CHART_CACHE_SECONDS)
    KEPT_DRAWINGS.put(key, svg)
    return mark_safe(svg)  # pygal escaped every label and value when it drew them
