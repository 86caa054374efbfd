"""What a process keeps per cluster between plans (:mod:`scheduler.holdings_cache`'s holdings,
:mod:`scheduler.baseline`'s placements): a few clusters' worth, the least recently used dropped
first, shared by the process's threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

KEPT_CLUSTERS = 8
"""Clusters a process keeps: 12,000 models' holdings take about 8 MB, their placement 2.5 MB more."""

Kept = TypeVar("Kept")


class PerCluster(Generic[Kept]):
    """At most :data:`KEPT_CLUSTERS` clusters' values, by cluster id, safe to share between threads."""

    def __init__(self) -> None:
        self._kept: OrderedDict[int, Kept] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, cluster_id: int) -> Kept | None:
        """The cluster's value (now the most recently used), else None."""
        with self._lock:
            kept = self._kept.get(cluster_id)
            if kept is not None:
                self._kept.move_to_end(cluster_id)
            return kept

    def put(self, cluster_id: int, value: Kept) -> None:
        """Keep ``value`` for the cluster, dropping the least recently used beyond :data:`KEPT_CLUSTERS`."""
        with self._lock:
            self._kept[cluster_id] = value
            self._kept.move_to_end(cluster_id)
            while len(self._kept) > KEPT_CLUSTERS:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
