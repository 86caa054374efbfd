"""Informer caches: what the portal reads about a cluster's built-in objects, from shared watches.

Issue 44: the controllers read each object's Deployment or Job, the Events of every failing object
and the pods of every starting one live, on every pass (2,089 requests a minute for 154 models at
a 15 s poll). As client-go's shared informers, one :class:`Informer` per (cluster, kind, namespace,
label selector) and process lists once, then watches from the list's resourceVersion with
bookmarks, relists on 410 and reconnects with backoff (``clusters.kube.watching.WatchLoop``, the
loop of the sync's own watcher), and keeps every object in memory. Whoever reads the same scope in
the process shares it: the controller passes (the Deployments and Jobs they own), the Warning
Events' aggregation (``clusters.kube.failures.record_event``), the scheduler's word on pods it
cannot place, admission's count of the pods on a pool's nodes, and an object page's live panel.
A read costs no request once the cache has listed; an idle one costs a watch request every 5-10
minutes, whatever the number of objects.

What is read is what the cache has seen, as an informer's reader gets: at most the watch's latency
behind the cluster, which a controller tolerates (a write from stale knowledge is refused by its
precondition or makes one more apply). A process's own writes go into its cache at once
(:meth:`Informer.wrote`), so its next read never misses them. Objects read are shared, never
copied: callers must not change them.

An informer nobody read for ``IDLE_SECONDS`` stops (a page looked at once does not keep a watch
for ever); a cluster whose row changed (credentials, URL: the key holds its ``updated_at``) gets new
ones, and the old ones, read no more, stop so. A cache that has not listed yet makes its first
reader wait for the list, up to the cluster's request timeout; a cluster that cannot be listed
raises that failure to the reader.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from django.conf import settings
from kubernetes.config import ConfigException

from clusters.kube.client import ClusterGateway, GatewayError, PermanentError, TransientError, on_builtin_write
from clusters.kube.watching import WatchLoop, WatchSettings
from clusters.models import Cluster

IDLE_SECONDS = 900.0
"""An informer unread this long stops; longer than the beat's 5-minute resync, so a worker's stay."""

Key = tuple[int, str, str, str, str | None, str]  # cluster id, its last change, apiVersion, kind, namespace, selector


def selector_matches(labels: Mapping[str, str] | None, selector: str) -> bool:
    """Whether ``labels`` satisfy an equality-based label selector (``a=b,c``: ``a`` is ``b``, ``c``
    is set; ``a!=b``), the only form the portal's own selectors use."""
    labels = labels or {}
    for term in filter(None, (part.strip() for part in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term not in labels:
            return False
    return True


class Informer(WatchLoop):
    """One shared cache of a built-in kind's objects in a namespace (None: every namespace) that carry
    a label selector ("" : all), kept current by a list and a watch on a thread of its own."""

    def __init__(self, cluster: Cluster, api_version: str, kind: str, namespace: str | None, selector: str = "",
                 settings: WatchSettings | None = None):
        super().__init__(cluster, threading.Event(), settings, gateway_factory=self._connect)
        self.api_version, self.kind, self.namespace, self.selector = api_version, kind, namespace, selector
        self.synced = threading.Event()
        self.failure: GatewayError | None = None  # why the last list failed, until one succeeds
        self.last_read = time.monotonic()
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        where = self.namespace or "*"
        return f"{self.cluster.name}/{self.kind}s/{where}{f' ({self.selector})' if self.selector else ''} cache"

    def start(self) -> Informer:
        threading.Thread(target=self.run, name=f"informer {self.name}", daemon=True).start()
        return self

    # -- the loop's steps ---------------------------------------------------------------------------------
    def _connect(self, cluster: Cluster) -> ClusterGateway:
        """A gateway for one list or watch; a cluster that cannot have one (no API server, a
        kubeconfig that cannot be read) is a failure its readers get at once."""
        try:
            return ClusterGateway(cluster)
        except GatewayError as error:
            self.failure = error
            raise
        except ConfigException as error:
            self.failure = PermanentError(str(error))
            raise self.failure from None

    def relist(self, gateway: ClusterGateway) -> str:
        """Replace the cache by a fresh paged list; its resourceVersion is where the watch starts."""
        resource = gateway.builtin(self.api_version, self.kind)
        items: list[dict[str, Any]] = []
        token: str | None = None
        try:
            while True:
                page = resource.list_page(self.selector, self.namespace, settings.SYNC_LIST_PAGE_SIZE, token)
                items += page.items
                if not (token := page.continue_token):
                    break
        except GatewayError as error:
            self.failure = error
            raise
        for item in items:  # a list's items carry no kind; a watch event's and a GET's do
            item.setdefault("apiVersion", self.api_version)
            item.setdefault("kind", self.kind)
        with self._lock:
            self._objects = {_key(item): item for item in items}
        self.failure = None
        self.synced.set()
        return page.resource_version

    def stream(self, gateway: ClusterGateway, timeout: int) -> Iterator[dict[str, Any]]:
        resource = gateway.builtin(self.api_version, self.kind)
        return resource.watch(self.selector, self.resource_version or "", timeout, self.namespace)

    def apply_batch(self, events: list[dict[str, Any]]) -> None:
        with self._lock:
            for event in events:
                obj = event.get("object") or {}
                if not (obj.get("metadata") or {}).get("name"):
                    continue
                if event["type"] == "DELETED":
                    self._objects.pop(_key(obj), None)
                else:
                    self._objects[_key(obj)] = obj

    # -- reading ---------------------------------------------------------------------------------------------
    def wait_synced(self, timeout: float) -> None:
        """Return once the cache has listed; raise the list's failure, or TransientError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not self.synced.wait(0.05):
            failure = self.failure
            if failure is not None:
                raise type(failure)(str(failure), failure.status, failure.body, failure.retry_after)
            if time.monotonic() > deadline:
                raise TransientError(f"{self.name}: not listed within {timeout:g} s")

    def items(self, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
        """The cached objects (of ``namespace`` and with the labels of ``selector``, when given), by name."""
        self.last_read = time.monotonic()
        with self._lock:
            found = list(self._objects.values())
        return sorted((item for item in found
                       if (namespace is None or item["metadata"].get("namespace") == namespace)
                       and selector_matches(item["metadata"].get("labels"), selector)),
                      key=lambda item: item["metadata"]["name"])  # fmt: skip

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The cached object of that name, or None."""
        self.last_read = time.monotonic()
        with self._lock:
            return self._objects.get((namespace, name))

    def wrote(self, obj: dict[str, Any] | None, namespace: str = "", name: str = "") -> None:
        """The process wrote an object of this scope: keep the API server's answer (or, without one,
        forget ``namespace``/``name``), so its next read sees its own write before the watch brings it.
        An answer the watch has already overtaken (the object's controller moved it on between the
        answer and this call) changes nothing: as client-go's mutation cache, the later
        resourceVersion wins, compared as etcd's revisions."""
        with self._lock:
            if obj and _is_older(obj, self._objects.get(_key(obj))):
                return
            if obj and selector_matches(obj["metadata"].get("labels"), self.selector):
                self._objects[_key(obj)] = obj
            else:
                self._objects.pop(_key(obj) if obj else (namespace, name), None)


def _is_older(obj: dict[str, Any], cached: dict[str, Any] | None) -> bool:
    """Whether ``cached`` is a later version of ``obj`` than ``obj`` (resourceVersions are etcd's
    revisions, integers, in every API server the portal talks to; any other form is never older)."""
    if cached is None:
        return False
    mine, theirs = obj["metadata"].get("resourceVersion", ""), cached["metadata"].get("resourceVersion", "")
    return mine.isdigit() and theirs.isdigit() and int(mine) < int(theirs)


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj["metadata"]
    return metadata.get("namespace") or "", metadata["name"]


_informers: dict[Key, Informer] = {}
_lock = threading.Lock()


def informer(cluster: Cluster, api_version: str, kind: str, namespace: str | None, selector: str = "",
             wait: bool = True) -> Informer:
    """The process's informer of the scope, started on first use; with ``wait``, once it has listed
    (up to the cluster's request timeout, see :meth:`Informer.wait_synced`). Unread ones stop here."""
    key = (cluster.pk, cluster.updated_at.isoformat() if cluster.updated_at else "", api_version, kind, namespace,
           selector)  # fmt: skip
    now = time.monotonic()
    with _lock:
        for stale_key, stale in list(_informers.items()):
            if now - stale.last_read > IDLE_SECONDS:
                stale.stop.set()
                del _informers[stale_key]
        found = _informers.get(key)
        if found is None:
            found = _informers[key] = Informer(cluster, api_version, kind, namespace, selector).start()
        found.last_read = now
    if wait:
        found.wait_synced(cluster.request_timeout_seconds)
    return found


def cached_items(cluster: Cluster, api_version: str, kind: str, namespace: str | None, selector: str = ""
                 ) -> list[dict[str, Any]]:
    """What the process's informer of the scope holds now (see :func:`informer`)."""
    return informer(cluster, api_version, kind, namespace, selector).items()


def registered() -> list[tuple[Key, Informer]]:
    """Every informer of the process, with its key (cluster, apiVersion, kind, namespace, selector)."""
    with _lock:
        return list(_informers.items())


def covering(api_version: str, kind: str, namespace: str, cluster_id: int | None = None) -> list[Informer]:
    """The process's informers whose scope holds objects of the kind in ``namespace`` (of one cluster,
    or of any)."""
    return [found for key, found in registered()
            if cluster_id in (None, key[0]) and key[2:4] == (api_version, kind) and key[4] in (namespace, None)]


def _wrote_through(cluster: Cluster, api_version: str, kind: str, namespace: str, name: str,
                   answer: dict[str, Any] | None) -> None:
    """A gateway of this process wrote a built-in object: every informer whose scope holds it keeps it."""
    for found in covering(api_version, kind, namespace, cluster.pk):
        found.wrote(answer, namespace, name)


on_builtin_write(_wrote_through)


def _forget_after_fork() -> None:
    """A forked child (a Celery or gunicorn worker) has none of its parent's threads: informers
    inherited from before the fork would never change again, so the child starts its own."""
    global _lock
    _lock = threading.Lock()
    _informers.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def stop_all() -> None:
    """Stop every informer of the process (a test's end; a process that forks its workers)."""
    with _lock:
        for found in _informers.values():
            found.stop.set()
        _informers.clear()
