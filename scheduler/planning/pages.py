"""A plan's long lists in pages: the answer carries the first entries of each and a count; the API
pages the rest with a cursor.

A plan over a cluster of 10,000 models lists every model placed on each node, every running
model that no longer fits, the idle models and right-sizings of each pool: megabytes that no page
shows and few clients read. So the answer (:class:`Answer`) holds each of those lists
(:func:`long_lists`) as :class:`Entries`, which knows its length and builds an entry only when it
is read: :func:`first_page` builds each list's first ``limit`` entries and says, for each one cut,
its ``total`` and a ``cursor`` for the next entries (``plan["pages"]``; the cut list's owner gets
``<list>_more``, how many were left out); every other figure of the plan is whole.
:func:`next_page` answers a cursor: the same request planned again, the list's entries from the
cursor's offset. Building every entry to show twenty and cut the rest was half of a what-if's
time on a 10,000-model cluster.

A plan is computed, not stored, so the cursor carries the version of what the plan was computed
from (:attr:`scheduler.planning.planner.Plan.version`): when the cluster changed between two pages the
version differs and the request is refused (:class:`PlanChanged`) rather than answered with
entries that skip or repeat.
"""

from __future__ import annotations

import base64
import binascii
import heapq
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, overload

import orjson

from clusters.validation.schemas import FieldError, ManifestInvalid

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
PAGE_LIMIT = 20
"""Entries of each list the planning page shows."""


class PlanChanged(Exception):
    """The plan a cursor came from is no longer the plan computed now."""


def _same(element: Any) -> Any:
    return element


class Entries(Sequence[Any]):
    """One long list of a plan: its length, and its entries built (``build`` of each element of
    ``source``) only where they are read, a page's or a chart's."""

    __slots__ = ("build", "source")

    def __init__(self, source: Sequence[Any], build: Callable[[Any], Any] = _same) -> None:
        self.source = source
        self.build = build

    def __len__(self) -> int:
        return len(self.source)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self.build(element) for element in self.source[index]]
        return self.build(self.source[index])

    def then(self, change: Callable[[Any], Any]) -> Entries:
        """These entries, each passed through ``change`` once built (a redaction, say)."""
        build = self.build
        return Entries(self.source, lambda element: change(build(element)))


class Sorted(Sequence[str]):
    """Strings in order, sorted only as far as they are read: a first page of a few of 8,500 is the
    heap's smallest few (a third of a sort's time); any other read sorts them all, once."""

    __slots__ = ("_items", "_sorted")

    def __init__(self, items: Collection[str]) -> None:
        self._items = items
        self._sorted: list[str] | None = None

    def __getitem__(self, index: Any) -> Any:  # an int, or a slice of them
        first = isinstance(index, slice) and not index.start and index.step is None and index.stop is not None
        if self._sorted is None and first and 0 <= index.stop < len(self._items):
            return heapq.nsmallest(index.stop, self._items)
        if self._sorted is None:
            self._sorted = sorted(self._items)
        return self._sorted[index]

    def __len__(self) -> int:
        return len(self._items)


class Answer(dict[str, Any]):
    """A plan as the API answers it, its long lists :class:`Entries`, with the version of what it
    was computed from (:attr:`scheduler.planning.planner.Plan.version`), which its cursors carry."""

    def __init__(self, body: dict[str, Any], version: str) -> None:
        super().__init__(body)
        self.version = version


def long_lists(plan: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(path, owner, key) of every list of the plan that grows with the cluster's models (of an
    :class:`Answer`, each an :class:`Entries`; of a page, the list answered).

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


def _cursor(path: str, offset: int, version: str) -> str:
    raw = orjson.dumps({"list": path, "offset": offset, "plan": version})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_cursor(cursor: str) -> tuple[str, int, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        path, offset, version = data["list"], data["offset"], data["plan"]
        if not (isinstance(path, str) and isinstance(offset, int) and offset >= 0 and isinstance(version, str)):
            raise ValueError(cursor)
    except (ValueError, TypeError, KeyError, binascii.Error, orjson.JSONDecodeError):
        raise ManifestInvalid([FieldError("cursor", cursor, "is not a cursor this API gave")]) from None
    return path, offset, version


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


def first_page(plan: Answer, limit: int) -> Answer:
    """The plan with each long list's first ``limit`` entries built (in place; returned)."""
    pages = []
    for path, owner, key in long_lists(plan):
        entries: Entries = owner[key]
        owner[key] = entries[:limit]
        if len(entries) > limit:
            owner[f"{key}_more"] = len(entries) - limit
            pages.append({"list": path, "total": len(entries), "cursor": _cursor(path, limit, plan.version)})
    plan["pages"] = pages
    return plan


def next_page(plan: Answer, cursor: str, limit: int) -> dict[str, Any]:
    """The entries of the cursor's list from its offset, and the cursor of the next ones (None at the end)."""
    path, offset, version = _read_cursor(cursor)
    if plan.version != version:
        raise PlanChanged(path)
    found = next(((owner, key) for name, owner, key in long_lists(plan) if name == path), None)
    if found is None:
        raise ManifestInvalid([FieldError("cursor", cursor, f"names list {path!r}, which this plan does not have")])
    entries: Entries = found[0][found[1]]
    end = offset + limit
    return {
        "list": path,
        "offset": offset,
        "total": len(entries),
        "items": entries[offset:end],
        "cursor": _cursor(path, end, version) if end < len(entries) else None,
    }
