"""The mirrored kinds' JSON responses written by orjson, byte for byte as DRF's renderer writes them.

DRF's ``JSONRenderer`` runs the standard library's encoder with DRF's ``JSONEncoder`` (a Python
``default`` for dates and the like): 2.8 ms for a page of 50 objects, a seventh of the request's
Python time. orjson writes the same bytes in a third of it where both write the same thing, which
is everywhere but the cases below; each of them is left to DRF's renderer, so a response never
changes (tests/api/test_renderers.py compares the two over varied values):

- pretty-printed output (``Accept: application/json; indent=4``, the browsable API), and settings
  other than DRF's compact, non-ASCII-as-is defaults;
- what orjson refuses and ``json.dumps`` may not: integers beyond 64 bits, keys that are not
  strings (the standard encoder turns ``1`` into ``"1"``), nesting past 254 levels; and whatever
  DRF's encoder raises on (it runs as orjson's ``default``, for every type orjson is not told to
  write itself: dates and times, decimals, lazy strings, dataclasses...);
- floats whose text differs: from 1e-9 to 1e-4 ``repr`` writes a two-digit exponent (``1.5e-05``),
  orjson none or one digit (``0.000015``, ``2.5e-9``); a run ``0.0000`` or a one-digit exponent
  after a digit in orjson's output sends the page to DRF's renderer (a false alarm in a string
  only costs the time saved).

orjson writes NaN and infinity as ``null`` where DRF (``STRICT_JSON``) refuses them with an error:
this renderer serves only views whose data cannot hold them, the mirrored kinds' (their values
come from PostgreSQL's jsonb, which has no NaN or infinity, the request parsers refuse them, and
their integer, text, boolean and timestamp columns); other views keep DRF's renderer.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

# Every type orjson would write in its own way goes through ``default`` (:func:`_as_json_dumps`).
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
_SHORT_EXPONENT = re.compile(rb"e-[0-9](?![0-9])")
_SEPARATORS = b"\xe2\x80\xa8", b"\xe2\x80\xa9"  # U+2028, U+2029 in UTF-8
_SEPARATORS_LEAD = b"\xe2\x80"


def _floats_differ(rendered: bytes) -> bool:
    """Whether orjson may have written a float otherwise than ``repr`` (|x| in [1e-9, 1e-4)).

    The exponent's digit is searched for first, as a regular expression starting with a literal
    is searched for fast; a digit before it makes it a number's (a name such as "node-1" has none)."""
    if b"0.0000" in rendered:
        return True
    return any(rendered[found.start() - 1 : found.start()].isdigit() for found in _SHORT_EXPONENT.finditer(rendered))


def _as_json_dumps(value: Any, encoder: JSONEncoder) -> Any:
    """What the standard encoder writes for ``value``, as a type orjson writes the same way.

    Subclasses of the JSON types are written from what they hold, as ``json.dumps`` writes them
    (a serializer's ReturnDict and ReturnList, TextChoices and IntEnum members, named tuples): a
    dict from its ``items()``, a sequence from its storage, a str, int or float from its value.
    Anything else is DRF's encoder's: it raises where ``json.dumps`` would."""
    if isinstance(value, dict):
        return dict(value.items())
    if isinstance(value, list):
        return list(list.__iter__(value))
    if isinstance(value, tuple):
        return list(tuple.__iter__(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return encoder.default(value)


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer, with orjson doing the writing where its bytes are DRF's."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if (
            data is None
            or self.ensure_ascii
            or not self.compact
            or not self.strict
            or self.get_indent(accepted_media_type, renderer_context or {}) is not None
        ):
            return super().render(data, accepted_media_type, renderer_context)
        encoder = self.encoder_class()
        try:
            rendered = orjson.dumps(data, default=lambda value: _as_json_dumps(value, encoder), option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if _floats_differ(rendered):
            return super().render(data, accepted_media_type, renderer_context)
        # U+2000 to U+203F share the lead; its first byte is looked for first, as a single byte is
        # found by memchr (1 us over an API page's 74 kB, where the two-byte search took 67)
        if _SEPARATORS_LEAD[:1] in rendered and _SEPARATORS_LEAD in rendered:
            # DRF escapes the two line separators JavaScript strings cannot hold as they are.
            rendered = rendered.replace(_SEPARATORS[0], b"\\u2028").replace(_SEPARATORS[1], b"\\u2029")
        return rendered
