"""The gateway's HTTP server: the OpenAI API in front of every serving model, routed by ``model``.

**Stack: aiohttp (server and client) on uvloop.** Measured before choosing (64 clients, 2 cores,
trivial backend, machine shared): aiohttp proxying with aiohttp's client and uvicorn + httptools +
uvloop with the same client were within the noise of each other (2,100-4,400 vs 1,200-4,100
requests/s over three alternating runs), so the deciding points were elsewhere: one library for
both sides and one event loop (no ASGI translation layer per message), streaming in both
directions with back-pressure (``iter_any`` -> ``StreamResponse.write``), and handler
cancellation when the client disconnects, which is what cancels the upstream call. aiohttp was
already a pinned dependency (the tests' fault proxy); uvloop adds a faster event loop.

Per request: the caller from its API token (``callers``), the route from the model catalog
(``catalog``), a wake when the model is managed and at zero (``waking``), a replica picked from
what its engines report (``picking``; ``balancer`` keeps the replicas and their health), then the
body is passed on unchanged and the answer passed back as it comes: a JSON answer whole, an SSE
stream chunk by chunk. The last request is stamped in the background (``last_request``); metrics
are recorded at the end (``metrics``).

**What a request costs** (cProfile of one worker at saturation against tools/fast-backend,
bench/bench_gateway.py; 300-350 us of CPU per request on the shared 2-core machine at load 11-16):
no database query, no ``labels()`` lookup, only ``model`` read from the body (orjson). About 40%
is aiohttp's client (request and response objects, payload, headers, the write task), 30% its
server and the two sockets' system calls, 8% the governance hooks (admit, finish; end to end,
the ledger's batched writes included, ``USAGE_LIMITS=false`` measured 258-281 against 322-348 us),
the rest this module, the catalog and the metrics. Parsed once instead of per request: the
upstream URL (``upstream_url``), a route's id and key; a body that arrived with its headers is
read without arming a timeout. More cores take more processes: ``manage.py gateway --workers``
(inference_gateway/workers.py). The upstream pool has no limit: each request
in flight holds one keep-alive connection to its replica, so a backend sees the concurrency its
clients send (an inference engine batches what it gets; a cap here would queue requests where
neither the engine nor its metrics see them), and idle connections close after aiohttp's 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import os
import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from django.conf import settings
from django.db import DatabaseError
from yarl import URL

from common.db_thread import close_reads
from governance.public import Governance
from inference_gateway import metrics
from inference_gateway.addresses import NotAnAddress, host_refusal, parse_backend_url
from inference_gateway.balancer import Balancer, NoReplica, Replica
from inference_gateway.callers import Caller, Callers, NotAuthenticated
from inference_gateway.catalog import CATALOG_READS, AmbiguousModel, Catalog, ConflictingId
from inference_gateway.conf import GatewaySettings
from inference_gateway.deadlines import Deadline, Deadlines
from inference_gateway.errors import error_response, model_not_found, not_authenticated, unrouted
from inference_gateway.headers import answer_headers, content_type
from inference_gateway.last_request import LastRequests
from inference_gateway.memory import Budget, Hold
from inference_gateway.notices import CATALOG_TABLES, listen
from inference_gateway.picking import snapshot
from inference_gateway.picking.picker import Picker, replica_name
from inference_gateway.picking.scraper import Scraper
from inference_gateway.resolver import guarded_connector
from inference_gateway.routes import Route
from inference_gateway.waking import NotAwake, Waker
from inference_gateway.workers import STOP_SECONDS

logger = logging.getLogger(__name__)

GATEWAY = web.AppKey("gateway", "Gateway")
API_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
FIRST_BYTE = web.RequestKey("first_byte", float)  # seconds from the request to the answer's first byte
HOLD = web.RequestKey("hold", Hold)  # the request's bytes in the process's budget (inference_gateway/memory.py)
BODY = web.RequestKey("body", dict)  # the request body, parsed: the picker reads its prompt
ADAPTER = web.RequestKey("adapter", str)  # the LoRA adapter a request asks for as <model>_<adapter>
PICKED = web.RequestKey("picked", tuple)  # (replica URL, what decided): the answer's headers
WRITE_SLICE = 1024 * 1024  # a buffered answer is written in slices: the socket's buffer never copies it whole
OVERLOADED_RETRY_AFTER = "1"  # seconds: bytes in flight are given back as requests end
# On SIGTERM, requests in flight get this long to finish (then they are cancelled and the worker
# cleans up): inside the supervisor's STOP_SECONDS and Kubernetes' default grace period of 30 s,
# where aiohttp's own default (60 s) outlasted both and the worker was killed mid-cleanup.
SHUTDOWN_SECONDS = STOP_SECONDS - 5.0
FIRST_READ_WAIT_SECONDS = 5.0  # for the notices' connection before the routes are first read
NO_MODEL = "-"  # the metrics label of requests that named no model the caller may use
_DECODER = json.JSONDecoder()


def usage_in(data: bytes) -> Any:
    """The last ``"usage"`` object in an answer (a JSON body or SSE events), without parsing the
    rest: embeddings answers are large, and usage sits at their end."""
    index = data.rfind(b'"usage"')
    if index < 0:
        return None
    colon = data.find(b":", index)
    try:
        value, _ = _DECODER.raw_decode(data[colon + 1:].decode("utf-8", "replace").lstrip())
    except ValueError:
        return None
    return value


def too_large(route: Route, cap: int) -> web.Response:
    return error_response(502, f"the answer of model {route.id}'s backend is larger than {cap} bytes, the most "
                          "the gateway relays when it is not a stream (GATEWAY_MAX_RESPONSE_BYTES)",
                          "upstream_response_too_large")


def replica_refusal(url: str) -> str | None:
    """Why a replica's address may not be reached, read as the client connects
    (``inference_gateway.addresses``), before a connection is tried; every socket's address is
    checked again when it opens (``inference_gateway.resolver.guarded_connector``)."""
    return _replica_refusal(url, settings.GATEWAY_ALLOW_LOOPBACK)


@functools.lru_cache(maxsize=4096)
def _replica_refusal(url: str, _allow_loopback: bool) -> str | None:
    """Cached per URL and development setting (the answer depends on both)."""
    try:
        backend = parse_backend_url(url)
    except NotAnAddress as error:
        return str(error)
    refused = host_refusal(backend.host, backend.ip)
    return None if refused is None else f"{backend.host} {refused}"


def model_entry(route: Route) -> dict[str, Any]:
    """A model as OpenAI's ``/v1/models`` writes it; ``created`` is when its object was created
    (``routes.created_of``), ``owned_by`` names the object, ``features`` KubeAI's."""
    entry: dict[str, Any] = {"id": route.id, "object": "model", "created": route.created,
                             "owned_by": f"{route.kind} {route.namespace}/{route.name}"}
    if route.features:
        entry["features"] = list(route.features)
    return entry


@functools.lru_cache(maxsize=4096)
def upstream_url(replica: str, path: str) -> URL:
    """The replica's URL for one of ``API_PATHS``, parsed once (yarl's parse was a visible share of
    a request's CPU)."""
    return URL(replica + path)


class Gateway:
    """The request path's state: caches, wakes, replicas, the upstream connection pool."""

    def __init__(self, config: GatewaySettings) -> None:
        self.config = config
        self.callers = Callers(config.caller_ttl)
        self.listening = asyncio.Event()  # set once catalog change notices arrive
        self.catalog = Catalog(config.catalog_ttl, self.listening.is_set)
        self.balancer = Balancer(config.endpoints_ttl, config.eject_seconds)
        self.scraper = Scraper(settings.GATEWAY_ENGINE_METRICS_SECONDS)  # engines' metrics, in the background
        self.picker = Picker(self.balancer, self.scraper, settings.GATEWAY_ENGINE_METRICS_STALE_SECONDS)
        self.waker = Waker(config.wake_timeout, config.wake_poll)
        self.last_requests = LastRequests(config.stamp_interval)
        self.governance = Governance.from_django()  # team limits and the usage ledger (governance/)
        self.memory = Budget(config.max_bytes_in_flight)  # bodies and buffered answers, all requests
        self.deadlines = Deadlines()  # of the calls to backends: one sweep, no timer per call
        self.sweeper: asyncio.Task | None = None
        self.snapshots: asyncio.Task | None = None
        self.session: aiohttp.ClientSession | None = None
        self.notices: asyncio.Task | None = None
        self.first_read: asyncio.Task | None = None

    async def start(self, _app: web.Application) -> None:
        self.notices = asyncio.ensure_future(listen(self._changed, self.listening))
        self.first_read = asyncio.ensure_future(self._first_read())
        self.first_read.add_done_callback(lambda task: task.cancelled() or task.exception())
        self.sweeper = asyncio.ensure_future(self.deadlines.sweep())
        self.snapshots = asyncio.ensure_future(snapshot.keep_writing(self.picker))  # the model pages' replica tables
        # No cookie jar: one shared by every caller would hand one caller's cookies to the next.
        self.session = aiohttp.ClientSession(
            connector=guarded_connector(limit=0, ttl_dns_cache=10),
            cookie_jar=aiohttp.DummyCookieJar(),
            # sock_read: silence between two reads; the total is the request's own deadline (_forward)
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout,
                                          sock_read=self.config.upstream_idle_timeout),
            skip_auto_headers=("Accept-Encoding",),
            auto_decompress=False,
        )

    async def _first_read(self) -> None:
        """The routes, read while the server starts so the first request finds them, once notices
        arrive (a change after the read is then noticed; without notices, after
        ``FIRST_READ_WAIT_SECONDS``). A failure is the first request's to report."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FIRST_READ_WAIT_SECONDS):
                await self.listening.wait()
        await self.catalog.routes()

    def _changed(self, table: str | None, pk: int | None = None) -> None:
        """A change notice of ``table`` (None: of any), of its row ``pk`` where it names one: the
        routes, or the limits and teams governance holds, or both, are read again, whichever reads
        that table (the routes only that row)."""
        if table is None or table in CATALOG_TABLES:
            self.catalog.changed(table, pk)
        self.governance.changed(table)

    async def stop(self, _app: web.Application) -> None:
        for task in (self.notices, self.sweeper, self.first_read):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.last_requests.drain()
        await self.scraper.stop()
        await snapshot.stop(self.snapshots)
        if self.session is not None:
            await self.session.close()
        await close_reads()
        await close_reads(CATALOG_READS)

    # -- handlers ----------------------------------------------------------------------------------
    def _database_unavailable(self, error: DatabaseError) -> web.Response:
        """The portal's database failed (a token check, the catalog): the portal's fault, a 503."""
        logger.warning("database unavailable: %s", error)
        return error_response(503, "the portal's database is unavailable; try again", "database_unavailable",
                              headers={"Retry-After": str(self.config.retry_after)})

    async def list_models(self, request: web.Request) -> web.Response:
        try:
            return await self._list_models(request)
        except DatabaseError as error:
            return self._database_unavailable(error)

    async def _list_models(self, request: web.Request) -> web.Response:
        try:
            caller = await self.callers.caller(request.headers.get("Authorization"))
        except NotAuthenticated as error:
            return not_authenticated(str(error))
        data = [model_entry(route) for route in await self.catalog.visible(caller.visible)]
        return web.json_response({"object": "list", "data": data})

    async def retrieve_model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{model}`` (``client.models.retrieve``): the entry ``/v1/models`` lists,
        for the id (or bare name) a request's ``model`` would name; OpenAI's 404 otherwise."""
        try:
            try:
                caller = await self.callers.caller(request.headers.get("Authorization"))
            except NotAuthenticated as error:
                return not_authenticated(str(error))
            route, refused = await self._find(request.match_info["model"], caller)
        except DatabaseError as error:
            return self._database_unavailable(error)
        return refused if route is None else web.json_response(model_entry(route))

    async def _find(self, name: str, caller: Caller) -> tuple[Route | None, web.Response | None]:
        """The route ``name`` resolves to for ``caller`` (``Catalog.find``), or the error to answer."""
        try:
            route = await self.catalog.find(name, caller.visible)
        except AmbiguousModel as error:
            return None, error_response(400, str(error), "model_ambiguous", "model")
        except ConflictingId as error:
            return None, error_response(409, str(error), "model_id_conflict", "model")
        return (route, None) if route is not None else (None, model_not_found(name))

    async def serve(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        model, response = NO_MODEL, None
        hold = request[HOLD] = self.memory.hold()
        try:
            try:
                model, response = await self._serve(request, started)
            except DatabaseError as error:
                response = self._database_unavailable(error)
            if not response.prepared:  # x-ratelimit-* on every answer past admission (sent ones: _relay)
                self.governance.stamp(request, response.headers)
            return response
        finally:
            hold.release()
            status = response.status if response is not None else metrics.CLIENT_LEFT  # cancelled
            metrics.observe(model, status, time.monotonic() - started, request.get(FIRST_BYTE))
            self.governance.finish(request, status, time.monotonic() - started, request.get(FIRST_BYTE))

    async def _serve(self, request: web.Request, started: float) -> tuple[str, web.StreamResponse]:
        """One proxied request: who calls, which model, its wake, then :meth:`_forward`."""
        try:
            caller = await self.callers.caller(request.headers.get("Authorization"))
        except NotAuthenticated as error:
            return NO_MODEL, not_authenticated(str(error))
        body, refused = await self._read_body(request)
        if refused is not None:
            return NO_MODEL, refused
        try:
            data = orjson.loads(body)  # read for `model` (and governance's stream options): passed on as received
            name = data.get("model")
        except (ValueError, AttributeError):
            return NO_MODEL, error_response(400, "the request body must be a JSON object", "invalid_json")
        if not isinstance(name, str) or not name:
            return NO_MODEL, error_response(400, "model: a model name (string) is required", "missing_model", "model")
        route, refused = await self._find(name, caller)
        if route is None and "_" in name:  # KubeAI's <model>_<adapter>: the model's LoRA adapter
            route, adapter = await self._adapter_route(name, caller)
            if route is not None:
                request[ADAPTER] = adapter
                data["model"] = adapter  # the engine serves the adapter under its own name, as KubeAI sends it
                body = orjson.dumps(data)
        if route is None:
            return NO_MODEL, refused
        request[BODY] = data
        if route.refusal is not None:
            return route.id, error_response(
                502, f"the gateway does not route model {route.id}: {route.refusal}",
                "backend_refused")
        body, refused = await self.governance.admit(request, caller, route, body, data)
        if refused is not None:
            return route.id, refused
        self.last_requests.seen(route)
        if route.wakeable and not route.ready:
            refused = await self._wake(route, caller)
            if refused is not None:
                return route.id, refused
        return route.id, await self._forward(request, route, body, started, caller)

    async def _adapter_route(self, name: str, caller: Caller) -> tuple[Route | None, str]:
        """The route of ``<model>_<adapter>`` when the model serves that adapter (a KubeAI Model's
        ``spec.adapters``; any adapter for the other kinds, whose engines list their own)."""
        base, adapter = name.rsplit("_", 1)
        route, _ = await self._find(base, caller)
        if route is None or not adapter or not route.picking.serves(route.kind, adapter):
            return None, ""
        return route, adapter

    async def _read_body(self, request: web.Request) -> tuple[bytes, web.Response | None]:
        """The request body, its bytes taken from the process's budget before it is read (its
        Content-Length, or the most a body may be, until its size is known); a 503 when they do not
        fit (see :meth:`_overloaded`)."""
        hold = request[HOLD]
        length = request.content_length  # None: chunked, the most a body may be is reserved
        reserved = request.client_max_size if length is None else min(length, request.client_max_size)
        if not hold.take(reserved):
            return b"", self._overloaded()
        body, refused = await self._receive_body(request)
        if not hold.settle(reserved, len(body)):  # a compressed body, larger decoded
            return b"", self._overloaded()
        return body, refused

    def _overloaded(self) -> web.Response:
        """The process holds all the bytes it may (``GATEWAY_MAX_BYTES_IN_FLIGHT``): a 503 to retry
        soon, as requests end and give theirs back."""
        return error_response(503, f"the gateway holds all the request and answer bytes it may at once "
                              f"({self.config.max_bytes_in_flight}, GATEWAY_MAX_BYTES_IN_FLIGHT); try again",
                              "gateway_overloaded", headers={"Retry-After": OVERLOADED_RETRY_AFTER})

    async def _receive_body(self, request: web.Request) -> tuple[bytes, web.Response | None]:
        """The request body, decoded as its Content-Encoding says; a 4xx in the OpenAI shape for a
        body too large, undecodable or too slow to arrive."""
        try:
            if request.content.is_eof():  # all of it arrived with the headers: nothing to wait for
                return await request.read(), None
            async with asyncio.timeout(self.config.client_timeout):
                return await request.read(), None
        except web.HTTPRequestEntityTooLarge:
            return b"", error_response(413, f"the request body is larger than {request.client_max_size} bytes",
                                       "request_too_large")
        except (HttpProcessingError, RequestPayloadError) as error:
            detail = " ".join(str(error).split())  # aiohttp's "400, message: ..." on one line
            return b"", error_response(400, f"the request body cannot be read: {detail}", "invalid_body")
        except TimeoutError:
            return b"", error_response(408, f"the request body did not arrive within {self.config.client_timeout:g} s",
                                       "request_timeout")

    async def _wake(self, route: Route, caller: Caller) -> web.Response | None:
        try:
            await self.waker.until_ready(route, caller)
        except NotAwake as error:
            if error.refused:  # only a change to the model helps: no Retry-After
                return error_response(409, str(error), "wake_refused")
            return error_response(503, str(error), "model_not_ready",
                                  headers={"Retry-After": str(self.config.retry_after)})
        except Exception as error:  # the cluster's client or the database failed: the cluster's fault, not the client's
            logger.warning("wake of %s failed: %s", route.id, error, exc_info=True)
            return error_response(503, f"model {route.id} could not be woken: {type(error).__name__}: {error}",
                                  "wake_failed", headers={"Retry-After": str(self.config.retry_after)})
        self.catalog.expire()
        self.balancer.forget(route)
        return None

    async def _until_listed(self, route: Route, until: float) -> web.Response | None:
        """None once the woken model's Service lists a ready replica. The controller calls a model
        woken when its Deployment has a ready Pod; the EndpointSlice controller lists that Pod a
        moment later (longer on a busy control plane), so a request sent on at once would find no
        replica and be answered 502. It waits instead, reading the replicas again every
        ``wake_poll`` seconds (one read per interval per model, however many requests wait), until
        the wake's own deadline (``until``: ``wake_timeout`` after the wake began); then a 503 to
        retry."""
        last_error, waited = "", False
        while True:
            try:
                if await self.balancer.rediscover(route, within=self.config.wake_poll):
                    return None
            except Exception as error:  # the cluster did not answer this time: the next read may
                logger.warning("replicas of %s after its wake: %s", route.id, error)
                last_error = f"; the last read failed: {error}"
            if not waited:
                metrics.REPLICA_WAITS.labels(route.id).inc()
                waited = True
            remaining = until - time.monotonic()
            if remaining <= 0:
                return error_response(
                    503, f"model {route.id} is awake but its Service listed no ready replica within the wake's "
                    f"{self.config.wake_timeout:g} s (GATEWAY_WAKE_TIMEOUT_SECONDS){last_error}",
                    "model_not_ready", headers={"Retry-After": str(self.config.retry_after)})
            await asyncio.sleep(min(self.config.wake_poll, remaining))

    async def _forward(
        self, request: web.Request, route: Route, body: bytes, started: float, caller: Caller
    ) -> web.StreamResponse:
        """Send to one replica; a replica that cannot be reached (or may not be: its address is
        refused) is marked failed and the next one tried (nothing was sent to the client yet). None
        reachable: wake once when the model is managed (it may have scaled to zero since the
        catalog last looked), else 502 with the reason. A replica that accepted the request but
        sends no answer in time (silent for the idle limit, or not done by the call's deadline) is
        a 504: the request may be running there, so it is not resent."""
        tried: set[str] = set()
        woken = False
        reason = "no ready replica"
        while True:
            try:
                replica, decided = self.picker.pick(route, await self.balancer.replicas(route), tried,
                                                    request.get(BODY) or {}, request.get(ADAPTER))
                request[PICKED] = (replica.url, decided)
            except NoReplica:
                if route.wakeable and not woken:
                    woken, tried, until = True, set(), time.monotonic() + self.config.wake_timeout
                    refused = await self._wake(route, caller) or await self._until_listed(route, until)
                    if refused is not None:
                        return refused
                    continue
                return error_response(502, f"the backend of model {route.id} is unreachable: {reason}",
                                      "backend_unreachable")
            except Exception as error:  # discovery failed in a way endpoints.discover does not translate
                logger.warning("replicas of %s: %s", route.id, error, exc_info=True)
                return error_response(503, f"the replicas of model {route.id} cannot be listed: {error}",
                                      "cluster_unavailable", headers={"Retry-After": str(self.config.retry_after)})
            tried.add(replica.url)
            refused_address = replica_refusal(replica.url)
            if refused_address is not None:
                reason = f"{replica.url}: {refused_address}"
                continue
            replica.outstanding += 1
            deadline = self.deadlines.at(asyncio.get_running_loop().time() + self.config.upstream_timeout)
            try:
                with deadline:
                    upstream = await self._send(request, replica, body)
            except (aiohttp.ClientConnectionError, aiohttp.InvalidURL, TimeoutError) as error:
                replica.outstanding -= 1
                self.balancer.failed(replica)
                metrics.UPSTREAM_ERRORS.labels(route.id).inc()
                if isinstance(error, TimeoutError) and not isinstance(error, aiohttp.ConnectionTimeoutError):
                    return self._timed_out(route, error)  # it has the request: never resent
                reason = f"{replica.url}: {type(error).__name__}: {error}"
                continue
            except aiohttp.ClientResponseError as error:  # an answer that is not HTTP (bad status line, headers)
                replica.outstanding -= 1
                self.balancer.failed(replica)
                metrics.UPSTREAM_ERRORS.labels(route.id).inc()
                return error_response(502, f"the backend of model {route.id} sent a broken answer: {error.message}",
                                      "upstream_broken")
            self.balancer.answered(replica, upstream.status)
            try:
                response = await self._relay(request, upstream, route, started, deadline)
            except BaseException:
                upstream.close()  # cancelled (the client left) or failed: drop the call to the backend
                raise
            finally:
                replica.outstanding -= 1
            upstream.release()  # done: the connection goes back to the pool for the next request
            return response

    async def _send(self, request: web.Request, replica: Replica, body: bytes) -> aiohttp.ClientResponse:
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        if "Accept" in request.headers:
            headers["Accept"] = request.headers["Accept"]
        # a redirect is never followed: the answer must come from the replica the gateway chose
        return await self.session.post(upstream_url(replica.url, request.path), data=body, headers=headers,
                                       allow_redirects=False)

    def _timed_out(self, route: Route, error: TimeoutError) -> web.Response:
        """504 for a backend that went silent (aiohttp's ``sock_read``) or was not done by the call's
        deadline (every other timeout of the call), naming the limit it ran into."""
        if isinstance(error, aiohttp.SocketTimeoutError):
            what = f"sent nothing for {self.config.upstream_idle_timeout:g} s (GATEWAY_UPSTREAM_IDLE_SECONDS)"
        else:
            what = (f"did not finish its answer within {self.config.upstream_timeout:g} s "
                    "(GATEWAY_UPSTREAM_TIMEOUT_SECONDS)")
        return error_response(504, f"the backend of model {route.id} {what}", "upstream_timeout")

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, route: Route, started: float,
        deadline: Deadline,
    ) -> web.StreamResponse:
        """The backend's answer as the gateway's own (headers: ``inference_gateway.headers``): a
        stream passed on chunk by chunk, anything else read whole up to ``max_response_bytes`` (a
        502 beyond) and the process's budget (a 503 beyond), both until the call's ``deadline``."""
        if 300 <= upstream.status < 400:
            return error_response(502, f"the backend of model {route.id} answered {upstream.status} (a redirect); "
                                  "the gateway follows none", "upstream_redirect")
        content = content_type(upstream.headers, upstream.content_type)
        if content is None:
            return error_response(502, f"the backend of model {route.id} answered {upstream.status} with Content-Type "
                                  f"{upstream.content_type}, which no OpenAI client reads (JSON, an event stream or "
                                  "plain text)", "upstream_content_type")
        headers = answer_headers(upstream.headers, self.config.passed_headers, content)
        self.governance.stamp(request, headers)  # x-ratelimit-*: the answer is sent from here
        if PICKED in request:  # which replica answered, and what picked it (inference_gateway/picking/)
            headers["X-Gateway-Replica"], headers["X-Gateway-Picked-By"] = (replica_name(request[PICKED][0]),
                                                                            request[PICKED][1])
        if upstream.content_type == "text/event-stream":
            return await self._stream(request, upstream, route, started, headers, deadline)
        try:
            with deadline:
                data = await self._read_whole(request, upstream, route)
        except TimeoutError as error:
            return self._timed_out(route, error)
        except aiohttp.ClientError as error:
            return error_response(502, f"the backend of model {route.id} sent a broken answer: {error}",
                                  "upstream_broken")
        if isinstance(data, web.Response):
            return data
        request[FIRST_BYTE] = time.monotonic() - started
        if upstream.status == 200:
            usage = usage_in(data)  # one search of the body, from its end
            metrics.count_usage(route.id, usage)
            self.governance.usage(request, usage)
        return await self._write_whole(request, upstream.status, headers, data, route)

    async def _read_whole(
        self, request: web.Request, upstream: aiohttp.ClientResponse, route: Route
    ) -> bytearray | web.Response:
        """A non-stream answer, every byte taken from the request's hold before it is kept (all of
        a declared Content-Length at once); a 502 above the cap, a 503 when the budget is full."""
        cap, hold = self.config.max_response_bytes, request[HOLD]
        declared = upstream.content_length
        if declared is not None and declared > cap:
            return too_large(route, cap)
        if declared is not None and not hold.take(declared):
            return self._overloaded()
        data = bytearray()
        async for chunk in upstream.content.iter_any():
            if declared is None and not hold.take(len(chunk)):
                return self._overloaded()
            data += chunk
            if len(data) > cap:
                return too_large(route, cap)
        return data

    async def _write_whole(
        self, request: web.Request, status: int, headers: dict[str, str], data: bytearray, route: Route
    ) -> web.StreamResponse:
        """``data`` to the client in slices of ``WRITE_SLICE``, each sent before the next (the
        socket's buffer never holds a second copy of a large answer); a client that does not read
        for ``client_timeout`` is dropped."""
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = len(data)
        await response.prepare(request)
        try:
            async with asyncio.timeout(self.config.client_timeout):  # a client that does not read is dropped
                if len(data) <= WRITE_SLICE:
                    await response.write(data)
                else:
                    view = memoryview(data)  # slices without copies; the transport may keep one
                    for offset in range(0, len(data), WRITE_SLICE):
                        await response.write(view[offset:offset + WRITE_SLICE])
                await response.write_eof()
        except (TimeoutError, ConnectionError) as error:
            logger.info("answer of %s not taken by the client: %s", route.id, type(error).__name__)
            if request.transport is not None:
                request.transport.abort()
        return response

    async def _stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, route: Route, started: float,
        headers: dict[str, str], deadline: Deadline,
    ) -> web.StreamResponse:
        """Chunk by chunk with back-pressure: a chunk is read from the backend only once the last
        one was handed to the client, so a slow client slows the backend instead of filling memory.
        A client that takes no chunk for ``client_timeout`` is dropped, and so is the stream of a
        backend that breaks off, goes silent for the idle limit or is not done by the call's
        ``deadline`` (the client sees the connection end, never a made-up last chunk)."""
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        tap = self.governance.tap(request)  # reads usage, drops the usage chunk the client did not ask for
        try:
            async with asyncio.timeout(None) as timeout:
                with deadline:
                    async for chunk in upstream.content.iter_any():
                        if FIRST_BYTE not in request:
                            request[FIRST_BYTE] = time.monotonic() - started
                        timeout.reschedule(loop.time() + self.config.client_timeout)
                        await response.write(tap.feed(chunk) if tap is not None else chunk)
                        timeout.reschedule(None)
                        if tap is None and b'"usage"' in chunk:  # the tap reads it otherwise, from the stream's end
                            metrics.count_usage(route.id, usage_in(chunk))
                if tap is not None:
                    timeout.reschedule(loop.time() + self.config.client_timeout)
                    await response.write(tap.end())
                    metrics.count_usage(route.id, tap.usage)
            await response.write_eof()
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as error:
            past = " (past the call's deadline)" if loop.time() >= deadline.when else ""
            logger.info("stream of %s ended early%s: %s: %s", route.id, past, type(error).__name__, error)
            metrics.UPSTREAM_ERRORS.labels(route.id).inc()
            if request.transport is not None:
                request.transport.abort()
        return response

    async def metrics_view(self, request: web.Request) -> web.Response:
        """Prometheus exposition; like the portal's ``/metrics``, only for ``Bearer <METRICS_TOKEN>``
        (401 with its challenge otherwise, the body in OpenAI's error shape as every gateway error)."""
        expected = f"Bearer {settings.METRICS_TOKEN}"
        given = request.headers.get("Authorization", "")
        if not settings.METRICS_TOKEN or not hmac.compare_digest(given.encode(), expected.encode()):
            return error_response(401, "metrics need Authorization: Bearer <METRICS_TOKEN>", "metrics_token_required",
                                  headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
        return web.Response(body=metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    async def healthz(self, _request: web.Request) -> web.Response:
        """Alive; ``X-Catalog-Notices`` says whether route changes arrive as notices (``listening``)
        or only with the periodic reload (``periodic``: SQLite, or the listener is reconnecting);
        ``X-Catalog-Read``, whether the whole catalog has been read (``whole``) or requests are
        answered from their model's rows while it is (``named``, a start); ``X-Gateway-Worker``,
        which process answered (its pid: several share a port with ``--workers``)."""
        notices = "listening" if self.listening.is_set() else "periodic"
        return web.Response(text="ok\n", headers={"X-Catalog-Notices": notices,
                                                  "X-Catalog-Read": "whole" if self.catalog.whole else "named",
                                                  "X-Gateway-Worker": str(os.getpid())})


def make_app(config: GatewaySettings | None = None) -> web.Application:
    gateway = Gateway(config or GatewaySettings.from_django())
    app = web.Application(client_max_size=settings.GATEWAY_MAX_BODY_BYTES)
    app[GATEWAY] = gateway
    app.on_startup.append(gateway.start)
    app.on_startup.append(gateway.governance.start)
    app.on_cleanup.append(gateway.governance.stop)
    app.on_cleanup.append(gateway.stop)
    app.router.add_get("/v1/models", gateway.list_models)
    # An id is ``namespace/modelName``: the rest of the path, slash included.
    app.router.add_get("/v1/models/{model:.+}", gateway.retrieve_model)
    for path in API_PATHS:
        app.router.add_post(path, gateway.serve)
    app.router.add_get("/metrics", gateway.metrics_view)
    app.router.add_get("/healthz", gateway.healthz)
    # Last: every other path and method, aiohttp's 404 and 405 in OpenAI's error shape (errors.unrouted).
    app.router.add_route("*", "/{path:.*}", unrouted)
    return app


async def run(
    host: str, port: int, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None,
    reuse_port: bool = False,
) -> None:
    """Serve until ``stop`` is set (forever without one). ``handler_cancellation``: a client that
    disconnects cancels its handler, and with it the upstream call. ``keepalive_timeout``: a
    connection that has sent no complete request (slow headers) or sits idle between requests for
    ``GATEWAY_CLIENT_TIMEOUT_SECONDS`` is closed. ``reuse_port``: other processes listen on the
    same port (``SO_REUSEPORT``, inference_gateway/workers.py). Once ``stop`` is set, requests in
    flight have ``SHUTDOWN_SECONDS`` to finish."""
    runner = web.AppRunner(make_app(), handler_cancellation=True, access_log=None,
                           keepalive_timeout=float(settings.GATEWAY_CLIENT_TIMEOUT_SECONDS),
                           shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024, reuse_port=reuse_port or None)
    await site.start()
    logger.info("inference gateway listening on %s:%s; %s", host, port, runner.app[GATEWAY].governance.counting)
    if ready is not None:
        ready.set()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
