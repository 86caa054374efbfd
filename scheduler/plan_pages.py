"""A plan's long lists in pages: the answer carries the first entries of each and a count; the API
pages the rest with a cursor.

A plan over a cluster of 10,000 models lists every model placed on each node, every running
model that no longer fits, the idle models and right-sizings of each pool: megabytes that no page
shows and few clients read. :func:`first_page` cuts each of those lists (:func:`long_lists`) to its
first ``limit`` entries and says, for each one cut, its ``total`` and a ``cursor`` for the next
entries (``plan["pages"]``; the cut list's owner gets ``<list>_more``, how many were left out);
every other figure of the plan is unchanged. :func:`next_page` answers a cursor: the same
request planned again, the list's entries from the cursor's offset.

A plan is computed, not stored, so the cursor carries a digest of the whole (already redacted)
answer it came from: when the cluster changed between two pages the digest differs and the
request is refused (:class:`PlanChanged`) rather than answered with entries that skip or repeat.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterator
from typing import Any

import orjson

from clusters.validation.schemas import FieldError, ManifestInvalid

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
PAGE_LIMIT = 20
"""Entries of each list the planning page shows."""


class PlanChanged(Exception):
    """The plan a cursor came from is no longer the plan computed now."""


def long_lists(plan: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(path, owner, key) of every list of the plan that grows with the cluster's models.

    Paths name lists by position (``pools/2/nodes/0/models``), which a plan keeps from one
    computation to the next of the same request on the same rows.
    """
    yield "overcommitted", plan, "overcommitted"
    yield "unknown_pool", plan, "unknown_pool"
    for index, pool in enumerate(plan["pools"]):
        yield f"pools/{index}/unplaced", pool, "unplaced"
        for number, node in enumerate(pool["nodes"]):
            yield f"pools/{index}/nodes/{number}/models", node, "models"
        suggestions = pool.get("suggestions")
        for key in ("idle", "rightsizing", "scale_to_zero") if suggestions else ():
            yield f"pools/{index}/suggestions/{key}", suggestions, key


def digest(plan: dict[str, Any]) -> str:
    return hashlib.blake2b(orjson.dumps(plan, option=orjson.OPT_SORT_KEYS), digest_size=12).hexdigest()


def _cursor(path: str, offset: int, plan_digest: str) -> str:
    raw = orjson.dumps({"list": path, "offset": offset, "plan": plan_digest})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_cursor(cursor: str) -> tuple[str, int, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        path, offset, plan_digest = data["list"], data["offset"], data["plan"]
        if not (isinstance(path, str) and isinstance(offset, int) and offset >= 0 and isinstance(plan_digest, str)):
            raise ValueError(cursor)
    except (ValueError, TypeError, KeyError, binascii.Error, orjson.JSONDecodeError):
        raise ManifestInvalid([FieldError("cursor", cursor, "is not a cursor this API gave")]) from None
    return path, offset, plan_digest


def parse_limit(value: str | None, default: int = DEFAULT_LIMIT) -> int:
    """``limit`` from a query string: an integer from 1 to MAX_LIMIT, else a ManifestInvalid naming it."""
    if value is None or value == "":
        return default
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ManifestInvalid([FieldError("limit", value, f"must be an integer from 1 to {MAX_LIMIT}")])
    return limit


def first_page(plan: dict[str, Any], limit: int) -> dict[str, Any]:
    """The plan with each long list cut to its first ``limit`` entries (in place; returned)."""
    plan_digest = digest(plan)
    pages = []
    for path, owner, key in long_lists(plan):
        entries = owner[key]
        if len(entries) > limit:
            owner[key] = entries[:limit]
            owner[f"{key}_more"] = len(entries) - limit
            pages.append({"list": path, "total": len(entries), "cursor": _cursor(path, limit, plan_digest)})
    plan["pages"] = pages
    return plan


def next_page(plan: dict[str, Any], cursor: str, limit: int) -> dict[str, Any]:
    """The entries of the cursor's list from its offset, and the cursor of the next ones (None at the end)."""
    path, offset, plan_digest = _read_cursor(cursor)
    if digest(plan) != plan_digest:
        raise PlanChanged(path)
    found = next(((owner, key) for name, owner, key in long_lists(plan) if name == path), None)
    if found is None:
        raise ManifestInvalid([FieldError("cursor", cursor, f"names list {path!r}, which this plan does not have")])
    entries = found[0][found[1]]
    end = offset + limit
    return {
        "list": path,
        "offset": offset,
        "total": len(entries),
        "items": entries[offset:end],
        "cursor": _cursor(path, end, plan_digest) if end < len(entries) else None,
    }
