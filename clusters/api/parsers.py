"""YAML request bodies, so ``kubectl``-style multi-document files can be posted as they are."""

from __future__ import annotations

import yaml
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser


class YAMLParser(BaseParser):
    """Parses one or more YAML documents into a list (empty documents dropped)."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return [doc for doc in yaml.safe_load_all(stream.read().decode("utf-8")) if doc is not None]
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            raise ParseError(f"invalid YAML: {error}") from None


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class PlainTextYAMLParser(YAMLParser):
    media_type = "text/plain"
