"""Pods and events of many clusters and namespaces, as the process's informer caches hold them
(``clusters.kube.informers``: listed once, then watched), each linked to the mirrored object that
owns it.

Kubernetes links a pod to what made it by owner references (Pod -> ReplicaSet -> Deployment ->
the custom resource; Pod -> Job -> CronJob -> ...); the chain is followed up to a uid the portal
mirrors (``KubeObject.uid``), whatever controller made the workloads. Rows are those of an object
page (clusters.kube.live's PodRow and EventRow), bounded by ``MAX_ROWS`` per page.

Every cluster is read at once, not one after the other: each (cluster, namespace) is one read on a
thread of this process, and a page waits for them at most ``FLEET_READ_SECONDS`` (counted from when
each read began). A cluster that has not answered by then is named on the page ("did not answer
within ...") and the others are shown: the page never waits for the slowest cluster nor for a
cluster's own request timeout (10 s a request, read one after the other, made a member's page
7-12 s, staff's 15-25 s and every cluster a 500 at gunicorn's 60 s, issue 41). A read is kept for
``FLEET_KEPT_SECONDS`` and shared by the pages of this process that ask for it meanwhile (one read
of a cluster per worker, whoever looks, at most: a page's rows are a few seconds old at most, as
they were before by the time they were rendered); a read still in flight is joined, never started
twice, so a cluster that hangs holds one thread per worker until its request timeout, not one per
page.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_reads
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from clusters.kinds import all_models
from clusters.kube.client import GatewayError
from clusters.kube.informers import cached_items
from clusters.kube.live import EVENT, POD, WORKLOAD_KINDS, EventRow, PodRow
from clusters.kube.live import _event_row as event_row
from clusters.kube.live import _pod_row as pod_row
from clusters.models import Cluster
from clusters.web.portal import obj_url
from fleet.scopes import ClusterScope

logger = logging.getLogger(__name__)

MAX_ROWS = 500  # pods, and events, per page: a fleet view is filtered, not scrolled through
READ_THREADS = 16  # reads in flight at once per process: every cluster of a large fleet at once


@dataclass(frozen=True)
class Owner:
    """What a pod or event belongs to: the nearest workload (``kind/name``) and, where the chain
    reaches one, the mirrored object's page."""

    text: str = ""
    url: str = ""
    mirrored: str = ""  # "InferenceModel/llama-2-7b"


@dataclass(frozen=True)
class FleetPod:
    """A pod as an object page lists it (clusters.live.PodRow), with where it runs and its owner."""

    cluster: str
    namespace: str
    row: PodRow
    owner: Owner


@dataclass(frozen=True)
class FleetEvent:
    """An event as an object page lists it (clusters.live.EventRow), with where and whose it is."""

    cluster: str
    namespace: str
    row: EventRow
    owner: Owner


@dataclass
class Fleet:
    pods: list[FleetPod] = field(default_factory=list)
    events: list[FleetEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line per cluster that could not be read


@dataclass
class Lists:
    """One (cluster, namespace)'s workloads, pods and (when asked) events, as the cluster lists them."""

    workloads: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kind, item)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


ReadKey = tuple[int, str, str, str | None, bool]  # cluster id, its URL and last change, namespace, events


@dataclass
class _Read:
    started: float
    future: Future[Lists]
    failed_before: BaseException | None = None  # the last read's failure, when it failed


_reads: dict[ReadKey, _Read] = {}
_reads_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """The process's read threads, made on first use (after a server forks its workers)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="fleet-read")
    return _pool


def _read(cluster: Cluster, namespace: str | None, events: bool) -> Lists:
    """What the process's informers of one (cluster, namespace) hold; runs on a read thread, touching
    no database. The first read of a scope waits for its lists (one kind after the other, so a
    cluster that hangs holds one connection, not one per kind); later ones cost no request."""
    lists = Lists()
    for api_version, kind in WORKLOAD_KINDS:
        lists.workloads += [(kind, item) for item in cached_items(cluster, api_version, kind, namespace)]
    lists.pods = cached_items(cluster, *POD, namespace)
    if events:
        lists.events = cached_items(cluster, *EVENT, namespace)
    return lists


def _start(cluster: Cluster, namespace: str | None, events: bool, now: float) -> _Read:
    """The kept read of (cluster, namespace), started unless one began less than
    ``FLEET_KEPT_SECONDS`` ago or is still in flight. A read after a failed one carries that
    failure: pages name it at once rather than wait for the cluster again (a cluster that hangs
    would cost a page ``FLEET_READ_SECONDS`` every time its last failure expired)."""
    key = (cluster.pk, cluster.server_url, cluster.updated_at.isoformat() if cluster.updated_at else "", namespace,
           events)  # fmt: skip
    with _reads_lock:
        read = _reads.get(key)
        if read is None or (read.future.done() and now - read.started >= settings.FLEET_KEPT_SECONDS):
            failed = read.future.exception() if read is not None else None
            for stale in [k for k, r in _reads.items() if r.future.done()
                          and now - r.started >= settings.FLEET_KEPT_SECONDS]:  # fmt: skip
                del _reads[stale]
            read = _reads[key] = _Read(now, _executor().submit(_read, cluster, namespace, events), failed)
        return read


class _Tree:
    """uid -> (kind/name, owner uid) of one cluster's workloads and pods, and the mirrored uids."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[str, str]] = {}
        self.mirrored: dict[str, tuple[str, str]] = {}  # uid -> (kind/name, page)
        self.referenced: set[str] = set()  # uids pointed at: owners, and what events are about

    def add(self, item: dict[str, Any], kind: str) -> None:
        metadata = item["metadata"]
        references = metadata.get("ownerReferences") or []
        self.referenced.update(reference.get("uid", "") for reference in references)
        self.nodes[metadata["uid"]] = (f"{kind}/{metadata['name']}", references[0].get("uid", "") if references else "")

    def owner(self, item: dict[str, Any]) -> Owner:
        references = item["metadata"].get("ownerReferences") or []
        if not references:
            return Owner()
        first = references[0]
        text, uid, seen = f"{first.get('kind')}/{first.get('name')}", first.get("uid", ""), set()
        while uid and uid not in seen:
            seen.add(uid)
            if uid in self.mirrored:
                mirrored, url = self.mirrored[uid]
                return Owner(text, url, mirrored)
            uid = self.nodes.get(uid, ("", ""))[1]
        return Owner(text)

    def involved(self, event: dict[str, Any]) -> Owner:
        involved = event.get("involvedObject") or {}
        uid = involved.get("uid", "")
        if uid in self.mirrored:
            mirrored, url = self.mirrored[uid]
            return Owner(mirrored, url, mirrored)
        if uid in self.nodes:
            return self.owner({"metadata": {"ownerReferences": [{"uid": uid, "kind": involved.get("kind"),
                                                                  "name": involved.get("name")}]}})  # fmt: skip
        return Owner()


def _find_mirrored(trees: dict[int, _Tree]) -> None:
    """Fill each tree's mirrored objects: the rows of the mirrored kinds whose uid a workload or an
    event of the tree points at and the cluster did not list itself (one query per kind, for
    those uids only: every uid of every cluster was 100,000 rows read for a page at platform scale)."""
    wanted = {cluster_id: tree.referenced - tree.nodes.keys() - {""} for cluster_id, tree in trees.items()}
    uids = set().union(*wanted.values()) if wanted else set()
    if not uids:
        return
    for model in all_models():
        rows = model.objects.order_by().filter(cluster_id__in=list(trees), uid__in=uids)
        for pk, cluster_id, uid, name in rows.values_list("pk", "cluster_id", "uid", "name"):
            trees[cluster_id].mirrored[uid] = (f"{model.kube.kind}/{name}", obj_url(model(pk=pk)))


def _waited(read: _Read, deadline: float) -> None:
    """Wait for ``read`` until ``deadline`` at most, and never past ``FLEET_READ_SECONDS`` since it
    began; not at all for a read after a failed one."""
    if read.failed_before is not None:
        return
    wait_for_reads([read.future], timeout=max(0.0, min(deadline, read.started + settings.FLEET_READ_SECONDS)
                                              - time.monotonic()))  # fmt: skip


def read_fleet(scopes: Iterable[ClusterScope], events: bool) -> Fleet:
    """Pods (and, with ``events``, events) of every scope; a cluster that cannot be read, or does not
    answer within ``FLEET_READ_SECONDS``, adds a line to ``errors`` and the others are still shown."""
    fleet = Fleet()
    now = time.monotonic()
    deadline = now + settings.FLEET_READ_SECONDS
    started = [(scope, [(_start(scope.cluster, namespace, events, now)) for namespace in scope.namespaces])
               for scope in scopes]  # fmt: skip
    trees: dict[int, _Tree] = {}
    answered: list[tuple[Cluster, _Tree, list[Lists]]] = []
    for scope, reads in started:
        cluster = scope.cluster
        for read in reads:
            _waited(read, deadline)
        failed = [read.future.exception() if read.future.done() else read.failed_before for read in reads]
        failed = [error for error in failed if error is not None]
        late = [read for read in reads if not read.future.done() and read.failed_before is None]
        if late:
            waited = time.monotonic() - min(read.started for read in late)
            fleet.errors.append(f"Cluster {cluster.name} did not answer within {settings.FLEET_READ_SECONDS:g} s "
                                f"(asked {waited:.1f} s ago); the other clusters are shown.")  # fmt: skip
            continue
        if failed:
            error = failed[0]
            if not isinstance(error, GatewayError):  # a TLS or decoding failure: named, and logged whole
                logger.warning("fleet read of cluster %s failed", cluster.name, exc_info=error)
            fleet.errors.append(f"Cluster {cluster.name} could not be read just now: "
                                f"{error if isinstance(error, GatewayError) else type(error).__name__}")  # fmt: skip
            continue
        tree = trees[cluster.pk] = _Tree()
        lists = [read.future.result() for read in reads]
        for listed in lists:
            for kind, item in listed.workloads:
                tree.add(item, kind)
            for item in listed.pods:
                tree.add(item, "Pod")
            for item in listed.events:
                involved = (item.get("involvedObject") or {}).get("uid")
                if involved:
                    tree.referenced.add(involved)
        answered.append((cluster, tree, lists))
    _find_mirrored(trees)
    for cluster, tree, lists in answered:
        for listed in lists:
            fleet.pods += [_pod(cluster, item, tree.owner(item)) for item in listed.pods]
            fleet.events += [_event(cluster, item, tree.involved(item)) for item in listed.events]
    fleet.pods.sort(key=lambda pod: (pod.cluster, pod.namespace, pod.row.name))
    fleet.events.sort(key=lambda event: event.row.last_seen, reverse=True)
    return fleet


def _pod(cluster: Cluster, item: dict[str, Any], owner: Owner) -> FleetPod:
    return FleetPod(cluster.name, item["metadata"].get("namespace", ""), pod_row(item, owner.text), owner)


def _event(cluster: Cluster, item: dict[str, Any], owner: Owner) -> FleetEvent:
    return FleetEvent(cluster.name, item["metadata"].get("namespace", ""), event_row(item), owner)


def matches(text: str, *fields: str) -> bool:
    """The page's search: ``text`` in any of the fields, case-insensitive; no text matches all."""
    return not text or any(text.lower() in value.lower() for value in fields)
