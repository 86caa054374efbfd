"""The list-then-watch loop every long-lived watch of the portal runs, as client-go's reflector.

List first, then watch from the list's resourceVersion with bookmarks; track the resourceVersion
(bookmarks included); on 410 relist; on 404 (a kind not served) relist after the backoff; give every
watch a server timeout (random 5-10 minutes) and a client read timeout; reconnect with backoff 0.8 s
doubling to 30 s, reset after 2 quiet minutes (DESIGN.md, "Facts the sync must respect"). Used by
the sync's watcher (``clusters.sync.watcher``: rows and reconciles) and by the informer caches of
built-in objects (``clusters.kube.informers``: what controllers and pages read), which differ only
in what a relist and an event do and in what they record.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from queue import Empty, Queue
from typing import Any

from django.db import close_old_connections, connection

from clusters.kube.client import ClusterGateway, GatewayError, GoneError, NotFoundError, TransientError
from clusters.models import Cluster

logger = logging.getLogger(__name__)

QUICK_410 = 5.0  # seconds: a 410 sooner than this after (re)connecting counts as a failure


@dataclass
class Backoff:
    """client-go's watch backoff: 0.8 s doubling to 30 s; reset once a stream stayed healthy 2 minutes."""

    initial: float = 0.8
    maximum: float = 30.0
    reset_after: float = 120.0
    current: float = field(default=0.0, init=False)

    def next_delay(self) -> float:
        self.current = min(self.maximum, self.current * 2 if self.current else self.initial)
        return self.current

    def stream_lasted(self, seconds: float) -> None:
        if seconds >= self.reset_after:
            self.current = 0.0


@dataclass
class WatchSettings:
    timeout_range: tuple[int, int] = (300, 600)
    backoff: Callable[[], Backoff] = Backoff
    idle_close: float = 1.0  # seconds without events after which a watch's database connection is closed


class WatchLoop:
    """One list-then-watch loop until ``stop``: relist on 410, reconnect with backoff on any error.

    Subclasses say how to relist (returning the resourceVersion to watch from), how to open the
    stream, and what an event does.
    """

    def __init__(
        self,
        cluster: Cluster,
        stop: threading.Event,
        settings: WatchSettings | None = None,
        gateway_factory: Callable[[Cluster], ClusterGateway] = ClusterGateway,
    ):
        self.cluster, self.stop = cluster, stop
        self.settings = settings or WatchSettings()
        self.gateway_factory = gateway_factory
        self.resource_version: str | None = None
        self.relists = 0

    name = "watch"
    kind = ""  # what the loop lists and watches, for the sync's health figures

    def relist(self, gateway: ClusterGateway) -> str:
        raise NotImplementedError

    def stream(self, gateway: ClusterGateway, timeout: int) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def not_served(self) -> None:
        """The API server answered 404 for what this loop lists or watches (a CRD deleted or not
        installed yet); by default nothing more than the relist that follows."""

    def listed(self) -> None:
        """A relist ended; the sync's watches count it in its health figures (none by default)."""

    def relisted_after_gone(self) -> None:
        """The resourceVersion expired (410) and a relist follows (not counted by default)."""

    def reconnected(self) -> None:
        """The stream failed and reconnects after the backoff (not counted by default)."""

    def apply_batch(self, events: list[dict[str, Any]]) -> None:
        """Act on a batch of ADDED/MODIFIED/DELETED events, in order; by default one at a time."""
        for event in events:
            self.apply(event["type"], event.get("object") or {})

    def run(self) -> None:
        backoff = self.settings.backoff()
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    gateway = self.gateway_factory(self.cluster)
                    try:
                        if self.resource_version is None:
                            self.relists += 1
                            self.resource_version = self.relist(gateway)
                            self.listed()
                        events = self.stream(gateway, random.randint(*self.settings.timeout_range))
                        for batch in batches(events, self.stop, self.settings.idle_close):
                            self.handle_batch(batch)
                    finally:
                        gateway.close()
                    backoff.stream_lasted(time.monotonic() - started)
                except NotFoundError as error:
                    # The kind went (its CRD deleted: the watch ends, and watching again answers 404)
                    # or is not served yet. Say so now, and relist on the next try instead of
                    # watching a resourceVersion again: the relist is what finds the kind back.
                    delay = backoff.next_delay()
                    logger.info("%s: not served (%s); relisting in %.1f s", self.name, error, delay)
                    self.not_served()
                    self.resource_version = None
                    self.reconnected()
                    connection.close()
                    self.stop.wait(delay)
                except GoneError:
                    logger.info("%s: resourceVersion %s expired; relisting", self.name, self.resource_version)
                    self.relisted_after_gone()
                    self.resource_version = None
                    if time.monotonic() - started < QUICK_410:
                        # 410 again right after a relist (a compaction storm, a lagging server):
                        # back off like any other failure instead of relisting in a tight loop.
                        self.stop.wait(backoff.next_delay())
                except Exception as error:
                    delay = backoff.next_delay()
                    logger.warning(
                        "%s: %s; reconnecting in %.1f s",
                        self.name,
                        error,
                        delay,
                        exc_info=not isinstance(error, GatewayError),
                    )
                    self.reconnected()
                    connection.close()
                    self.stop.wait(delay)
        finally:
            connection.close()

    def handle_batch(self, events: list[dict[str, Any]]) -> None:
        """Act on the events that arrived together, in order, and advance the tracked resourceVersion
        (bookmarks included) past the ones applied. An ERROR event ends the stream after the events
        before it are applied (410: relist)."""
        close_old_connections()
        pending: list[dict[str, Any]] = []
        for event in events:
            event_type, obj = event.get("type"), event.get("object") or {}
            if event_type == "ERROR":
                self._apply_pending(pending)
                code = obj.get("code")
                message = obj.get("message", "watch error")
                error = {410: GoneError, 404: NotFoundError}.get(code, TransientError)
                raise error(message, code or 0)
            if event_type != "BOOKMARK":
                pending.append(event)
            else:
                self._apply_pending(pending)
                self.resource_version = (obj.get("metadata") or {}).get("resourceVersion") or self.resource_version
        self._apply_pending(pending)

    def _apply_pending(self, pending: list[dict[str, Any]]) -> None:
        if pending:
            self.apply_batch(pending)
            last = (pending[-1].get("object") or {}).get("metadata") or {}
            self.resource_version = last.get("resourceVersion") or self.resource_version
            pending.clear()


_END = object()


def batches(
    events: Iterator[dict[str, Any]], stop: threading.Event, idle_close: float, limit: int = 500
) -> Iterator[list[dict[str, Any]]]:
    """The stream's events in batches: whatever arrived while the previous batch was applied (up to
    ``limit``), so a burst costs one transaction per batch, not several statements per event.

    A reader thread drains the stream into a queue (an exception it meets is re-raised here, after
    the events before it). While no event comes for ``idle_close`` seconds the thread's database
    connection is closed: 10 clusters x 5 kinds of quiet watches hold no connections."""
    queue: Queue = Queue()

    def read() -> None:
        try:
            for event in events:
                queue.put(event)
                if stop.is_set():
                    break
            queue.put(_END)
        except BaseException as error:  # handed to the consuming thread, which raises it
            queue.put(error)

    threading.Thread(target=read, name="watch reader", daemon=True).start()
    while not stop.is_set():
        try:
            first = queue.get(timeout=idle_close)
        except Empty:
            connection.close()
            continue
        batch: list[dict[str, Any]] = []
        item = first
        while True:
            if item is _END or isinstance(item, BaseException):
                if batch:
                    yield batch
                if isinstance(item, BaseException):
                    raise item
                return
            batch.append(item)
            if len(batch) >= limit or queue.empty():
                break
            item = queue.get_nowait()
        if stop.is_set():
            return
        yield batch
