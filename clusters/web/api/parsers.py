"""Request body parsers: JSON and YAML read as JSON data, with the work per request bounded.

``kubectl``-style multi-document YAML files can be posted as they are. Both parsers refuse, with
a 400 instead of a 500, what Python would otherwise fail on deep inside the view: values nested
past the limit (the standard ``json`` module raises RecursionError around 1,000 levels, and the
code after it recurses too) and numbers JSON cannot hold (``1e999`` parses as infinity).
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml
from django.conf import settings
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import BaseParser

from clusters.validation import yaml_input
from clusters.validation.json_values import nesting_depth
from clusters.validation.limits import MAX_NESTING_DEPTH

# A body may wrap manifests in a list or a ``kind: List`` (two levels) beyond a manifest's own limit.
MAX_BODY_DEPTH = MAX_NESTING_DEPTH + 2


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a double (JSON numbers are finite)")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


class JSONParser(BaseParser):
    """Strict JSON: no NaN/Infinity, finite numbers only, at most MAX_BODY_DEPTH levels."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.loads(stream.read().decode(encoding), parse_constant=_no_constant, parse_float=_finite)
        except RecursionError:
            raise ParseError(f"JSON parse error - nests deeper than {MAX_BODY_DEPTH} levels") from None
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ParseError(f"JSON parse error - {error}") from None
        if nesting_depth(data) > MAX_BODY_DEPTH:
            raise ParseError(f"JSON parse error - nests deeper than {MAX_BODY_DEPTH} levels")
        return data


class YAMLParser(BaseParser):
    """Parses one or more YAML documents into a list (empty documents dropped)."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None) -> list[Any]:
        try:
            return yaml_input.load_all(stream.read().decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ParseError(f"invalid YAML: {error}") from None
        except yaml.YAMLError as error:
            raise ParseError(f"invalid YAML{yaml_input.describe(error)}") from None


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class PlainTextYAMLParser(YAMLParser):
    media_type = "text/plain"


class MergePatchJSONParser(JSONParser):
    """``PATCH`` with ``Content-Type: application/merge-patch+json`` (RFC 7396), as ``kubectl patch
    --type merge`` sends it: a PATCH body already is a JSON merge patch; other methods take plain JSON."""

    media_type = "application/merge-patch+json"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        request = (parser_context or {}).get("request")
        if request is not None and request.method != "PATCH":
            raise UnsupportedMediaType(
                media_type, f"{self.media_type} is for PATCH; {request.method} takes application/json"
            )
        return super().parse(stream, media_type, parser_context)
