"""Every replica's engine metrics, read in the background (never on a request's path).

A replica is watched from the first request that considers it until no request has for
``IDLE_SECONDS``; while watched, its ``/metrics`` (at the root of its address: an engine serves
them there whatever its API's prefix) is read every ``interval`` (llm-d's endpoint picker: 50 ms),
all replicas at once. A replica that answers something that is not an engine's metrics (a plain
backend, a proxy) is asked again only after ``NOT_ENGINE_RETRY_SECONDS``; one that cannot be
reached keeps its last state, which goes stale. The connections go through the gateway's guarded
connector, so a replica's address is checked on every socket as a request's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from urllib.parse import urlsplit

import aiohttp

from common.tracing import untraced
from inference_gateway.picking.engine_state import EngineState, NotEngineMetrics, parse
from inference_gateway.resolver import guarded_connector

logger = logging.getLogger(__name__)
IDLE_SECONDS = 60.0
NOT_ENGINE_RETRY_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 1.0


def metrics_url(replica_url: str) -> str:
    parts = urlsplit(replica_url)
    return f"{parts.scheme}://{parts.netloc}/metrics"


class Scraper:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.states: dict[str, EngineState] = {}
        self.watched: dict[str, float] = {}  # replica URL -> when a request last considered it
        self.not_engine_until: dict[str, float] = {}
        self.session: aiohttp.ClientSession | None = None
        self.task: asyncio.Task | None = None

    def watch(self, urls: list[str], now: float) -> None:
        """Keep these replicas' metrics fresh (called by every pick; starts the loop on first use)."""
        watched = self.watched
        for url in urls:
            watched[url] = now
        if self.task is None:
            self.task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        self.session = untraced(aiohttp.ClientSession(
            connector=guarded_connector(limit=0), cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=READ_TIMEOUT_SECONDS)))
        try:
            while True:
                now = time.monotonic()
                for url in [url for url, seen in self.watched.items() if now - seen > IDLE_SECONDS]:
                    del self.watched[url]
                    self.states.pop(url, None)
                due = [url for url in self.watched if self.not_engine_until.get(url, 0.0) <= now]
                if due:
                    await asyncio.gather(*(self._read(url) for url in due))
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - now)))
        finally:
            await self.session.close()

    async def _read(self, url: str) -> None:
        try:
            async with self.session.get(metrics_url(url), allow_redirects=False) as answer:
                text = await answer.text() if answer.status == 200 else ""
            if answer.status != 200:
                raise NotEngineMetrics(f"/metrics answered {answer.status}")
            self.states[url] = parse(text, time.monotonic())
            self.not_engine_until.pop(url, None)
        except NotEngineMetrics as error:
            if url not in self.not_engine_until:
                logger.info("replica %s reports no engine metrics (%s): picked by its load alone", url, error)
            self.not_engine_until[url] = time.monotonic() + NOT_ENGINE_RETRY_SECONDS
        except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError) as error:
            logger.debug("metrics of %s: %s", url, error)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
