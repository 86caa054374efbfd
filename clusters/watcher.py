"""Cluster -> portal within a second: one watch per mirrored kind (and namespace) per cluster.

Follows client-go's reflector (DESIGN.md, "Facts the sync must respect"): list first, then watch
from the list's resourceVersion with bookmarks; track the resourceVersion ourselves (bookmarks
included); on 410 relist; give every watch a server timeout (random 5-10 minutes) and a client
read timeout; reconnect with backoff 0.8 s doubling to 30 s, reset after 2 quiet minutes. Only
one process watches a cluster: it holds a PostgreSQL advisory lock per cluster (SQLite, the
single-process embedded default, needs none).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections, connection, connections

from clusters.gateway import ClusterGateway, GatewayError, GoneError, TransientError
from clusters.inbound import mark_deleted_in_cluster, upsert_from_cluster
from clusters.kinds import all_models
from clusters.models import Cluster, KubeObject
from clusters.resync import ResyncReport, resync_namespace

logger = logging.getLogger(__name__)


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


class KindWatcher:
    """Keeps the rows of one (cluster, kind, namespace) current until ``stop`` is set."""

    def __init__(
        self,
        cluster: Cluster,
        model: type[KubeObject],
        namespace: str | None,
        stop: threading.Event,
        settings: WatchSettings | None = None,
        gateway_factory: Callable[[Cluster], ClusterGateway] = ClusterGateway,
    ):
        self.cluster, self.model, self.namespace, self.stop = cluster, model, namespace, stop
        self.settings = settings or WatchSettings()
        self.gateway_factory = gateway_factory
        self.resource_version: str | None = None
        self.events_handled = 0
        self.relists = 0

    @property
    def name(self) -> str:
        return f"{self.cluster.name}/{self.model.kube.plural}/{self.namespace or '*'}"

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
                            self.resource_version = resync_namespace(
                                gateway, self.model, self.namespace, ResyncReport(self.model.kube.kind)
                            )
                        self._watch(gateway)
                    finally:
                        gateway.close()
                    backoff.stream_lasted(time.monotonic() - started)
                except GoneError:
                    logger.info("%s: resourceVersion %s expired; relisting", self.name, self.resource_version)
                    self.resource_version = None
                except Exception as error:
                    delay = backoff.next_delay()
                    logger.warning(
                        "%s: %s; reconnecting in %.1f s",
                        self.name,
                        error,
                        delay,
                        exc_info=not isinstance(error, GatewayError),
                    )
                    connection.close()
                    self.stop.wait(delay)
        finally:
            connection.close()

    def _watch(self, gateway: ClusterGateway) -> None:
        timeout = random.randint(*self.settings.timeout_range)
        for event in gateway.watch(self.model.kube, self.namespace, self.resource_version or "", timeout):
            if self.stop.is_set():
                return
            self.handle(event)

    def handle(self, event: dict[str, Any]) -> None:
        """Apply one watch event to the database and advance the tracked resourceVersion."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            message = obj.get("message", "watch error")
            raise GoneError(message, 410) if code == 410 else TransientError(message, code or 0)
        metadata = obj.get("metadata") or {}
        close_old_connections()
        if kind in ("ADDED", "MODIFIED"):
            row = upsert_from_cluster(self.model, self.cluster, obj)
            if row is not None and self.cluster.manages(self.model.kube.kind):
                from clusters.tasks import enqueue_reconcile

                enqueue_reconcile(row)
        elif kind == "DELETED":
            mark_deleted_in_cluster(
                self.model, self.cluster, metadata.get("namespace") or "default", metadata["name"], metadata.get("uid")
            )
        self.resource_version = metadata.get("resourceVersion") or self.resource_version
        self.events_handled += kind != "BOOKMARK"


def advisory_lock_key(cluster: Cluster) -> int:
    """A stable signed 63-bit key per cluster for pg_try_advisory_lock."""
    return zlib.crc32(f"inference-portal:sync_watch:{cluster.name}".encode())


def try_lead(cluster: Cluster, using: str = "default") -> bool:
    """Become the one watcher of this cluster (PostgreSQL session lock); always True elsewhere."""
    db = connections[using]
    if db.vendor != "postgresql":
        return True
    with db.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [advisory_lock_key(cluster)])
        return bool(cursor.fetchone()[0])


def release_lead(cluster: Cluster, using: str = "default") -> None:
    db = connections[using]
    if db.vendor == "postgresql" and db.connection is not None:
        with db.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [advisory_lock_key(cluster)])


class ClusterWatch:
    """All watchers of one cluster, in threads; started once this process leads the cluster."""

    def __init__(
        self,
        cluster: Cluster,
        stop: threading.Event,
        settings: WatchSettings | None = None,
        gateway_factory: Callable[[Cluster], ClusterGateway] = ClusterGateway,
    ):
        self.cluster, self.stop = cluster, stop
        self.watchers = [
            KindWatcher(cluster, model, namespace, stop, settings, gateway_factory)
            for model in all_models()
            for namespace in cluster.namespaces or [None]
        ]
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for watcher in self.watchers:
            thread = threading.Thread(target=watcher.run, name=f"watch {watcher.name}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def join(self, timeout: float) -> bool:
        """Wait for the threads to notice ``stop``; True when all ended in time."""
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self.threads)
