"""A bounded, thread-safe map that drops its least recently used entry first: what a process keeps
between requests (the scheduler's holdings and placements per cluster, the admin's sidebars)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class LeastRecentlyUsed(Generic[Key, Value]):
    """At most ``size`` entries, safe to share between threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[Key, Value] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> Value | None:
        """The key's value (now the most recently used), else None; a TypeError for an unhashable key."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
            return kept

    def put(self, key: Key, value: Value) -> None:
        """Keep ``value``, dropping the least recently used entries beyond ``size``."""
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
