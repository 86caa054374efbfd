"""Every served model, by its gateway id (``namespace/modelName``) and by its bare model name.

One query per serving kind builds the whole table; requests read it from memory. The table is
reloaded when a catalog change is published (``inference_gateway.notices``: a model created,
renamed, moved or deleted is routable, or gone, for the next request) and, as a safety net, when it
is older than ``ttl``. Readiness is a hint only (the wake path reads the live Deployment).

**What a client's ``model`` resolves to** (:meth:`Catalog.find`): a gateway id the caller may see;
else a bare model name, when exactly one id the caller may see carries it; several -> an
ambiguity error listing them (only ids the caller sees), never the first in sort order. A
``model`` that is some route's id is only ever that id, even for a caller who may not see it: a
model named ``team-a/idx`` in ``team-b`` never catches requests for team-a's ``idx``. An id served
by several objects (mirrored from clusters as they are) is refused unless staff share it; a shared
id goes to a ready object first. Each route carries why the gateway refuses its backend, if it does
(``inference_gateway.placement``), so the request path does no query.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from common.db_thread import read
from inference_gateway.models import SharedGatewayId
from inference_gateway.names import model_name_refusal
from inference_gateway.placement import GONE, Policy, route_refusal
from inference_gateway.routes import ROUTE_BUILDERS, Route, route_for
from models_app.models import InferenceModel

Visible = Callable[[int, str], bool]


@dataclass
class Table:
    by_id: dict[str, list[Route]] = field(default_factory=dict)
    by_name: dict[str, list[Route]] = field(default_factory=dict)


class AmbiguousModel(Exception):
    """A bare model name several ids the caller may see carry; the message names them."""


class ConflictingId(Exception):
    """An id several objects serve without staff sharing it; the message names them."""


def load_routes() -> Table:
    """Routes by id and by bare name, each list in a stable order (cluster, namespace, object name)."""
    policy = Policy.load()
    shared = set(SharedGatewayId.objects.values_list("cluster_id", "gateway_id"))
    table = Table(defaultdict(list), defaultdict(list))
    for model in ROUTE_BUILDERS:
        for row in model.objects.exclude(sync_state__in=GONE).select_related("cluster").order_by(
            "cluster_id", "namespace", "name"
        ):
            route = route_for(row)
            if not route.model:
                continue
            refusal = route_refusal(policy, row, isinstance(row, InferenceModel))
            route = replace(route, refusal=refusal, shared=(route.cluster_id, route.id) in shared)
            table.by_id[route.id].append(route)
            if model_name_refusal(route.model) is None:  # a name no rule allows catches no bare name
                table.by_name[route.model].append(route)
    return Table(dict(table.by_id), dict(table.by_name))


class Catalog:
    """The route table, reloaded on a change notice or when older than ``ttl``; one reload at a
    time, readers never wait for it once a table exists, except for the first reload after a notice."""

    def __init__(self, ttl: float, loader: Callable[[], Table] = load_routes) -> None:
        self.ttl, self.loader = ttl, loader
        self.table: Table | None = None
        self.loaded_at = 0.0
        self._reload: asyncio.Task | None = None
        self.generation = 0  # bumped by each change notice
        self._loaded_generation = -1  # the generation the table was read in

    async def routes(self) -> Table:
        if self.table is None or time.monotonic() - self.loaded_at > self.ttl:
            self._start_reload()
        # A table read before the last notice this request saw is not used: a reload that began
        # before the notice may have missed the change, so another one follows it. Notices arriving
        # meanwhile are the next request's to wait for, so a stream of them never holds one forever.
        wanted = self.generation
        while self.table is None or self._loaded_generation < wanted:
            await asyncio.shield(self._start_reload())
        return self.table

    def _start_reload(self) -> asyncio.Task:
        if self._reload is None or self._reload.done():
            self._reload = asyncio.ensure_future(self._load())
        return self._reload

    def expire(self) -> None:
        """Reload on the next read (a wake changed a model's readiness)."""
        self.loaded_at = 0.0

    def changed(self) -> None:
        """A catalog change was published: the next request reads a table loaded after it."""
        self.generation += 1

    async def _load(self) -> None:
        started, generation = time.monotonic(), self.generation
        self.table = await read(self.loader)
        self.loaded_at, self._loaded_generation = started, generation

    async def find(self, model: str, visible: Visible) -> Route | None:
        """The route ``model`` names for this caller; None when there is none it may see. Raises
        AmbiguousModel or ConflictingId (see the module's docstring)."""
        table = await self.routes()
        routes = [route for route in table.by_id.get(model, ()) if visible(route.cluster_id, route.namespace)]
        if not routes and model in table.by_id:
            return None  # an id, if one the caller may not see, is never read as some other model's bare name
        if not routes:
            routes = [route for route in table.by_name.get(model, ()) if visible(route.cluster_id, route.namespace)]
            ids = sorted({route.id for route in routes})
            if len(ids) > 1:
                raise AmbiguousModel(f"the model name `{model}` is served under several ids: {', '.join(ids)}; "
                                     "send one of them as `model`")
        if not routes:
            return None
        if sum(not route.shared for route in routes) > 1:
            where = ", ".join(f"{route.kind} {route.namespace}/{route.name} (cluster {route.cluster_id})"
                              for route in routes)
            raise ConflictingId(f"the model id `{routes[0].id}` is served by several objects ({where}) and staff "
                                "have not shared it: rename all but one")
        return min(routes, key=lambda route: not route.ready)

    async def visible(self, visible: Visible) -> list[Route]:
        """One route per gateway id the caller may see."""
        found = []
        for routes in (await self.routes()).by_id.values():
            route = next((route for route in routes if visible(route.cluster_id, route.namespace)), None)
            if route is not None:
                found.append(route)
        return sorted(found, key=lambda route: route.id)
