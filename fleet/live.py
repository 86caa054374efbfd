"""Pods and events of many clusters and namespaces, read live, each linked to the mirrored object
that owns it.

Kubernetes links a pod to what made it by owner references (Pod -> ReplicaSet -> Deployment ->
the custom resource; Pod -> Job -> CronJob -> ...); the chain is followed up to a uid the portal
mirrors (``KubeObject.uid``), whatever controller made the workloads. The reads are those of an
object page (clusters.live, one ClusterGateway per cluster), bounded by ``MAX_ROWS`` per page.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.config import ConfigException

from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, GatewayError
from clusters.kube.live import POD, WORKLOAD_KINDS, EventRow, PodRow
from clusters.kube.live import _event_row as event_row
from clusters.kube.live import _pod_row as pod_row
from clusters.models import Cluster
from clusters.web.portal import obj_url
from fleet.scopes import ClusterScope

MAX_ROWS = 500  # pods, and events, per page: a fleet view is filtered, not scrolled through


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


class _Tree:
    """uid -> (kind/name, owner uid) of one cluster's workloads and pods, and the mirrored uids."""

    def __init__(self, cluster: Cluster) -> None:
        self.nodes: dict[str, tuple[str, str]] = {}
        self.mirrored: dict[str, tuple[str, str]] = {}  # uid -> (kind/name, page)
        for model in all_models():
            for pk, uid, name in model.objects.filter(cluster=cluster).exclude(uid="").values_list("pk", "uid", "name"):
                row = model(pk=pk)
                self.mirrored[uid] = (f"{model.kube.kind}/{name}", obj_url(row))

    def add(self, item: dict[str, Any], kind: str) -> None:
        metadata = item["metadata"]
        references = metadata.get("ownerReferences") or []
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


def _pod(cluster: Cluster, item: dict[str, Any], owner: Owner) -> FleetPod:
    return FleetPod(cluster.name, item["metadata"].get("namespace", ""), pod_row(item, owner.text), owner)


def _event(cluster: Cluster, item: dict[str, Any], owner: Owner) -> FleetEvent:
    return FleetEvent(cluster.name, item["metadata"].get("namespace", ""), event_row(item), owner)


def _read_cluster(scope: ClusterScope, gateway: ClusterGateway, fleet: Fleet, events: bool) -> None:
    tree = _Tree(scope.cluster)
    pods: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    for namespace in scope.namespaces:
        for api_version, kind in WORKLOAD_KINDS:
            for item in gateway.builtin(api_version, kind).list("", namespace)[0]:
                tree.add(item, kind)
        for item in gateway.builtin(*POD).list("", namespace)[0]:
            tree.add(item, "Pod")
            pods.append(item)
        if events:
            found += gateway.builtin("v1", "Event").list("", namespace)[0]
    fleet.pods += [_pod(scope.cluster, item, tree.owner(item)) for item in pods]
    fleet.events += [_event(scope.cluster, item, tree.involved(item)) for item in found]


def read_fleet(scopes: Iterable[ClusterScope], events: bool) -> Fleet:
    """Pods (and, with ``events``, events) of every scope; a cluster that cannot be read adds a line
    to ``errors`` and the others are still shown."""
    fleet = Fleet()
    for scope in scopes:
        try:
            gateway = ClusterGateway(scope.cluster)
        except (GatewayError, ConfigException) as error:
            fleet.errors.append(f"Cluster {scope.cluster.name} could not be read: {error}")
            continue
        try:
            _read_cluster(scope, gateway, fleet, events)
        except GatewayError as error:
            fleet.errors.append(f"Cluster {scope.cluster.name} could not be read just now: {error}")
        finally:
            gateway.close()
    fleet.pods.sort(key=lambda pod: (pod.cluster, pod.namespace, pod.row.name))
    fleet.events.sort(key=lambda event: event.row.last_seen, reverse=True)
    return fleet


def matches(text: str, *fields: str) -> bool:
    """The page's search: ``text`` in any of the fields, case-insensitive; no text matches all."""
    return not text or any(text.lower() in value.lower() for value in fields)
