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
(``catalog``), a wake when the model is managed and at zero (``waking``), a replica by least
outstanding requests (``balancer``), then the body is passed on unchanged and the answer passed
back as it comes: a JSON answer whole, an SSE stream chunk by chunk. The last request is stamped
in the background (``last_request``); metrics are recorded at the end (``metrics``).

**What a request costs** (py-spy under load, bench/bench_gateway.py): no database query, no
``labels()`` lookup, only ``model`` read from the body (orjson); what is left is aiohttp's own
work on both sides and the two sockets' system calls. The upstream pool has no limit: each request
in flight holds one keep-alive connection to its replica, so a backend sees the concurrency its
clients send (an inference engine batches what it gets; a cap here would queue requests where
neither the engine nor its metrics see them), and idle connections close after aiohttp's 15 s.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from django.conf import settings

from governance.gateway import Governance
from inference_gateway import metrics
from inference_gateway.balancer import Balancer, NoReplica, Replica
from inference_gateway.callers import Caller, Callers, NotAuthenticated
from inference_gateway.catalog import Catalog
from inference_gateway.conf import GatewaySettings
from inference_gateway.db_thread import close_reads
from inference_gateway.errors import error_response, model_not_found
from inference_gateway.last_request import LastRequests
from inference_gateway.routes import Route
from inference_gateway.waking import NotAwake, Waker

logger = logging.getLogger(__name__)

GATEWAY = web.AppKey("gateway", "Gateway")
API_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
# Headers that describe one connection or the body's framing, which the gateway re-does itself.
HOP_HEADERS = frozenset(
    name.lower()
    for name in ("Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Content-Encoding", "Date",
                 "Server", "Upgrade", "Proxy-Authenticate", "Trailer", "TE")
)
FIRST_BYTE = web.RequestKey("first_byte", float)  # seconds from the request to the answer's first byte
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


class Gateway:
    """The request path's state: caches, wakes, replicas, the upstream connection pool."""

    def __init__(self, config: GatewaySettings) -> None:
        self.config = config
        self.callers = Callers(config.caller_ttl)
        self.catalog = Catalog(config.catalog_ttl)
        self.balancer = Balancer(config.endpoints_ttl, config.eject_seconds)
        self.waker = Waker(config.wake_timeout, config.wake_poll)
        self.last_requests = LastRequests(config.stamp_interval)
        self.governance = Governance.from_django()  # team limits and the usage ledger (governance/)
        self.session: aiohttp.ClientSession | None = None

    async def start(self, _app: web.Application) -> None:
        # No cookie jar: one shared by every caller would hand one caller's cookies to the next.
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=10),
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=self.config.upstream_timeout),
            skip_auto_headers=("Accept-Encoding",),
            auto_decompress=False,
        )

    async def stop(self, _app: web.Application) -> None:
        await self.last_requests.drain()
        if self.session is not None:
            await self.session.close()
        await close_reads()

    # -- handlers ----------------------------------------------------------------------------------
    async def list_models(self, request: web.Request) -> web.Response:
        try:
            caller = await self.callers.caller(request.headers.get("Authorization"))
        except NotAuthenticated as error:
            return error_response(401, str(error), "invalid_api_key")
        data = []
        for route in await self.catalog.visible(caller.visible):
            entry: dict[str, Any] = {"id": route.model, "object": "model", "created": 0,
                                     "owned_by": f"{route.kind} {route.namespace}/{route.name}"}
            if route.features:
                entry["features"] = list(route.features)
            data.append(entry)
        return web.json_response({"object": "list", "data": data})

    async def serve(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        model, response = NO_MODEL, None
        try:
            model, response = await self._serve(request, started)
            return response
        finally:
            status = response.status if response is not None else 499  # cancelled: the client left
            metrics.observe(model, status, time.monotonic() - started, request.get(FIRST_BYTE))
            self.governance.finish(request, status, time.monotonic() - started, request.get(FIRST_BYTE))

    async def _serve(self, request: web.Request, started: float) -> tuple[str, web.StreamResponse]:
        try:
            caller = await self.callers.caller(request.headers.get("Authorization"))
        except NotAuthenticated as error:
            return NO_MODEL, error_response(401, str(error), "invalid_api_key")
        body = await request.read()
        try:
            name = orjson.loads(body).get("model")  # parsed only for this: passed on as received
        except (ValueError, AttributeError):
            return NO_MODEL, error_response(400, "the request body must be a JSON object", "invalid_json")
        if not isinstance(name, str) or not name:
            return NO_MODEL, error_response(400, "model: a model name (string) is required", "missing_model", "model")
        route = await self.catalog.find(name, caller.visible)
        if route is None:
            return NO_MODEL, model_not_found(name)
        body, refused = await self.governance.admit(request, caller, route, body)
        if refused is not None:
            return route.model, refused
        self.last_requests.seen(route)
        if route.wakeable and not route.ready:
            refused = await self._wake(route, caller)
            if refused is not None:
                return route.model, refused
        return route.model, await self._forward(request, route, body, started, caller)

    async def _wake(self, route: Route, caller: Caller) -> web.Response | None:
        try:
            await self.waker.until_ready(route, caller)
        except NotAwake as error:
            return error_response(503, str(error), "model_not_ready",
                                  headers={"Retry-After": str(self.config.retry_after)})
        self.catalog.expire()
        self.balancer.forget(route)
        return None

    async def _forward(
        self, request: web.Request, route: Route, body: bytes, started: float, caller: Caller
    ) -> web.StreamResponse:
        """Send to one replica; a replica that cannot be reached is marked failed and the next one
        tried (nothing was sent to the client yet). None reachable: wake once when the model is
        managed (it may have scaled to zero since the catalog last looked), else 502 with the reason."""
        tried: set[str] = set()
        woken = False
        reason = "no ready replica"
        while True:
            try:
                replica = self.balancer.pick(await self.balancer.replicas(route), tried)
            except NoReplica:
                if route.wakeable and not woken:
                    woken, tried = True, set()
                    refused = await self._wake(route, caller)
                    if refused is not None:
                        return refused
                    continue
                return error_response(502, f"the backend of model {route.model} is unreachable: {reason}",
                                      "backend_unreachable")
            tried.add(replica.url)
            replica.outstanding += 1
            try:
                upstream = await self._send(request, replica, body)
            except (aiohttp.ClientConnectionError, TimeoutError) as error:
                replica.outstanding -= 1
                self.balancer.failed(replica)
                metrics.UPSTREAM_ERRORS.labels(route.model).inc()
                reason = f"{replica.url}: {type(error).__name__}: {error}"
                continue
            self.balancer.answered(replica, upstream.status)
            try:
                response = await self._relay(request, upstream, route, started)
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
        # a redirect is the client's to follow (or not), like any other answer
        return await self.session.post(replica.url + request.path, data=body, headers=headers, allow_redirects=False)

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, route: Route, started: float
    ) -> web.StreamResponse:
        headers = {name: value for name, value in upstream.headers.items() if name.lower() not in HOP_HEADERS}
        if upstream.content_type != "text/event-stream":
            data = await upstream.read()
            response = web.Response(body=data, status=upstream.status, headers=headers)
            request[FIRST_BYTE] = time.monotonic() - started
            if upstream.status == 200:
                metrics.count_usage(route.model, usage_in(data))
                self.governance.usage(request, usage_in(data))
            return response
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        tap = self.governance.tap(request)  # reads usage, drops the usage chunk the client did not ask for
        async for chunk in upstream.content.iter_any():
            if FIRST_BYTE not in request:
                request[FIRST_BYTE] = time.monotonic() - started
            if b'"usage":{' in chunk or b'"usage": {' in chunk:
                metrics.count_usage(route.model, usage_in(chunk))
            await response.write(tap.feed(chunk) if tap is not None else chunk)
        if tap is not None:
            await response.write(tap.end())
        await response.write_eof()
        return response

    async def metrics_view(self, request: web.Request) -> web.Response:
        """Prometheus exposition; like the portal's ``/metrics``, only for ``Bearer <METRICS_TOKEN>``."""
        expected = f"Bearer {settings.METRICS_TOKEN}"
        given = request.headers.get("Authorization", "")
        if not settings.METRICS_TOKEN or not hmac.compare_digest(given.encode(), expected.encode()):
            return web.Response(status=403, text="metrics need Authorization: Bearer <METRICS_TOKEN>\n")
        return web.Response(body=metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    @staticmethod
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")


def make_app(config: GatewaySettings | None = None) -> web.Application:
    gateway = Gateway(config or GatewaySettings.from_django())
    app = web.Application(client_max_size=settings.GATEWAY_MAX_BODY_BYTES)
    app[GATEWAY] = gateway
    app.on_startup.append(gateway.start)
    app.on_startup.append(gateway.governance.start)
    app.on_cleanup.append(gateway.governance.stop)
    app.on_cleanup.append(gateway.stop)
    app.router.add_get("/v1/models", gateway.list_models)
    for path in API_PATHS:
        app.router.add_post(path, gateway.serve)
    app.router.add_get("/metrics", gateway.metrics_view)
    app.router.add_get("/healthz", gateway.healthz)
    return app


async def run(host: str, port: int, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (forever without one). ``handler_cancellation``: a client that
    disconnects cancels its handler, and with it the upstream call."""
    runner = web.AppRunner(make_app(), handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    logger.info("inference gateway listening on %s:%s", host, port)
    if ready is not None:
        ready.set()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
