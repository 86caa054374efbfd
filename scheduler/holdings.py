"""Serving models as the scheduler sees them: plain records read through the kind registry.

``scheduler/`` must not import ``models_app`` (DESIGN.md, "Layout"): every registered kind that
projects ``memory_bytes`` and ``node_pool`` is a serving model, whatever app declares it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.utils.dateparse import parse_datetime

from clusters.kinds import all_models
from clusters.models import Cluster, KubeObject, SyncState
from clusters.quantities import quantity_to_int
from scheduler.durations import parse_duration

LAST_REQUEST_ANNOTATION = "inference.eh-ops.io/last-request-time"
# The InferenceModel CRD's default cooldownPeriod, for rows stored before defaults were applied.
DEFAULT_COOLDOWN = timedelta(minutes=10)
# "Consider reducing memory from 80Gi to 78Gi (...)": the reference's wording of status.recommendation.
_RECOMMENDATION = re.compile(r"\bto ([0-9]+(?:Ki|Mi|Gi|Ti))\b")

ModelKey = tuple[str, int, str, str]


class Identified:
    """``key`` and ``label`` of anything naming one model (holdings, demands, proposals)."""

    kind: str
    cluster_id: int
    namespace: str
    name: str

    @property
    def key(self) -> ModelKey:
        return (self.kind, self.cluster_id, self.namespace, self.name)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


"""(kind, cluster id, namespace, name): one model, whatever its row id."""


@dataclass
class Holding(Identified):
    """One serving model with what budgets and placement need, detached from the ORM."""

    kind: str
    id: int
    cluster_id: int
    namespace: str
    name: str
    pool: str
    memory_bytes: int
    replicas: int
    gpu_count: int = 0
    observed_peak_bytes: int | None = None
    status_recommended_bytes: int | None = None
    last_request_at: datetime | None = None
    cooldown: timedelta | None = None
    dependencies: list[str] = field(default_factory=list)
    model_name: str = ""

    @property
    def running(self) -> bool:
        return self.replicas > 0

    def idle_since(self, now: datetime) -> datetime | None:
        """When the model became idle (last request + cooldown), or None when it is not idle at ``now``.

        Idle means running and the last request older than the cooldown. A model with no
        last-request annotation is not called idle: nothing says it is unused.
        """
        if not self.running or self.last_request_at is None:
            return None
        since = self.last_request_at + (self.cooldown if self.cooldown is not None else DEFAULT_COOLDOWN)
        return since if since <= now else None


def serving_models() -> list[type[KubeObject]]:
    """Registered kinds that declare memory and a node pool (the ServingModel projections)."""
    result = []
    for model in all_models():
        names = {f.name for f in model._meta.get_fields()}
        if {"memory_bytes", "node_pool"} <= names:
            result.append(model)
    return result


def serving_model_for(kind: str) -> type[KubeObject] | None:
    return next((model for model in serving_models() if model.kube.kind == kind), None)


def running_replicas(status: dict[str, Any], desired: int | None) -> int:
    """``status.replicas`` when the cluster reported a count, else the desired replicas from spec."""
    reported = status.get("replicas") if isinstance(status, dict) else None
    if isinstance(reported, int) and not isinstance(reported, bool):
        return reported
    return desired or 0


def _recommended_from_status(status: dict[str, Any]) -> int | None:
    match = _RECOMMENDATION.search(str(status.get("recommendation") or ""))
    return quantity_to_int(match.group(1)) if match else None


def holding_from_values(kind: str, values: dict[str, Any]) -> Holding:
    spec, status, annotations = values["spec"] or {}, values["status"] or {}, values["annotations"] or {}
    last_request = parse_datetime(str(annotations.get(LAST_REQUEST_ANNOTATION) or "")) or None
    cooldown = spec.get("cooldownPeriod")
    return Holding(
        kind=kind,
        id=values["id"],
        cluster_id=values["cluster_id"],
        namespace=values["namespace"],
        name=values["name"],
        pool=values["node_pool"],
        memory_bytes=values["memory_bytes"],
        replicas=running_replicas(status, values["replicas"]),
        gpu_count=values["gpu_count"] or 0,
        observed_peak_bytes=values.get("observed_peak_bytes"),
        status_recommended_bytes=_recommended_from_status(status),
        last_request_at=last_request,
        cooldown=parse_duration(cooldown) if isinstance(cooldown, str) else None,
        dependencies=[d for d in spec.get("dependencies") or [] if isinstance(d, str)],
        model_name=values.get("model_name") or "",
    )


def load_holdings(
    cluster_id: int | None = None, pools: list[str] | None = None, running_only: bool = False
) -> list[Holding]:
    """Serving models with declared memory, optionally of one cluster and some pools.

    Rows deleted in the cluster hold nothing. ``memory_bytes`` is the model's whole declared
    footprint as its kind projects it (InferenceModel: one replica, at most one by the CRD;
    ModelService: every role's replicas), so a running model holds exactly that.
    """
    holdings: list[Holding] = []
    clusters = list(Cluster.objects.all())
    for model in serving_models():
        # Where the portal is this kind's controller, a model runs only once it reported replicas:
        # until then its admission reservation holds its memory, and counting its desired replicas
        # too would make two models starting together block each other.
        portal_controlled = {cluster.pk for cluster in clusters if cluster.manages(model.kube.kind)}
        rows = model.objects.exclude(sync_state=SyncState.DELETED_IN_CLUSTER).filter(memory_bytes__isnull=False)
        if cluster_id is not None:
            rows = rows.filter(cluster_id=cluster_id)
        if pools is not None:
            rows = rows.filter(node_pool__in=pools)
        if running_only:
            # status.replicas is JSON; the projected desired count narrows the rows in SQL first.
            rows = rows.filter(models.Q(replicas__gt=0) | models.Q(status__has_key="replicas"))
        fields = ["id", "cluster_id", "namespace", "name", "node_pool", "memory_bytes", "replicas", "gpu_count"]
        fields += ["spec", "status", "annotations", "model_name"]
        if "observed_peak_bytes" in {f.name for f in model._meta.get_fields()}:
            fields.append("observed_peak_bytes")
        for values in rows.values(*fields):
            if values["cluster_id"] in portal_controlled and "replicas" not in (values["status"] or {}):
                values = {**values, "replicas": 0}
            holding = holding_from_values(model.kube.kind, values)
            if holding.running or not running_only:
                holdings.append(holding)
    return holdings
