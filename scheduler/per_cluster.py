"""What a process keeps per cluster between plans (:mod:`scheduler.holdings_cache`'s holdings,
:mod:`scheduler.planning.baseline`'s placements): a few clusters' worth, the least recently used dropped
first, shared by the process's threads."""

from __future__ import annotations

from typing import TypeVar

from common.lru import LeastRecentlyUsed

KEPT_CLUSTERS = 8
"""Clusters a process keeps: 12,000 models' holdings take about 8 MB, their placement 2.5 MB more,
and the running ones' lists and pods by pool (once a plan asked for them) 2.5 MB more."""

Kept = TypeVar("Kept")


class PerCluster(LeastRecentlyUsed[int, Kept]):
    """At most :data:`KEPT_CLUSTERS` clusters' values, by cluster id."""

    def __init__(self) -> None:
        super().__init__(KEPT_CLUSTERS)
