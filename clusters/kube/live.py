"""What a mirrored object owns in its cluster and what happens to it, as the cluster has it.

The portal's rows mirror only the custom resources; their Deployments, ReplicaSets, Jobs and Pods
and the Events about them exist only in the cluster, so the object pages read them from the
process's informer caches of the object's namespace only (``clusters.kube.informers``: a list the
first time, then a watch; the page has already checked that the user's teams may see that object).

An object's workloads are found the way Kubernetes links them: by owner references, from the
custom resource's uid down (Deployment -> ReplicaSet -> Pod, CronJob -> Job -> Pod). Each kind
narrows the lists with the labels its controller sets (:data:`SCOPES`); where a reference
describes pod labels instead of owner references (llm-d's ``llm-d.ai/model`` on ModelService
pods), pods carrying them count too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.config import ConfigException

from clusters.kube.client import ClusterGateway, GatewayError, PermanentError
from clusters.kube.informers import informer
from clusters.kube.owned import label_value
from clusters.models import KubeObject

WORKLOAD_KINDS = (("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("batch/v1", "CronJob"), ("batch/v1", "Job"))
POD = ("v1", "Pod")
EVENT = ("v1", "Event")
MAX_EVENTS = 50


@dataclass(frozen=True)
class Scope:
    """How to find one kind's objects: a label selector per listed kind ("" lists the namespace)
    and a selector whose pods belong to the object by label alone (no owner reference needed)."""

    selectors: dict[str, str] = field(default_factory=dict)
    pods_by_label: str = ""


def _label(key: str) -> Callable[[KubeObject], str]:
    return lambda obj: f"{key}={label_value(obj.name)}"


def _same_selector(key: str) -> Callable[[KubeObject], Scope]:
    """Every listed kind carries the label (the portal's controllers put it on workloads and pod templates)."""
    return lambda obj: Scope({kind: _label(key)(obj) for _, kind in (*WORKLOAD_KINDS, POD)})


# Labels the controllers set: models_app.controller.deployment_labels, runs_app.controller._labels,
# and llm-d's PodLabelsForRole (ModelService, reference 004). Kinds not listed are found by owner
# references alone, in the whole namespace.
SCOPES: dict[str, Callable[[KubeObject], Scope]] = {
    "InferenceModel": _same_selector("app.kubernetes.io/name"),
    "InferenceRun": _same_selector("ai.krateo.io/inference-run"),
    "ModelService": lambda obj: Scope({"Pod": f"llm-d.ai/model={label_value(obj.name)}"},
                                      pods_by_label=f"llm-d.ai/model={label_value(obj.name)}"),
}


@dataclass
class Workload:
    kind: str
    name: str
    ready: str  # "2/3" for Deployments and ReplicaSets; Job: succeeded/failed/active
    created: str
    owner: str  # "Deployment/llama" or the custom resource's kind/name


@dataclass
class PodRow:
    name: str
    phase: str
    ready: str
    restarts: int
    node: str
    containers: list[str]
    owner: str
    created: str


@dataclass
class EventRow:
    type: str
    reason: str
    involved: str
    message: str
    count: int
    last_seen: str


@dataclass
class LiveObjects:
    """What the page shows; ``error`` says why nothing could be read (the cluster is not reached)."""

    workloads: list[Workload] = field(default_factory=list)
    pods: list[PodRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    error: str = ""

    def pod_names(self) -> set[str]:
        return {pod.name for pod in self.pods}


def _owner(item: dict[str, Any], uids: dict[str, str]) -> str | None:
    """``Kind/name`` of the first owner of ``item`` that belongs to the tree (``uids``), else None."""
    for reference in item["metadata"].get("ownerReferences") or []:
        if reference.get("uid") in uids:
            return uids[reference["uid"]]
    return None


def _workload_ready(kind: str, status: dict[str, Any], spec: dict[str, Any]) -> str:
    if kind in ("Deployment", "ReplicaSet"):
        return f"{status.get('readyReplicas') or 0}/{spec.get('replicas', 0)}"
    if kind == "Job":
        return f"{status.get('succeeded') or 0} succeeded, {status.get('failed') or 0} failed, " \
               f"{status.get('active') or 0} active"
    return f"{len(status.get('active') or [])} active"  # CronJob


def _pod_row(item: dict[str, Any], owner: str) -> PodRow:
    status, spec = item.get("status") or {}, item.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    containers = [c["name"] for c in spec.get("containers") or []]
    ready = sum(1 for c in statuses if c.get("ready"))
    return PodRow(
        name=item["metadata"]["name"], phase=status.get("phase") or "Pending", ready=f"{ready}/{len(containers)}",
        restarts=sum(c.get("restartCount") or 0 for c in statuses), node=spec.get("nodeName") or "",
        containers=containers, owner=owner, created=item["metadata"].get("creationTimestamp") or "",
    )


def _event_row(item: dict[str, Any]) -> EventRow:
    involved = item.get("involvedObject") or {}
    return EventRow(
        type=item.get("type") or "", reason=item.get("reason") or "",
        involved=f"{involved.get('kind')}/{involved.get('name')}", message=item.get("message") or "",
        count=item.get("count") or 1,
        last_seen=item.get("lastTimestamp") or item.get("eventTime") or item["metadata"].get("creationTimestamp") or "",
    )


def read_live(obj: KubeObject, gateway: ClusterGateway, with_events: bool = True) -> LiveObjects:
    """The object's workloads, pods and (``with_events``) the events of all of them, as the process's
    informers of the namespace hold them (``clusters.kube.informers``: listed once and watched, so a
    page, its refreshes and a followed log cost no list each)."""
    kind = type(obj).kube.kind
    scope = SCOPES.get(kind, lambda _: Scope())(obj)
    namespace = obj.namespace

    listed = [*WORKLOAD_KINDS, POD, *([EVENT] if with_events else [])]
    for api_version, listed_kind in listed:  # all listing at once the first time, not one after the other
        informer(gateway.cluster, api_version, listed_kind, namespace, wait=False)

    def cached(api_version: str, listed_kind: str) -> list[dict[str, Any]]:
        shared = informer(gateway.cluster, api_version, listed_kind, namespace)
        return shared.items(selector=scope.selectors.get(listed_kind, ""))

    uids = {obj.uid: f"{kind}/{obj.name}"} if obj.uid else {}
    live = LiveObjects()
    for api_version, workload_kind in WORKLOAD_KINDS:  # owners before what they own
        for item in cached(api_version, workload_kind):
            owner = _owner(item, uids)
            if owner is None:
                continue
            uids[item["metadata"]["uid"]] = f"{workload_kind}/{item['metadata']['name']}"
            live.workloads.append(Workload(
                workload_kind, item["metadata"]["name"],
                _workload_ready(workload_kind, item.get("status") or {}, item.get("spec") or {}),
                item["metadata"].get("creationTimestamp") or "", owner,
            ))
    for item in cached(*POD):
        owner = _owner(item, uids) or (scope.pods_by_label and f"label {scope.pods_by_label}")
        if owner:
            uids[item["metadata"]["uid"]] = f"Pod/{item['metadata']['name']}"
            live.pods.append(_pod_row(item, owner))
    if not with_events:
        return live
    mine = [e for e in cached(*EVENT) if (e.get("involvedObject") or {}).get("uid") in uids]
    live.events = [_event_row(e) for e in mine]
    live.events.sort(key=lambda e: e.last_seen, reverse=True)
    del live.events[MAX_EVENTS:]
    return live


def unreachable_message(obj: KubeObject, error: GatewayError) -> str:
    """Why the live view is empty, in the user's words: which cluster, what failed."""
    if isinstance(error, PermanentError):
        if not error.status:
            return f"Live objects are not available: {error}"
        return f"Cluster {obj.cluster.name} refused to show live objects ({error})."
    return f"Cluster {obj.cluster.name} could not be read just now ({error}); the page shows the portal's copy."


def _with_gateway(obj: KubeObject, read: Callable[[ClusterGateway], Any]) -> tuple[Any, str]:
    """(what ``read`` returned, "") on a gateway of its own, or (None, why the cluster could not be read)."""
    try:
        gateway = ClusterGateway(obj.cluster)
    except (GatewayError, ConfigException) as error:  # no API server, or a kubeconfig that cannot be read
        return None, unreachable_message(obj, error)
    try:
        return read(gateway), ""
    except GatewayError as error:
        return None, unreachable_message(obj, error)
    finally:
        gateway.close()


def live_objects(obj: KubeObject) -> LiveObjects:
    """``read_live``; a cluster that cannot be reached gives a message, never an error."""
    live, error = _with_gateway(obj, lambda gateway: read_live(obj, gateway))
    return live or LiveObjects(error=error)


def pod_log(obj: KubeObject, pod: str, container: str, tail_lines: int) -> tuple[str, str]:
    """(log text, error) of one pod the object owns, checked on the same connection (without the
    events, as a followed log asks every 2 s); a pod it does not own is refused (LookupError)."""

    def read(gateway: ClusterGateway) -> str:
        if pod not in read_live(obj, gateway, with_events=False).pod_names():
            raise LookupError(f"pod {pod!r} is not one of {obj.name}'s pods")
        return gateway.pod_log(obj.namespace, pod, container, tail_lines)

    text, error = _with_gateway(obj, read)
    return text or "", error
