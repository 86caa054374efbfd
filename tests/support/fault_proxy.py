"""A fault-injecting HTTPS proxy in front of the real kube-apiserver.

The faults a real API server cannot be asked for come from here: error answers (429 with
``Retry-After``, 500, 503, or any status with a message), dropped connections, and stalled
watches (headers sent, then silence). Everything else is passed through byte for byte, watches
chunk by chunk, so the portal sees the real server's behaviour. 409 and 410 are not injected:
they come from real concurrent writes and a real etcd compaction.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

T = TypeVar("T")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host",
              "content-length", "proxy-authorization", "proxy-authenticate"}
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class RequestInfo:
    """What Kubernetes' RequestInfoFactory would say of a request: verb, resource, name."""

    verb: str
    plural: str
    namespace: str | None
    name: str | None

    @classmethod
    def parse(cls, method: str, path: str, query: dict[str, str]) -> RequestInfo:
        parts = [p for p in path.split("/") if p]
        # /api/v1/... or /apis/<group>/<version>/...
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
        namespace = None
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        plural = rest[0] if rest else ""
        name = rest[1] if len(rest) > 1 else None
        if len(rest) > 2:
            plural = f"{plural}/{rest[2]}"
        watching = query.get("watch") in ("1", "true")
        verb = {
            "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete",
        }.get(method) or ("watch" if watching else "get" if name else "list")
        return cls(verb, plural, namespace, name)


@dataclass
class Fault:
    verb: str
    plural: str | None
    name: str | None
    namespace: str | None
    status: int
    times: int | None
    message: str | None
    retry_after: int | None
    stall_seconds: float = 0.0
    action: Callable[[], Any] | None = None
    query_key: str | None = None

    def matches(self, info: RequestInfo, query: Mapping[str, str]) -> bool:
        return (
            (self.times is None or self.times > 0)
            and (self.query_key is None or bool(query.get(self.query_key)))
            and self.verb in ("*", info.verb)
            and self.plural in (None, info.plural)
            and self.name in (None, info.name)
            and self.namespace in (None, info.namespace)
        )

    def body(self) -> bytes:
        message = self.message or f"injected fault: {self.status}"
        return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": REASONS.get(self.status, "InternalError"),
                           "code": self.status}).encode()


class FaultProxy:
    """``FaultProxy(upstream, ca_file, cert_file, key_file).start()``; ``url`` is where clients go."""

    def __init__(self, upstream: str, ca_file: str, cert_file: str, key_file: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._client_ssl = ssl.create_default_context(cafile=ca_file)
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_ssl.load_cert_chain(cert_file, key_file)
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._watches: dict[int, tuple[web.Request, asyncio.Event, str]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self.requests_seen: list[RequestInfo] = []
        self.url = ""

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        port = self._call(self._serve())
        self.url = f"https://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    # -- faults ----------------------------------------------------------------------------------
    def inject(self, verb: str, plural: str | None = None, *, name: str | None = None,
               namespace: str | None = None, status: int = 500, times: int | None = 1,
               message: str | None = None, retry_after: int | None = None) -> Fault:
        """Answer the next ``times`` matching requests (None: all) with an error Status, without
        passing them on. ``verb``: get, list, watch, create, update, patch, delete or ``*``;
        ``plural`` may name a subresource (``inferencemodels/status``)."""
        fault = Fault(verb, plural, name, namespace, status, times, message, retry_after)
        with self._lock:
            self._faults.append(fault)
        return fault

    def stall(self, verb: str, plural: str | None = None, *, seconds: float, times: int | None = 1) -> Fault:
        """Hold the next matching requests ``seconds`` before passing them on (a slow server)."""
        fault = Fault(verb, plural, None, None, 0, times, None, None, stall_seconds=seconds)
        with self._lock:
            self._faults.append(fault)
        return fault

    def before(self, verb: str, plural: str | None, action: Callable[[], Any], *, query_key: str | None = None,
               times: int | None = 1) -> Fault:
        """Run ``action`` (in a thread) before passing on the next matching requests, e.g. compact
        etcd right before a list's second page (``query_key="continue"``) to get a real 410."""
        fault = Fault(verb, plural, None, None, 0, times, None, None, action=action, query_key=query_key)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def disconnect_watches(self) -> int:
        """Drop every open watch connection (the client sees the connection reset)."""
        return self._call(self._end_watches(abort=True))

    def stall_watches(self) -> int:
        """Keep every open watch connected but pass nothing more on it (a silently stalled stream)."""
        return self._call(self._end_watches(abort=False))

    def open_watches(self, plural: str | None = None) -> int:
        """Watches passing through now (of ``plural`` only, when given): wait for one before cutting
        or stalling it, as a watcher opens its stream a moment after its list."""
        return sum(1 for _, _, each in list(self._watches.values()) if plural in (None, each))

    # -- internals -------------------------------------------------------------------------------
    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _serve(self) -> int:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._client_ssl, limit=0),
                                              timeout=aiohttp.ClientTimeout(total=None), auto_decompress=False)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._server_ssl)
        await site.start()
        return site._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        await self._end_watches(abort=True)
        await self._runner.cleanup()
        await self._session.close()

    async def _end_watches(self, abort: bool) -> int:
        watches = list(self._watches.values())
        for request, stalled, _plural in watches:
            if abort:
                if request.transport is not None:
                    request.transport.abort()
            else:
                stalled.set()
        return len(watches)

    def _take_fault(self, info: RequestInfo, query: Mapping[str, str]) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(info, query):
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        info = RequestInfo.parse(request.method, request.path, dict(request.query))
        self.requests_seen.append(info)
        fault = self._take_fault(info, request.query)
        if fault and fault.action:
            await asyncio.to_thread(fault.action)
        elif fault and fault.stall_seconds:
            await asyncio.sleep(fault.stall_seconds)
        elif fault:
            headers = {"Content-Type": "application/json"}
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            return web.Response(status=fault.status, body=fault.body(), headers=headers)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        target = f"{self.upstream}{request.rel_url}"
        # Pass the body as it came: aiohttp must not add a Content-Type the client did not send.
        async with self._session.request(request.method, target, headers=headers, data=body or None,
                                         skip_auto_headers=("Content-Type",)) as upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    response.headers[key] = value
            await response.prepare(request)
            stalled = asyncio.Event()
            if info.verb == "watch":
                self._watches[id(request)] = (request, stalled, info.plural)
            try:
                async for chunk in upstream.content.iter_any():
                    if stalled.is_set():
                        await asyncio.Event().wait()  # silence until the client gives up
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionResetError, aiohttp.ClientError):
                pass
            finally:
                self._watches.pop(id(request), None)
            return response

