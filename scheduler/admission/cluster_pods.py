"""What the pods on a pool's nodes request, read from the cluster: admission's view of what it
does not mirror.

Admission counts the models the portal mirrors from their rows (``scheduler.holdings``). The
kube-scheduler counts every pod bound to a node: another team's Deployment in a namespace the portal
does not sync, a DaemonSet, a bare Pod. Counting only the mirrored models admitted a 1-GPU model
into a pool whose 4 GPUs such pods held; its pod stayed Pending (``Insufficient nvidia.com/gpu``)
for the Deployment's whole progress deadline (issue 44). So before a decision the controller reads
the pods on the pool's nodes (from an informer cache of the cluster's pods, by ``spec.nodeName``) and
admission adds what those that belong to no mirrored model request.

A pod belongs to a mirrored model when it is in the model's namespace and its
``app.kubernetes.io/name`` (the InferenceModel Deployment's selector) or ``model`` (KubeAI's) label
names it. A mirrored model's pod that carries neither label is counted twice: admission then
refuses rather than over-commits. Pods that have finished (``Succeeded``, ``Failed``) or are being
deleted hold nothing the next pod waits for long, and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clusters.kube.client import ClusterGateway
from clusters.kube.informers import informer
from clusters.validation.quantities import quantity_to_int
from scheduler.models import Node
from scheduler.nodes import GPU_RESOURCES

MODEL_LABELS = ("app.kubernetes.io/name", "model")
FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodRequests:
    """One pod bound to a node of the pool, and what it requests there."""

    namespace: str
    name: str
    models: frozenset[str]
    """The names its model labels give (the mirrored model it may serve)."""
    gpus: int
    memory_bytes: int

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"


def _request(resources: dict[str, Any], name: str) -> int:
    """A container's request of ``name`` (its limit where only a limit is given, as the API server
    defaults it), as an integer."""
    value = (resources.get("requests") or {}).get(name, (resources.get("limits") or {}).get(name))
    return (quantity_to_int(value) or 0) if value is not None else 0


def pod_requests(pod: dict[str, Any]) -> PodRequests:
    """What the scheduler reserves for ``pod``: the sum of its containers' requests, or an init
    container's when larger (init containers run one at a time, before the others)."""
    spec = pod.get("spec") or {}
    totals = {}
    for name in ("memory", *GPU_RESOURCES):
        running = sum(_request(c.get("resources") or {}, name) for c in spec.get("containers") or [])
        init = max((_request(c.get("resources") or {}, name) for c in spec.get("initContainers") or []), default=0)
        totals[name] = max(running, init)
    labels = pod["metadata"].get("labels") or {}
    return PodRequests(
        pod["metadata"].get("namespace", ""), pod["metadata"]["name"],
        frozenset(labels[key] for key in MODEL_LABELS if labels.get(key)),
        sum(totals[name] for name in GPU_RESOURCES), totals["memory"],
    )  # fmt: skip


def pods_on_pools(gateway: ClusterGateway, cluster_id: int, pools: Iterable[str]) -> dict[str, list[PodRequests]]:
    """The pods bound to each pool's nodes (as the last node-pool refresh knows them) that hold
    resources: not finished, not being deleted. Read from the process's informer of every pod of
    the cluster (``clusters.kube.informers``: one watch, no request per decision)."""
    found: dict[str, list[PodRequests]] = {pool: [] for pool in pools}
    nodes = dict(Node.objects.filter(pool__cluster_id=cluster_id, pool__name__in=list(found)).values_list(
        "name", "pool__name"))
    if not nodes:
        return found
    for item in informer(gateway.cluster, "v1", "Pod", None).items():
        pool = nodes.get((item.get("spec") or {}).get("nodeName") or "")
        if pool is not None and (item.get("status") or {}).get("phase") not in FINISHED \
                and not item["metadata"].get("deletionTimestamp"):
            found[pool].append(pod_requests(item))
    return found


def unmirrored(pods: list[PodRequests], models: Iterable[tuple[str, str]]) -> list[PodRequests]:
    """The pods of ``pods`` that serve none of ``models`` (``(namespace, name)`` of the mirrored
    models admission already counts: running, reserved, or the ones being decided)."""
    known = set(models)
    return [pod for pod in pods if not any((pod.namespace, name) in known for name in pod.models)]
