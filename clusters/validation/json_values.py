"""What a value must be to be stored as JSON in PostgreSQL and applied to a cluster.

Every write path parses its input differently (JSON, YAML, form fields), and the database and the
code after validation have limits of their own: PostgreSQL's jsonb refuses NUL characters and
text refuses unpaired surrogates, JSON has no NaN or infinity, object keys are strings, and the
merge, diff and display code recurses. :func:`json_value_errors` checks all of it in one pass, so
``validate_manifest`` refuses such values with the path that holds them instead of a 500 later.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from clusters.validation.limits import MAX_NESTING_DEPTH
from clusters.validation.schemas import MISSING, FieldError, dotted

# NUL (PostgreSQL text and jsonb cannot hold it) and lone UTF-16 surrogates (not encodable as UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _children(value: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(value, dict):
        return iter(value.items())
    if isinstance(value, list):
        return enumerate(value)
    return iter(())


def nesting_depth(value: Any) -> int:
    """How many arrays and objects are nested at the deepest point (0 for a scalar); iterative,
    so a value nested 100,000 levels deep is measured, not a RecursionError."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for _, child in _children(current))
    return deepest


def _scalar_rule(value: Any) -> str | None:
    if isinstance(value, str) and _UNSTORABLE.search(value):
        return "contains a NUL character or an unpaired surrogate, which cannot be stored"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number (JSON has no NaN or infinity)"
    if value is not None and not isinstance(value, str | int | float | bool | dict | list):
        return f"is a {type(value).__name__}, not a JSON value"
    return None


def json_value_errors(value: Any, path: list[Any] | None = None) -> list[FieldError]:
    """Every part of ``value`` that is not plain, storable JSON, by path; deeper than
    MAX_NESTING_DEPTH is one error at the level where the limit is crossed."""
    errors: list[FieldError] = []
    stack: list[tuple[list[Any], Any]] = [(path or [], value)]
    while stack:
        where, current = stack.pop()
        if isinstance(current, dict | list) and len(where) >= MAX_NESTING_DEPTH:
            errors.append(FieldError(dotted(where), MISSING, f"nests deeper than {MAX_NESTING_DEPTH} levels"))
            continue
        rule = _scalar_rule(current)
        if rule:
            errors.append(FieldError(dotted(where), current, rule))
        for key, child in _children(current):
            if isinstance(current, dict):
                if not isinstance(key, str):
                    errors.append(FieldError(dotted(where), key, "has a key that is not a string"))
                    continue
                if _UNSTORABLE.search(key):
                    errors.append(FieldError(dotted(where), key, "has a key with a NUL character or a lone surrogate"))
                    continue
            stack.append(([*where, key], child))
    return sorted(errors, key=lambda error: error.path)
