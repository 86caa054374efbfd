"""Cluster -> portal within a second: one watch per mirrored kind (and namespace) per cluster.

Each runs the reflector's loop (``clusters.kube.watching.WatchLoop``: list, watch from the list's
resourceVersion with bookmarks, relist on 410, backoff 0.8 s doubling to 30 s); on 404 (a CRD
deleted, or not installed yet) the kind is named in the cluster's ``missing_kinds`` and relisted
after the backoff, which finds it back. Their relists and reconnects count in the sync's health
figures. Only one process watches a cluster: the holder of its Lease (clusters/sync/leader.py,
clusters/sync/watch_supervisor.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from clusters.controller_registry import ChildKind, controller_children
from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, NotFoundError
from clusters.kube.watching import WatchLoop, WatchSettings
from clusters.models import Cluster, KubeObject, SyncState
from clusters.sync import stats as sync_stats
from clusters.sync.inbound import mark_deleted_in_cluster
from clusters.sync.ingest import ingest
from clusters.sync.resync import ResyncReport, record_served, resync_namespace

logger = logging.getLogger(__name__)


class SyncWatchLoop(WatchLoop):
    """A watch of the sync: its relists and reconnects count in the cluster's sync-health figures."""

    def listed(self) -> None:
        sync_stats.listed(self.cluster, self.kind)

    def relisted_after_gone(self) -> None:
        sync_stats.relisted_after_gone(self.cluster, self.kind)

    def reconnected(self) -> None:
        sync_stats.watch_reconnected(self.cluster, self.kind)


class KindWatcher(SyncWatchLoop):
    """Keeps the rows of one (cluster, kind, namespace) current; queues reconciles for managed kinds."""

    def __init__(
        self, cluster: Cluster, model: type[KubeObject], namespace: str | None, stop: threading.Event, **options: Any
    ):
        super().__init__(cluster, stop, **options)
        self.model, self.namespace = model, namespace
        self.kind = model.kube.kind

    @property
    def name(self) -> str:
        return f"{self.cluster.name}/{self.model.kube.plural}/{self.namespace or '*'}"

    def relist(self, gateway: ClusterGateway) -> str:
        """Resync, and (like a controller's initial list) reconcile every object of a managed kind."""
        try:
            resource_version = resync_namespace(gateway, self.model, self.namespace, ResyncReport(self.kind))
        except NotFoundError:  # the CRD is not served (yet): not_served, then a relist after the backoff
            raise
        record_served(self.cluster, self.kind, True)
        if self.cluster.manages(self.model.kube.kind):
            from clusters.sync.tasks import enqueue_reconcile

            rows = self.model.objects.filter(cluster=self.cluster).exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
            for row in (rows.filter(namespace=self.namespace) if self.namespace else rows).select_related("cluster"):
                enqueue_reconcile(row)
        return resource_version

    def not_served(self) -> None:
        """``missing_kinds`` names the kind from the first 404 (of the list or the watch), and drops
        it at the first relist that finds it served: both within one backoff."""
        record_served(self.cluster, self.kind, False)

    def stream(self, gateway: ClusterGateway, timeout: int) -> Iterator[dict[str, Any]]:
        return gateway.watch(self.model.kube, self.namespace, self.resource_version or "", timeout)

    def apply_batch(self, events: list[dict[str, Any]]) -> None:
        """Store a batch of events in order: each run of ADDED/MODIFIED events in bulk (the last
        version of each object counts, clusters/sync/ingest.py), each DELETED on its own, so an
        object deleted and created again within a batch ends as the cluster has it."""
        written: list[int] = []
        run: list[dict[str, Any]] = []
        for event in [*events, None]:
            if event is not None and event["type"] in ("ADDED", "MODIFIED"):
                run.append(event["object"])
                continue
            if run:
                written += ingest(self.model, self.cluster, run, listed_at=None).values()
                run = []
            if event is not None and event["type"] == "DELETED":
                metadata = event["object"].get("metadata") or {}
                row = mark_deleted_in_cluster(
                    self.model, self.cluster, metadata.get("namespace") or "default", metadata["name"],
                    metadata.get("uid"),
                )
                if row is not None:
                    written.append(row.pk)  # the controller forgets what it held for the object
        if written and self.cluster.manages(self.model.kube.kind):
            from clusters.sync.tasks import reconcile_object_task

            for pk in dict.fromkeys(written):
                reconcile_object_task.delay(self.model._meta.label, pk)


class ChildWatcher(SyncWatchLoop):
    """Watches the objects a managed kind owns (Deployments, Jobs) and reconciles their owner at once,
    so a pod becoming ready reaches the model's status within a second, not a polling interval."""

    def __init__(
        self,
        cluster: Cluster,
        owner: type[KubeObject],
        child: ChildKind,
        namespace: str | None,
        stop: threading.Event,
        **options: Any,
    ):
        super().__init__(cluster, stop, **options)
        self.owner, self.child, self.namespace = owner, child, namespace
        self.kind = child.kind

    @property
    def name(self) -> str:
        return f"{self.cluster.name}/{self.child.kind}s of {self.owner.kube.plural}/{self.namespace or '*'}"

    def relist(self, gateway: ClusterGateway) -> str:
        resource = gateway.builtin(self.child.api_version, self.child.kind)
        items, resource_version = resource.list(self.child.selector, self.namespace)
        for item in items:
            self.apply("ADDED", item)
        return resource_version

    def stream(self, gateway: ClusterGateway, timeout: int) -> Iterator[dict[str, Any]]:
        resource = gateway.builtin(self.child.api_version, self.child.kind)
        return resource.watch(self.child.selector, self.resource_version or "", timeout, self.namespace)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        for reference in metadata.get("ownerReferences") or []:
            if reference.get("kind") != self.owner.kube.kind:
                continue
            row = (
                self.owner.objects.select_related("cluster")
                .filter(cluster=self.cluster, namespace=metadata.get("namespace"), name=reference.get("name"))
                .first()
            )
            if row is not None:
                from clusters.sync.tasks import enqueue_reconcile

                enqueue_reconcile(row)


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
        self.watchers: list[WatchLoop] = [
            KindWatcher(cluster, model, namespace, stop, settings=settings, gateway_factory=gateway_factory)
            for model in all_models()
            for namespace in cluster.namespaces or [None]
        ]
        self.watchers += [
            ChildWatcher(cluster, model, child, namespace, stop, settings=settings, gateway_factory=gateway_factory)
            for model in all_models()
            if cluster.manages(model.kube.kind)
            for child in controller_children(model.kube.kind)
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
