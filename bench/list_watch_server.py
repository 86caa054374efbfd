"""A local page source for the sync benchmarks: one namespace's InferenceModels over real HTTP, in
the shapes kube-apiserver answers list and watch requests, for the real ``kubernetes`` client.

Why not the real kube-apiserver for the figures named ``..._stub_server``: on this 2-core machine it
takes minutes to hold 100,000 objects (creating them runs at a few dozen to a few hundred per
second), and it cannot emit 1,000 watch events per second (each write costs it several
milliseconds), so neither a 100,000-object relist nor that event rate can be measured through it
within a benchmark's time. They measure the portal's headroom; the end-to-end figures beside them
(``sync.resync_ratio_vs_apiserver_list``, ``sync.watch_p99_ms_real_apiserver``) go through the real
apiserver at the rate it sustains.

- ``GET .../namespaces/<ns>/<plural>?limit=&continue=``: pages of objects made on demand (the
  server never holds the whole list), with ``metadata.continue`` and ``resourceVersion``.
- ``...&watch=true``: MODIFIED events at a fixed rate, event ``i`` written at ``start + i/rate``
  whatever the reader does (events are not slowed down by a slow consumer, as a busy cluster's are
  not); ``sent`` maps each event's resourceVersion to the ``time.perf_counter()`` it was written at.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

WATCH_BASE = 10_000_000  # resourceVersion of the first watch event (list pages are older)
Item = Callable[[int, int, str], dict[str, Any]]  # (index, generation, resourceVersion) -> object


class ListWatchServer:
    def __init__(self, namespace: str, objects: int, make_item: Item, rate: float = 0.0, events: int = 0) -> None:
        self.namespace, self.objects, self.make_item = namespace, objects, make_item
        self.rate, self.events = rate, events
        self.sent: dict[str, float] = {}
        self.list_resource_version = "1"
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="list-watch server", daemon=True)
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None

    def start(self) -> ListWatchServer:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _serve(self) -> int:
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_get("/apis/{group}/{version}/namespaces/{namespace}/{plural}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["namespace"] != self.namespace:
            return web.json_response({"kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request)
        limit = int(request.query.get("limit") or self.objects)
        offset = int(request.query.get("continue") or 0)
        end = min(self.objects, offset + limit)
        metadata = {"resourceVersion": self.list_resource_version}
        if end < self.objects:
            metadata["continue"] = str(end)
        body = {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": metadata,
            "items": [self.make_item(index, 1, str(1_000 + index)) for index in range(offset, end)],
        }
        return web.Response(body=json.dumps(body).encode(), content_type="application/json")

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        started = time.perf_counter()
        since = int(request.query.get("resourceVersion") or 0)
        first = since - WATCH_BASE + 1 if since >= WATCH_BASE else 0  # a reconnect resumes after its last event
        for number in range(first, self.events):
            delay = started + number / self.rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            resource_version = str(WATCH_BASE + number)
            item = self.make_item(number % self.objects, 2 + number // self.objects, resource_version)
            line = json.dumps({"type": "MODIFIED", "object": item}).encode() + b"\n"
            self.sent[resource_version] = time.perf_counter()
            await response.write(line)
        with contextlib.suppress(TimeoutError):  # then quiet until the watch's timeout, as a server's stream is
            await asyncio.wait_for(self._closing.wait(), float(request.query.get("timeoutSeconds") or 5))
        return response
