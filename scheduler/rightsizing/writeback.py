"""Writing right-sizing fields to an InferenceModel's status in the cluster, through ``/status`` only.

Status belongs to the cluster except the fields the portal computes as controller (DESIGN.md,
"Sync"), so only the four right-sizing fields are changed; everything else in the cluster's
status is kept as read. A stale resourceVersion is retried once with a fresh read.
"""

from __future__ import annotations

from typing import Any

from clusters.gateway import ClusterGateway, ConflictError
from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation

RIGHTSIZING_STATUS_FIELDS = ("observedPeakMemory", "utilizationPercent", "recommendation", "lastObservation")


def status_fields(observation: Observation) -> dict[str, Any]:
    """The right-sizing part of status for one observation (without data: only the recommendation
    says so and ``lastObservation`` moves; no number is invented)."""
    from scheduler.rightsizing.policy import format_memory

    fields: dict[str, Any] = {
        "recommendation": observation.recommendation,
        "lastObservation": observation.observed_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if observation.peak_bytes is not None:
        fields["observedPeakMemory"] = format_memory(observation.peak_bytes)
        if observation.utilization_percent is not None:
            fields["utilizationPercent"] = observation.utilization_percent
    return fields


def manages_inference_models(obj: InferenceModel) -> bool:
    """True when the portal is the InferenceModel controller of the object's cluster.

    The per-cluster ``manages(kind)`` switch is added with the controller work; until then this is
    False and status is only updated in the portal's own rows.
    """
    return bool(getattr(obj.cluster, "manages", lambda kind: False)("InferenceModel"))


def write_back(obj: InferenceModel, observation: Observation) -> dict[str, Any]:
    """PUT the object's status with the observation's fields through the /status subresource."""
    gateway = ClusterGateway(obj.cluster)
    try:
        for attempt in range(2):
            current = gateway.get(obj.kube, obj.namespace, obj.name)
            status = {
                key: value
                for key, value in (current.get("status") or {}).items()
                if key not in RIGHTSIZING_STATUS_FIELDS
            }
            current["status"] = {**status, **status_fields(observation)}
            try:
                return gateway.replace_status(obj.kube, obj.namespace, obj.name, current)
            except ConflictError:
                if attempt:
                    raise
        raise AssertionError("unreachable")
    finally:
        gateway.close()
