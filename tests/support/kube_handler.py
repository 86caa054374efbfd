"""HTTP side of the test Kubernetes API server: a kmock ``KubernetesEmulator`` serving KubeStore.

Why the stock emulator is subclassed and most of it bypassed (DESIGN.md, "Real parts"):

* its request parsing cannot route ``/api/v1/namespaces`` (kmock 0.8 raises inside
  ``parse_path``) and maps ``/api/v1/namespaces/<name>`` to a namespace with no resource, so
  ``__call__`` routes requests itself;
* its verbs store before any reaction answers, so an injected error would still have changed
  the store; here faults and kmock reactions answer first and the store is only touched by
  the native serving that follows when none of them claimed the request;
* it scans the whole request history once per registered reaction on every request; here
  the scan runs only when a kmock reaction is registered, and the history is trimmed.

What is kept from kmock: its aiohttp ``Server`` (port, lifecycle), the request views and
reaction DSL (``handler['patch', kmock.resource(...)] << 500`` still works, store untouched)
and the ``Request`` objects recorded for assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import math
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml

from tests.support.kube_model import ApiError, ResourceType, Selector
from tests.support.kube_store import APPLY_PATCH, PATCH_TYPES, KubeStore, WatchEvent

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
_KMOCK_ACTIONS = {"get": kmock.action.FETCH, "list": kmock.action.LIST, "watch": kmock.action.WATCH,
                  "create": kmock.action.CREATE, "patch": kmock.action.UPDATE, "delete": kmock.action.DELETE}
SERVER_VERSION = {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "platform": "linux/amd64",
                  "goVersion": "go1.24.0", "compiler": "gc", "gitTreeState": "clean"}


@dataclasses.dataclass(frozen=True)
class Route:
    """Where a request goes: a discovery path or a resource path with its parts."""

    method: str
    path: str
    verb: str | None = None
    group: str | None = None
    version: str | None = None
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    resource: ResourceType | None = None


def route_request(store: KubeStore, method: str, path: str, query: Mapping[str, str]) -> Route:
    """Split an API path into group, version, namespace, plural, name and subresource.

    ``/api/v1/namespaces/<x>/<y>`` is a namespaced collection only when ``<y>`` is a namespaced
    plural of that group/version; otherwise it is the namespace ``<x>`` and a subresource.
    """
    segments = [segment for segment in path.split("/") if segment]
    if segments[:1] == ["api"] and len(segments) >= 3:
        group, version, rest = "", segments[1], segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 4:
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return Route(method, path)
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        candidate = store.resource(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
    subresource = "/".join(rest[2:]) or None
    if method == "GET":
        verb = "watch" if query.get("watch") in ("true", "1") else "get" if name else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    return Route(method, path, verb, group, version, plural, namespace, name, subresource,
                 store.resource(group, version, plural))


@dataclasses.dataclass
class Fault:
    """An error the next matching request(s) get instead of being served; None matches any."""

    verb: str
    plural: str | None
    name: str | None
    namespace: str | None
    status: int
    times: int | None
    message: str | None = None
    retry_after: int | None = None
    hits: int = 0

    @property
    def remaining(self) -> int | float:
        return math.inf if self.times is None else self.times - self.hits

    def matches(self, route: Route) -> bool:
        return (route.verb is not None and self.verb in ("*", route.verb)
                and self.plural in (None, route.plural) and self.name in (None, route.name)
                and self.namespace in (None, route.namespace))


class FaultInjector:
    """Faults armed from the test thread and consumed by the server thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        if fault.verb not in (*VERBS, "*"):
            raise ValueError(f"verb must be one of {VERBS} or '*', got {fault.verb!r}")
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, route: Route) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(route):
                    fault.hits += 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()


@dataclasses.dataclass(eq=False)
class _WatchSession:
    """One open watch stream; ``cut`` is how the test asked to end it, if it did."""

    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    cut: str | None = None  # "graceful" (clean end of stream) or "abort" (dropped connection)


def _json_response(body: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


def _error_response(error: ApiError) -> aiohttp.web.Response:
    response = _json_response(error.status(), error.code)
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def _lines(events: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(json.dumps(event).encode() + b"\n" for event in events)


@attrs.define(kw_only=True, eq=False)
class KubeApiHandler(kmock.KubernetesEmulator):
    """Serves the Kubernetes REST protocol from a KubeStore; see the module docstring."""

    store: KubeStore
    faults: FaultInjector
    bookmark_interval: float = 1.0
    max_requests: int = 1000
    _sessions: set[_WatchSession] = attrs.field(factory=set, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _wake_pending: bool = attrs.field(default=False, init=False)
    _request_ids: itertools.count[int] = attrs.field(factory=itertools.count, init=False)

    def __attrs_post_init__(self) -> None:
        """Register none of kmock's fallback reactions: they would serve from kmock's own store.

        Only reactions a test adds with the DSL live in ``_payloads``, so an empty list means
        no reaction scan at all.
        """

    async def __aenter__(self) -> KubeApiHandler:
        await super().__aenter__()
        self._loop = asyncio.get_running_loop()
        self.store.subscribe(self._on_store_write)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.store.unsubscribe(self._on_store_write)
        await super().__aexit__(*exc_info)

    # Watch wake-ups -------------------------------------------------------------------------

    def _on_store_write(self) -> None:
        """Called by the writing thread: wake watchers once per burst of writes."""
        if self._wake_pending or self._loop is None:
            return
        self._wake_pending = True
        with contextlib.suppress(RuntimeError):  # the loop is closing; its watches are over
            self._loop.call_soon_threadsafe(self._wake_watchers)

    def _wake_watchers(self) -> None:
        self._wake_pending = False
        for session in self._sessions:
            session.wake.set()

    async def cut_watches(self, mode: str) -> int:
        """End every open watch ("graceful": clean end of stream; "abort": dropped connection)
        and wait until they are gone; returns how many there were."""
        sessions = list(self._sessions)
        for session in sessions:
            session.cut = mode
            session.wake.set()
        for _ in range(500):
            if not any(session in self._sessions for session in sessions):
                break
            await asyncio.sleep(0.01)
        return len(sessions)

    # Entry point ----------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw_request.read()
        route = route_request(self.store, raw_request.method, raw_request.path, raw_request.query)
        data: Any = None
        if body:
            with contextlib.suppress(ValueError):
                data = json.loads(body)
        request = self._record(raw_request, route, body, data)
        try:
            fault = self.faults.take(route)
            if fault is not None:
                return await self._serve_fault(raw_request, route, fault)
            if self._payloads:
                reaction = await self._serve_reaction(request)
                if reaction is not None:
                    return reaction
            return await self._serve(raw_request, route, body, data)
        except ApiError as error:
            return _error_response(error)

    def _record(self, raw_request: aiohttp.web.BaseRequest, route: Route, body: bytes, data: Any) -> kmock.Request:
        """Keep the request for kmock's views and DSL, trimming the history to ``max_requests``."""
        resource = (kmock.resource(group=route.group, version=route.version, plural=route.plural)
                    if route.plural is not None else None)
        request = kmock.Request(
            id=next(self._request_ids), method=raw_request.method, url=raw_request.url,
            params=dict(raw_request.query), headers=dict(raw_request.headers),
            cookies=dict(raw_request.cookies), body=body, text=body.decode(errors="replace"), data=data,
            action=_KMOCK_ACTIONS.get(route.verb or ""), resource=resource, namespace=route.namespace,
            name=route.name, subresource=route.subresource, raw_request=raw_request,
        )
        self._requests.append(request)
        if len(self._requests) > 2 * self.max_requests:
            del self._requests[:-self.max_requests]
        return request

    async def _serve_reaction(self, request: kmock.Request) -> aiohttp.web.StreamResponse | None:
        """The answer of a reaction added with kmock's DSL, or None when none claims the request.

        kmock's own matching loop is reused, skipping KubernetesEmulator's override of it
        (which would write to kmock's store before answering).
        """
        try:
            return await kmock.RawHandler._handle(self, request)
        except NotImplementedError:
            return None
        except Exception as error:  # a reaction whose payload raises, e.g. ``<< kmock.KubernetesError(...)``
            return await self._render_error(error)

    async def _serve_fault(self, raw_request: aiohttp.web.BaseRequest, route: Route,
                           fault: Fault) -> aiohttp.web.StreamResponse:
        error = ApiError.from_status_code(fault.status, route.resource, route.name, fault.message, fault.retry_after)
        if route.verb == "watch" and fault.status == 410:  # a real server says 410 inside the stream
            response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(raw_request)
            await response.write(_lines([{"type": "ERROR", "object": error.status()}]))
            await response.write_eof()
            return response
        return _error_response(error)

    async def _serve(self, raw_request: aiohttp.web.BaseRequest, route: Route, body: bytes,
                     data: Any) -> aiohttp.web.StreamResponse:
        if route.plural is None:
            if raw_request.method != "GET":
                raise ApiError(405, "MethodNotAllowed", "discovery documents can only be read")
            return _json_response(self._discovery(raw_request))
        resource = route.resource
        if resource is None or route.subresource not in (None, "status") or (
                route.subresource == "status" and not resource.status_subresource):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if route.verb == "watch":
            return await self._serve_watch(raw_request, route, resource)
        if route.name is None and route.verb in ("list", "create"):
            return self._serve_collection(raw_request, route, resource, body, data)
        if route.name is None or route.verb not in ("get", "update", "patch", "delete") or (
                resource.namespaced and route.namespace is None):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return self._serve_object(raw_request, route, resource, body, data)

    def _serve_collection(self, raw_request: aiohttp.web.BaseRequest, route: Route, resource: ResourceType,
                          body: bytes, data: Any) -> aiohttp.web.Response:
        """LIST (one namespace or all) and CREATE (201)."""
        if route.verb == "create":
            if resource.namespaced and route.namespace is None:
                raise ApiError(405, "MethodNotAllowed", "create namespaced objects under /namespaces/<namespace>/")
            result = self.store.create(resource, route.namespace, self._json_body(data, body),
                                       manager=self._manager(raw_request))
            return _json_response(result.object, 201)
        query = raw_request.query
        limit = query.get("limit", "")
        if limit and not limit.isdigit():
            raise ApiError.bad_request(f"invalid limit {limit!r}: must be a non-negative integer")
        selector = Selector.parse(query.get("labelSelector"), query.get("fieldSelector"))
        return _json_response(self.store.list(resource, route.namespace, selector, limit=int(limit or 0) or None,
                                              continue_token=query.get("continue")))

    def _serve_object(self, raw_request: aiohttp.web.BaseRequest, route: Route, resource: ResourceType,
                      body: bytes, data: Any) -> aiohttp.web.Response:
        """GET, PUT, PATCH and DELETE of one object or its ``/status``."""
        assert route.name is not None
        status = route.subresource == "status"
        if route.verb == "get":
            return _json_response(self.store.get(resource, route.namespace, route.name))
        if route.verb == "update":
            result = self.store.replace(resource, route.namespace, route.name, self._json_body(data, body),
                                        status=status, manager=self._manager(raw_request))
            return _json_response(result.object)
        if route.verb == "patch":
            return self._patch(raw_request, route, resource, body, data, status)
        if status:
            raise ApiError(405, "MethodNotAllowed", "the status subresource cannot be deleted")
        result = self.store.delete(resource, route.namespace, route.name, data if isinstance(data, Mapping) else None)
        if not result.removed:
            return _json_response(result.object, 202)
        if resource.custom:  # the real server answers the object for custom resources...
            return _json_response(result.object)
        details = {"name": route.name, "kind": resource.plural, "uid": result.object["metadata"]["uid"]}
        if resource.group:
            details["group"] = resource.group
        return _json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},  # ...and a Status otherwise
                               "status": "Success", "details": details})

    def _patch(self, raw_request: aiohttp.web.BaseRequest, route: Route, resource: ResourceType, body: bytes,
               data: Any, status: bool) -> aiohttp.web.Response:
        content_type = raw_request.content_type
        if content_type not in PATCH_TYPES:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types include: "
                           f"{', '.join(PATCH_TYPES)}")
        if content_type == APPLY_PATCH and data is None:
            try:
                data = yaml.safe_load(body)
            except yaml.YAMLError as error:
                raise ApiError.bad_request(f"error decoding YAML: {error}") from error
        assert route.name is not None
        result = self.store.patch(resource, route.namespace, route.name, content_type, self._json_body(data, body),
                                  status=status, manager=self._manager(raw_request, content_type == APPLY_PATCH),
                                  force=raw_request.query.get("force") in ("true", "1"))
        return _json_response(result.object, 201 if result.created else 200)

    @staticmethod
    def _json_body(data: Any, body: bytes) -> Any:
        if data is None:
            raise ApiError.bad_request(f"the request body is not valid JSON: {body[:80]!r}")
        return data

    @staticmethod
    def _manager(raw_request: aiohttp.web.BaseRequest, apply: bool = False) -> str | None:
        """The field manager: ``fieldManager``, or (not for apply) the user agent's product name,
        which is how the real server names managers of clients that do not say."""
        manager = raw_request.query.get("fieldManager")
        if manager or apply:
            return manager
        return raw_request.headers.get("User-Agent", "unknown").split("/")[0] or "unknown"

    # Discovery ------------------------------------------------------------------------------

    def _discovery(self, raw_request: aiohttp.web.BaseRequest) -> dict[str, Any]:
        """``/``, ``/version``, ``/api``, ``/apis`` and the group/version documents that
        ``kubernetes.dynamic.DynamicClient`` and kubectl read before anything else."""
        segments = [segment for segment in raw_request.path.split("/") if segment]
        resources = self.store.resources()
        groups: dict[str, list[str]] = {}
        for resource in resources:
            if resource.group and resource.version not in groups.setdefault(resource.group, []):
                groups[resource.group].append(resource.version)

        def group_document(name: str) -> dict[str, Any]:
            versions = [{"groupVersion": f"{name}/{version}", "version": version} for version in groups[name]]
            return {"name": name, "versions": versions, "preferredVersion": versions[0]}

        match segments:
            case []:
                paths = {"/api", "/api/v1", "/apis", "/version"}
                for name, versions in groups.items():
                    paths |= {f"/apis/{name}"} | {f"/apis/{name}/{version}" for version in versions}
                return {"paths": sorted(paths)}
            case ["version"]:
                return SERVER_VERSION
            case ["api"]:
                return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": raw_request.host}]}
            case ["apis"]:
                return {"kind": "APIGroupList", "apiVersion": "v1",
                        "groups": [group_document(name) for name in groups]}
            case ["apis", name] if name in groups:
                return {"kind": "APIGroup", "apiVersion": "v1", **group_document(name)}
            case ["api", version] | ["apis", _, version]:
                group = segments[1] if segments[0] == "apis" else ""
                served = [r for r in resources if (r.group, r.version) == (group, version)]
                if served:
                    return {"kind": "APIResourceList", "apiVersion": "v1",
                            "groupVersion": f"{group}/{version}" if group else version,
                            "resources": [entry for r in served for entry in r.discovery_entries()]}
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # Watch ----------------------------------------------------------------------------------

    async def _serve_watch(self, raw_request: aiohttp.web.BaseRequest, route: Route,
                           resource: ResourceType) -> aiohttp.web.StreamResponse:
        """Stream newline-delimited events: replay from ``resourceVersion`` (or synthetic ADDED
        without one), then live events, bookmarks and a clean end at ``timeoutSeconds``."""
        query = raw_request.query
        selector = Selector.parse(query.get("labelSelector"), query.get("fieldSelector"))
        since = query.get("resourceVersion", "")
        if since not in ("", "0") and not since.isdigit():
            raise ApiError.bad_request(f"invalid resourceVersion {since!r}: must be an integer")
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else math.inf
        except ValueError as error:
            raise ApiError.bad_request(f"invalid timeoutSeconds: {error}") from error
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(raw_request)
        session = _WatchSession()
        self._sessions.add(session)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            if since in ("", "0"):
                objects, cursor = self.store.snapshot(resource, route.namespace, selector, route.name)
                await response.write(_lines({"type": "ADDED", "object": obj} for obj in objects))
            else:
                cursor = int(since)
            next_bookmark = loop.time() + self.bookmark_interval if bookmarks else math.inf
            while session.cut is None:
                session.wake.clear()
                try:
                    events, cursor = self.store.events_since(resource, cursor)
                except ApiError as error:  # compacted: 410 inside the 200 stream, as a real server does
                    await response.write(_lines([{"type": "ERROR", "object": error.status()}]))
                    break
                visible = [shown for event in events if (shown := self._visible(event, route, selector))]
                if visible:
                    await response.write(_lines(visible))
                now = loop.time()
                if now >= deadline:
                    break
                if now >= next_bookmark:
                    await response.write(_lines([{"type": "BOOKMARK", "object": {
                        "kind": resource.kind, "apiVersion": resource.api_version,
                        "metadata": {"resourceVersion": str(cursor)}}}]))
                    next_bookmark = now + self.bookmark_interval
                if raw_request.transport is None or raw_request.transport.is_closing():
                    return response  # the client went away
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(session.wake.wait(), min(deadline, next_bookmark, now + 1.0) - now)
        except ConnectionResetError:  # the client went away mid-write
            return response
        finally:
            self._sessions.discard(session)
        if session.cut == "abort":
            if raw_request.transport is not None:
                raw_request.transport.close()  # no terminating chunk: the client sees a broken stream
            return response
        await response.write_eof()
        return response

    @staticmethod
    def _visible(event: WatchEvent, route: Route, selector: Selector) -> dict[str, Any] | None:
        """The event as this watcher sees it: objects entering or leaving the selector are
        ADDED or DELETED, as the real server reports them."""
        metadata = event.object["metadata"]
        if route.namespace is not None and metadata.get("namespace") != route.namespace:
            return None
        if route.name is not None and metadata.get("name") != route.name:
            return None
        if not selector:
            return {"type": event.type, "object": event.object}
        matches = selector.matches(event.object)
        if event.type != "MODIFIED":
            return {"type": event.type, "object": event.object} if matches else None
        matched = event.previous is not None and selector.matches(event.previous)
        if matches:
            return {"type": "MODIFIED" if matched else "ADDED", "object": event.object}
        return {"type": "DELETED", "object": event.object} if matched else None
