"""Writing right-sizing fields to a serving object's status in the cluster, through ``/status`` only
(kinds whose CRD carries them: ``rightsizing_status``, see scheduler/rightsizing/kinds.py).

Status belongs to the cluster except the fields the portal computes as controller (DESIGN.md,
"Sync"), so only the four right-sizing fields are changed, by a merge patch: everything else in the
cluster's status is kept.
"""

from __future__ import annotations

from typing import Any

from clusters.kube.client import ClusterGateway
from clusters.models import KubeObject
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


def write_back(gateway: ClusterGateway, obj: KubeObject, observation: Observation) -> dict[str, Any]:
    """Merge-patch the right-sizing fields into the object's status through /status.

    The other status fields are not sent, so whatever the cluster holds there stays; a right-sizing
    field this observation has no value for is sent as null, which removes a stale one.
    """
    fields = status_fields(observation)
    return gateway.patch_status(
        obj.kube, obj.namespace, obj.name, {field: fields.get(field) for field in RIGHTSIZING_STATUS_FIELDS}
    )
