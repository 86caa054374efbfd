"""Every served model, by the name clients send as ``model``, refreshed every few seconds.

One query per serving kind builds the whole table, at most once per ``catalog_ttl``; requests
read it from memory. Staleness is bounded by the TTL (2 s by default): a model created in the
portal answers within that, a deleted one stops answering within that. Readiness is a hint only
(the wake path reads the live Deployment), so a few seconds' lag never routes wrongly for long.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable

from clusters.models import SyncState
from inference_gateway.db_thread import read
from inference_gateway.routes import ROUTE_BUILDERS, Route, route_for

GONE = (SyncState.DELETING, SyncState.DELETED_IN_CLUSTER)


def load_routes() -> dict[str, list[Route]]:
    """Routes by model name, each name's routes in a stable order (cluster, namespace, object name)."""
    table: dict[str, list[Route]] = defaultdict(list)
    for model in ROUTE_BUILDERS:
        for row in model.objects.exclude(sync_state__in=GONE).select_related("cluster").order_by(
            "cluster_id", "namespace", "name"
        ):
            route = route_for(row)
            if route.model:
                table[route.model].append(route)
    return dict(table)


class Catalog:
    """The route table, reloaded when older than ``ttl``; one reload at a time, readers never wait
    for it once a table exists."""

    def __init__(self, ttl: float, loader: Callable[[], dict[str, list[Route]]] = load_routes) -> None:
        self.ttl, self.loader = ttl, loader
        self.table: dict[str, list[Route]] | None = None
        self.loaded_at = 0.0
        self._reload: asyncio.Task | None = None

    async def routes(self) -> dict[str, list[Route]]:
        if self.table is None or time.monotonic() - self.loaded_at > self.ttl:
            if self._reload is None or self._reload.done():
                self._reload = asyncio.ensure_future(self._load())
            if self.table is None:
                await asyncio.shield(self._reload)
        return self.table or {}

    def expire(self) -> None:
        """Reload on the next read (a wake changed a model's readiness)."""
        self.loaded_at = 0.0

    async def _load(self) -> None:
        started = time.monotonic()
        self.table = await read(self.loader)
        self.loaded_at = started

    async def find(self, model: str, visible: Callable[[int, str], bool]) -> Route | None:
        """The first route of ``model`` in a namespace the caller may see; None otherwise."""
        for route in (await self.routes()).get(model, ()):
            if visible(route.cluster_id, route.namespace):
                return route
        return None

    async def visible(self, visible: Callable[[int, str], bool]) -> list[Route]:
        """One route per model name the caller may see."""
        found = []
        for routes in (await self.routes()).values():
            route = next((route for route in routes if visible(route.cluster_id, route.namespace)), None)
            if route is not None:
                found.append(route)
        return sorted(found, key=lambda route: route.model)
