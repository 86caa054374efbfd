"""Least outstanding requests over a model's ready replicas, with a passive health check.

Each replica counts the requests it is serving now; a request goes to the replica with the
fewest (ties: the one picked least recently), which follows uneven answer times (long generations)
better than round robin. A replica whose connection fails, or that answers ``eject_after`` server
errors (5xx) in a row (an engine out of memory or wedged, as Envoy's outlier detection counts
consecutive 5xx), is skipped for ``eject_seconds``; when
every replica is skipped the least recently failed one is tried anyway, so a model whose only
replica blipped is not refused for the whole period. The replica list of a route is rediscovered
every ``ttl`` seconds in the background (``inference_gateway.endpoints``); counts and failures of
replicas still listed are kept across refreshes.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from common.db_thread import CLUSTER_CALLS, in_thread
from inference_gateway.endpoints import discover
from inference_gateway.routes import Route

_ticks = itertools.count(1)  # 0 is "never picked"


@dataclass
class Replica:
    url: str
    outstanding: int = 0
    failed_until: float = 0.0
    last_pick: int = field(default=0)
    server_errors: int = 0  # 5xx answers in a row


@dataclass
class Pool:
    replicas: list[Replica]
    refreshed: float
    refresh: asyncio.Task | None = None


class NoReplica(Exception):
    """The model's Service lists no ready replica."""


class Balancer:
    def __init__(
        self,
        ttl: float,
        eject_seconds: float,
        discoverer: Callable[[Route], list[str]] = discover,
        eject_after: int = 3,
    ) -> None:
        self.ttl, self.eject_seconds, self.discoverer, self.eject_after = ttl, eject_seconds, discoverer, eject_after
        self.pools: dict[tuple, Pool] = {}

    async def _discover(self, route: Route) -> list[str]:
        return await in_thread(lambda: self.discoverer(route), CLUSTER_CALLS)

    def _update(self, pool: Pool, urls: list[str]) -> None:
        known = {replica.url: replica for replica in pool.replicas}
        pool.replicas = [known.get(url) or Replica(url) for url in urls]
        pool.refreshed = time.monotonic()

    async def replicas(self, route: Route) -> list[Replica]:
        pool = self.pools.get(route.key)
        if pool is None or pool.refreshed == 0.0:
            pool = self.pools.setdefault(route.key, Pool([], 0.0))
            self._update(pool, await self._discover(route))
        elif time.monotonic() - pool.refreshed > self.ttl and (pool.refresh is None or pool.refresh.done()):
            pool.refresh = asyncio.ensure_future(self._refresh(route, pool))
        return pool.replicas

    async def _refresh(self, route: Route, pool: Pool) -> None:
        self._update(pool, await self._discover(route))

    def forget(self, route: Route) -> None:
        """Rediscover the route's replicas on its next request (after a wake, for example)."""
        self.pools.pop(route.key, None)

    async def rediscover(self, route: Route, within: float) -> list[Replica]:
        """The route's replicas as read in the last ``within`` seconds, else read again now.
        Requests waiting for a model woken from zero (many at once) share the reads: one under way
        is awaited, not repeated, so the cluster is asked at most once per ``within`` per route."""
        pool = self.pools.setdefault(route.key, Pool([], 0.0))
        if pool.refresh is None or pool.refresh.done():
            if pool.refreshed and time.monotonic() - pool.refreshed < within:
                return pool.replicas
            pool.refresh = asyncio.ensure_future(self._refresh(route, pool))
        await asyncio.shield(pool.refresh)
        return pool.replicas

    def pick(self, replicas: list[Replica], excluded: set[str] = frozenset()) -> Replica:
        candidates = [replica for replica in replicas if replica.url not in excluded]
        if not candidates:
            raise NoReplica("no ready replica")
        now = time.monotonic()
        healthy = [replica for replica in candidates if replica.failed_until <= now]
        if healthy:
            chosen = min(healthy, key=lambda replica: (replica.outstanding, replica.last_pick))
        else:
            chosen = min(candidates, key=lambda replica: replica.failed_until)
        self.mark_picked(chosen)
        return chosen

    def mark_picked(self, replica: Replica) -> None:
        """The replica takes a request now (ties among equals go to the one picked least recently)."""
        replica.last_pick = next(_ticks)

    def failed(self, replica: Replica) -> None:
        replica.failed_until = time.monotonic() + self.eject_seconds

    def answered(self, replica: Replica, status: int) -> None:
        """An answer came back: a healthy one clears the replica's record, the ``eject_after``-th
        server error in a row skips it like a failed connection."""
        if status < 500:
            replica.failed_until, replica.server_errors = 0.0, 0
            return
        replica.server_errors += 1
        if replica.server_errors >= self.eject_after:
            replica.server_errors = 0
            self.failed(replica)
