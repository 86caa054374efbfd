"""YAML from people and scripts, read as the JSON it stands for, with bounded work.

Kubernetes reads YAML by converting it to JSON; a manifest is JSON data. PyYAML's ``safe_load``
also makes dates, byte strings, sets, NaN and non-string keys, which no later step can store or
send, and it expands aliases without limit (a few hundred bytes of ``&a [*b, *b, ...]`` become
gigabytes) and recurses once per nesting level (a deep enough document is a RecursionError). This
loader refuses each of those with the line and column, so every YAML entry point (``/api/apply/``,
the portal's YAML fields, the admin) answers a 400 that says what to change.

It is PyYAML's pure-Python loader on purpose: the libyaml composer recurses in C and crashes the
process on a document nested 100,000 levels deep instead of raising.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

from clusters.validation.limits import MAX_ALIAS_EXPANSION, MAX_NESTING_DEPTH

STR_TAG = "tag:yaml.org,2002:str"
WEIGHT = "expanded_weight"  # set on each composed node: its size with every alias in it expanded


def _weight(node: Node) -> int:
    """Characters of scalars plus one per node, counting aliased nodes each time they appear."""
    if isinstance(node, ScalarNode):
        return len(node.value) + 1
    children = [child for pair in node.value for child in pair] if isinstance(node, MappingNode) else node.value
    return 1 + sum(getattr(child, WEIGHT) for child in children)


class JSONYAMLLoader(yaml.SafeLoader):
    """SafeLoader limited to JSON's types, MAX_NESTING_DEPTH levels and MAX_ALIAS_EXPANSION of aliases."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.depth = 0
        self.alias_expansion = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            if not hasattr(node, WEIGHT):  # still being composed: the alias is inside its own anchor
                raise ComposerError(
                    None,
                    None,
                    "found an alias inside its own anchor (a recursive value, which JSON has not)",
                    event.start_mark,
                )
            self.alias_expansion += getattr(node, WEIGHT)
            if self.alias_expansion > MAX_ALIAS_EXPANSION:
                raise ComposerError(
                    None,
                    None,
                    f"aliases expand the document by more than {MAX_ALIAS_EXPANSION} characters (an alias bomb?)",
                    event.start_mark,
                )
            return node
        self.depth += 1
        if self.depth > MAX_NESTING_DEPTH and self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            raise ComposerError(
                None, None, f"nests deeper than {MAX_NESTING_DEPTH} levels", self.peek_event().start_mark
            )
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        setattr(node, WEIGHT, _weight(node))
        return node

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            self.flatten_mapping(node)
            for key_node, _ in node.value:
                if key_node.tag != STR_TAG:
                    tag = key_node.tag.rsplit(":", 1)[-1]
                    found = (
                        f"the key {key_node.value!r} ({tag}); keys must be strings: quote it"
                        if isinstance(key_node, ScalarNode)
                        else "a collection as a key; keys must be strings"
                    )
                    raise ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found {found}", key_node.start_mark
                    )
        return super().construct_mapping(node, deep)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise ConstructorError(
                None, None, f"found {node.value!r}, which is not a finite number (JSON has none)", node.start_mark
            )
        return value

    def refuse_non_json(self, node: Node) -> None:
        tag = node.tag.rsplit(":", 1)[-1]
        hint = "; quote it to keep it as a string" if isinstance(node, ScalarNode) else ""
        raise ConstructorError(None, None, f"found a {tag} value, which JSON has not{hint}", node.start_mark)


JSONYAMLLoader.add_constructor("tag:yaml.org,2002:float", JSONYAMLLoader.construct_yaml_float)
for _tag in ("timestamp", "binary", "set", "omap", "pairs"):
    JSONYAMLLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", JSONYAMLLoader.refuse_non_json)


def _as_tree(value: Any, loader: JSONYAMLLoader) -> Any:
    """Aliases make shared objects; JSON values are trees, so code that edits one part edits only it."""
    return json.loads(json.dumps(value)) if loader.alias_expansion else value


def load(text: str) -> Any:
    """One YAML document as JSON data; yaml.YAMLError says what and where."""
    loader = JSONYAMLLoader(text)
    try:
        return _as_tree(loader.get_single_data(), loader)
    finally:
        loader.dispose()


def load_all(text: str) -> list[Any]:
    """Every non-empty document of a stream; aliases are limited across the whole stream."""
    loader = JSONYAMLLoader(text)
    try:
        documents = []
        while loader.check_data():
            document = loader.get_data()
            if document is not None:
                documents.append(document)
        return _as_tree(documents, loader)
    finally:
        loader.dispose()


def describe(error: yaml.YAMLError) -> str:
    """`` at line 3, column 7: found a timestamp value ...``: where and what, to follow "invalid YAML"."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{where}: {getattr(error, 'problem', None) or error}"
