"""No error quotes a regular expression: every ``pattern`` of every CRD has its words
(clusters.pattern_words), and a value breaking it gets them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from clusters.validation.pattern_words import PATTERN_WORDS, QUANTITY


def patterns(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return found.union(*(patterns(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(patterns(value) for value in node))
    return set()


def test_every_crd_pattern_is_worded_with_an_example():
    every = set().union(*(patterns(yaml.safe_load(path.read_text())) for path in Path(settings.CRD_DIR).glob("*.yaml")))
    assert QUANTITY in every and len(every) >= 10
    assert sorted(every - PATTERN_WORDS.keys()) == []
    assert all("such as" in words or "start with" in words for words in PATTERN_WORDS.values())
