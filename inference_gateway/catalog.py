"""Every served model, by its gateway id (``namespace/modelName``) and by its bare model name.

**Kept up to date row by row.** The first read loads every serving row's route columns
(``values_list``, no model instance, no whole-spec decoding; each cluster's managed kinds read once,
no credentials decrypted; staff's decisions once: :class:`Context`). After that, a catalog change
notice (``inference_gateway.notices``) names the row that changed (``table id``), and only those
rows are read again, however large the catalog: a model created, renamed, moved, made ready or
deleted is routable, or gone, for the next request after its notice. A notice of staff's
decisions (shared namespaces, backend hosts, shared ids, namespace grants, a cluster's managed
kinds or name) reads everything again: those are rare, and every route's refusal may depend on them.

**A start serves at once.** Until the first whole read is done (seconds at 100,000 rows, more
when every worker of a busy machine reads at once), :meth:`Catalog.find` reads only the rows a
request's ``model`` may name (:func:`load_named`: an index lookup per kind) and answers from them
as the whole table would. The catalog's own reads have a thread and connection of their own
(``CATALOG_READS``), so these, like token checks, never queue behind a whole read.

**A missed notice converges.** While the ``LISTEN`` connection lives, PostgreSQL delivers every
committed change's notice, in commit order; a connection lost (or re-opened) counts as a notice of
every table, and the catalog then compares every row's version (PostgreSQL's ``xmin``: a new one
with every write of the row) with the one it read, and reads only the rows that differ or are new
(``resync``: ids and versions, not the rows). Without notices (SQLite, or while the listener
reconnects) that comparison runs every ``ttl`` seconds instead (on SQLite, without versions, a
whole read). Readiness is a hint only (the wake path reads the live Deployment).

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
import bisect
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import connection
from django.db.models import Q
from django.db.models.expressions import RawSQL

from clusters.models import Cluster
from common.db_thread import read
from common.gc_tuning import collector_paused, freeze_alive
from inference_gateway.metrics import CATALOG_ROWS
from inference_gateway.models import SharedGatewayId
from inference_gateway.names import model_name_refusal
from inference_gateway.placement import GONE, Policy, refusal_of
from inference_gateway.routes import SERVING_KINDS, Route, ServingKind, route_row

Visible = Callable[[int, str], bool]
Key = tuple[str, int]  # (table, row id)
KINDS = {kind.table: kind for kind in SERVING_KINDS}
KIND_ORDER = {kind.kind: index for index, kind in enumerate(SERVING_KINDS)}
READ_CHUNK = 5_000  # ids per query when many rows changed at once
CATALOG_READS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-catalog")


def _order(route: Route) -> tuple[int, int, str, str]:
    """A list's order: kind, then cluster, namespace and object name (stable, whatever changed last)."""
    return (KIND_ORDER[route.kind], route.cluster_id, route.namespace, route.name)


@dataclass
class Table:
    by_id: dict[str, list[Route]] = field(default_factory=dict)
    by_name: dict[str, list[Route]] = field(default_factory=dict)

    def add(self, route: Route, in_order: bool = True) -> None:
        """``route`` into its lists, in their order (``in_order``), or at their end (a whole read
        sorts each list once: :meth:`sort`)."""
        for index, key in ((self.by_id, route.id), (self.by_name, route.model)):
            if index is self.by_name and model_name_refusal(route.model) is not None:
                continue  # a name no rule allows catches no bare name
            routes = index.setdefault(key, [])
            if in_order:
                bisect.insort(routes, route, key=_order)
            else:
                routes.append(route)

    def sort(self) -> None:
        for index in (self.by_id, self.by_name):
            for routes in index.values():
                if len(routes) > 1:
                    routes.sort(key=_order)

    def remove(self, route: Route) -> None:
        """``route`` (the very object :meth:`add` put in) out of its lists."""
        for index, key in ((self.by_id, route.id), (self.by_name, route.model)):
            routes = index.get(key)
            if routes is None:
                continue
            for position, other in enumerate(routes):
                if other is route:
                    del routes[position]
                    break
            if not routes:
                del index[key]


class AmbiguousModel(Exception):
    """A bare model name several ids the caller may see carry; the message names them."""


class ConflictingId(Exception):
    """An id several objects serve without staff sharing it; the message names them."""


@dataclass
class Context:
    """What every route is judged against, read once per whole read (a query each): staff's
    placement decisions, the shared ids, and each cluster's managed kinds (read as values: the
    cluster's credentials are never decrypted here). Refusals are kept per (cluster, namespace,
    backend URL), as thousands of models share a backend."""

    policy: Policy
    shared: set[tuple[int, str]]
    managed: dict[int, frozenset[str]]
    refusals: dict[tuple[int, str, Any], str | None] = field(default_factory=dict)

    @classmethod
    def load(cls) -> Context:
        return cls(Policy.load(), set(SharedGatewayId.objects.values_list("cluster_id", "gateway_id")),
                   {pk: frozenset(kinds or ()) for pk, kinds in Cluster.objects.values_list("pk", "managed_kinds")})

    def add_clusters(self, cluster_ids: Iterable[int]) -> None:
        """Clusters registered since the whole read (their names and managed kinds)."""
        missing = set(cluster_ids) - self.managed.keys()
        for pk, name, kinds in Cluster.objects.filter(pk__in=missing).values_list("pk", "name", "managed_kinds"):
            self.managed[pk] = frozenset(kinds or ())
            self.policy.cluster_names[pk] = name

    def backend_refusal(self, cluster_id: int, namespace: str, url: Any) -> str | None:
        """:meth:`Policy.refusal`, once per (cluster, namespace, URL)."""
        try:
            key = (cluster_id, namespace, url)
            if key not in self.refusals:
                self.refusals[key] = self.policy.refusal(cluster_id, namespace, url)
            return self.refusals[key]
        except TypeError:  # an unhashable value (a map where a URL belongs): judged, not kept
            return self.policy.refusal(cluster_id, namespace, url)

    def route(self, kind: ServingKind, values: tuple) -> Route | None:
        """The route of one row as :func:`rows` reads it; None when it serves nothing (gone, no model name)."""
        if values[8] in GONE or not values[4]:
            return None
        row = route_row(kind.kind, values)
        refusal = refusal_of(self.backend_refusal, row.model_name, kind.model.model_name_path, row.cluster_id,
                             row.namespace, row.detail, kind.routes_backend_url)
        route = kind.build(row, kind.kind, kind.kind in self.managed.get(row.cluster_id, ()), refusal)
        if not route.model:
            return None
        shared = (route.cluster_id, route.id) in self.shared
        return replace(route, shared=True) if shared else route


def versioned() -> bool:
    """Whether rows carry a version the catalog can compare (PostgreSQL's ``xmin``)."""
    return connection.vendor == "postgresql"


def _version(kind: ServingKind) -> Any:
    """The row's version: PostgreSQL's ``xmin`` (the transaction that last wrote it), else 0."""
    return RawSQL(f'"{kind.table}".xmin::text::bigint', ()) if versioned() else RawSQL("0", ())


def rows(kind: ServingKind, ids: Iterable[int] | None = None, where: Q | None = None) -> list[tuple]:
    """The route columns (:attr:`routes.ServingKind.columns`, then the version) of every row, of
    ``ids`` or of the rows ``where`` selects."""
    found = kind.model.objects.all() if ids is None else kind.model.objects.filter(pk__in=list(ids))
    if where is not None:
        found = found.filter(where)
    return list(found.annotate(row_version=_version(kind), **kind.picking).values_list(*kind.columns, "row_version"))


@dataclass
class State:
    """The table, each row's version and route (None: a row that serves nothing), and the context
    they were judged in."""

    table: Table
    rows: dict[Key, tuple[int, Route | None]]
    context: Context


def load_routes() -> State:
    """Every route (one query per serving kind and a few for the context), the cyclic collector
    paused meanwhile (``common.gc_tuning.collector_paused``: 100,000 routes hold no cycles)."""
    context, table, kept = Context.load(), Table(), {}
    with collector_paused():
        _load_into(context, table, kept)
    CATALOG_ROWS.labels("whole").inc(len(kept))
    return State(table, kept, context)


def _load_into(context: Context, table: Table, kept: dict[Key, tuple[int, Route | None]]) -> None:
    for kind in SERVING_KINDS:
        for values in rows(kind):
            route = context.route(kind, values)
            kept[(kind.table, values[0])] = (values[-1], route)
            if route is not None:
                table.add(route, in_order=False)
    table.sort()


def load_named(model: str) -> Table:
    """The routes ``model`` may name, before the whole table is read: the rows whose model name is
    ``model`` (a bare name) and, for ``namespace/name``, that namespace's rows serving ``name`` (an
    id). Every route :meth:`Catalog.find` could resolve ``model`` to, or refuse it for, is among
    them, so it answers from them as from the whole table."""
    context, table = Context.load(), Table()
    namespace, _, name = model.rpartition("/")
    wanted = Q(model_name=model) | Q(namespace=namespace, model_name=name)
    for kind in SERVING_KINDS:
        for values in rows(kind, where=wanted):
            route = context.route(kind, values)
            if route is not None:
                table.add(route)
    return table


Changes = dict[Key, tuple[int, Route | None] | None]  # None: the row is gone


def read_rows(state: State, wanted: dict[str, set[int]], read: str = "notice") -> Changes:
    """The rows ``wanted`` names (table -> ids) as routes: the ones found, and None for the ones gone
    (counted in ``gateway_catalog_rows_read_total`` as ``read``)."""
    changes: Changes = {}
    for table, ids in wanted.items():
        kind, ids = KINDS[table], sorted(ids)
        for start in range(0, len(ids), READ_CHUNK):
            chunk = ids[start:start + READ_CHUNK]
            found = rows(kind, chunk)
            state.context.add_clusters({values[1] for values in found})
            for pk in chunk:
                changes[(table, pk)] = None
            for values in found:
                changes[(table, values[0])] = (values[-1], state.context.route(kind, values))
            CATALOG_ROWS.labels(read).inc(len(found))
    return changes


def resync(state: State) -> Changes:
    """The rows whose version differs from the one held, and the ones gone: ids and versions are
    read, then only the rows that differ (a missed notice)."""
    wanted: dict[str, set[int]] = {}
    for kind in SERVING_KINDS:
        versions = dict(kind.model.objects.annotate(row_version=_version(kind)).values_list("pk", "row_version"))
        held = {pk for table, pk in state.rows if table == kind.table}
        changed = {pk for pk, version in versions.items()
                   if (kept := state.rows.get((kind.table, pk))) is None or kept[0] != version}
        if changed or held - versions.keys():
            wanted[kind.table] = changed | (held - versions.keys())
    return read_rows(state, wanted, "compare")


def apply(state: State, changes: Changes) -> None:
    """Each changed row's old route out of the table, its new one in (on the event loop)."""
    for key, change in changes.items():
        kept = state.rows.pop(key, None)
        if kept is not None and kept[1] is not None:
            state.table.remove(kept[1])
        if change is not None:
            state.rows[key] = change
            if change[1] is not None:
                state.table.add(change[1])


class Catalog:
    """The route table, kept up to date from change notices (see the module's docstring); one read
    at a time; a request waits only for the read of a change it was told of, never for a periodic one."""

    def __init__(self, ttl: float, notices: Callable[[], bool] = lambda: False) -> None:
        self.ttl, self.notices = ttl, notices  # notices(): whether change notices arrive now
        self.state: State | None = None
        self.checked_at = 0.0  # when the table was last known to be whole (read or compared)
        self._reload: asyncio.Task | None = None
        self.generation = 0  # bumped by each change notice
        self._loaded_generation = -1  # the generation the table was read in
        self._pending: dict[str, set[int]] = {}  # rows named by notices, not yet read
        self._whole = False  # staff's decisions changed: read everything
        self._compare = False  # notices may have been missed: compare versions
        self._named: dict[str, tuple[int, asyncio.Future]] = {}  # before the whole read: model -> its rows' read

    @property
    def table(self) -> Table | None:
        return None if self.state is None else self.state.table

    @property
    def whole(self) -> bool:
        """Whether the whole table has been read (before: requests answered from :func:`load_named`)."""
        return self.state is not None

    async def routes(self) -> Table:
        if self.state is None or (not self.notices() and time.monotonic() - self.checked_at > self.ttl):
            self._compare = True
            self._start_reload()
        # A table read before the last notice this request saw is not used: a read that began
        # before the notice may have missed the change, so another one follows it. Notices arriving
        # meanwhile are the next request's to wait for, so a stream of them never holds one forever.
        wanted = self.generation
        while self.state is None or self._loaded_generation < wanted:
            await asyncio.shield(self._start_reload())
        return self.state.table

    def _start_reload(self) -> asyncio.Task:
        if self._reload is None or self._reload.done():
            self._reload = asyncio.ensure_future(self._load())
        return self._reload

    def expire(self) -> None:
        """Compare versions soon, without making a request wait (a wake changed a model's readiness;
        its notice brings it where notices arrive)."""
        self._compare = True
        self._start_reload()

    def changed(self, table: str | None = None, pk: int | None = None) -> None:
        """A catalog change was published (a row of ``table``, ``table`` as a whole, or None: any
        table, notices may have been missed): the next request reads a table that includes it."""
        if table in KINDS and pk is not None:
            self._pending.setdefault(table, set()).add(pk)
        elif table in KINDS or table is None:
            self._compare = True
        else:
            self._whole = True
        self.generation += 1

    async def _load(self) -> None:
        started, generation = time.monotonic(), self.generation
        pending, whole, compare = self._pending, self._whole, self._compare
        self._pending, self._whole, self._compare = {}, False, False
        try:
            if self.state is None or whole or (compare and not versioned()):
                self.state = await read(load_routes, CATALOG_READS)
                self._named.clear()
                # Frozen out of the collector, as the startup heap is (common.gc_tuning): its full
                # collections walked every route (100,000: a p99 of hundreds of ms, and a quarter
                # more CPU a request than with one model). The table it replaces is freed by
                # reference counts (no cycles), frozen or not. Frozen without the full collection
                # that ``tune_collector`` runs first: on the event loop it walked the 100,000 new
                # routes (0.26 s of CPU, over 1 s at a busy machine's load, and a health probe
                # timed out behind it); what it would have freed is only what requests in flight
                # left in cycles at that instant.
                freeze_alive()
            else:
                state = self.state
                changes = await read(lambda: resync(state) if compare else read_rows(state, pending), CATALOG_READS)
                apply(state, changes)
        except BaseException:
            for table, ids in pending.items():  # read with the next attempt
                self._pending.setdefault(table, set()).update(ids)
            self._whole, self._compare = self._whole or whole, self._compare or compare
            raise
        if self.state is not None and (whole or compare or not pending):
            self.checked_at = started
        self._loaded_generation = generation

    async def find(self, model: str, visible: Visible) -> Route | None:
        """The route ``model`` names for this caller; None when there is none it may see. Raises
        AmbiguousModel or ConflictingId (see the module's docstring). Before the first whole read is
        done, from the rows ``model`` may name (:func:`load_named`), the whole read going on."""
        table = await self._named_table(model) if self.state is None else await self.routes()
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

    async def _named_table(self, model: str) -> Table:
        """The rows ``model`` may name (:func:`load_named`), the whole read started; one read per
        model for the requests that arrive together (a start under load), read again after a
        change notice. Dropped with the whole read's table."""
        self._start_reload()
        known = self._named.get(model)
        failed = known is not None and known[1].done() and (known[1].cancelled() or known[1].exception() is not None)
        if known is None or known[0] != self.generation or failed:
            known = self._named[model] = (self.generation, asyncio.ensure_future(read(lambda: load_named(model))))
        return await asyncio.shield(known[1])

    async def visible(self, visible: Visible) -> list[Route]:
        """One route per gateway id the caller may see."""
        found = []
        for routes in (await self.routes()).by_id.values():
            route = next((route for route in routes if visible(route.cluster_id, route.namespace)), None)
            if route is not None:
                found.append(route)
        return sorted(found, key=lambda route: route.id)
