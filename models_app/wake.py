"""Waking a scaled-to-zero InferenceModel on request: dependencies first, then the model."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from clusters.kube.client import ClusterGateway
from clusters.models import AuditEntry
from clusters.sync.audit import Actor, record
from clusters.sync.controllers import reconcile_row
from models_app.controller import dependency_closure, wake_in_cluster
from models_app.models import InferenceModel


class WakeRefused(Exception):
    """The model cannot be woken here; the message says why (naming the dependency or the cycle)."""


def wake(model: InferenceModel, actor: Actor, now: datetime | None = None) -> dict[str, str]:
    """Record a request on the model and its dependencies, then reconcile them, dependencies first.

    Returns each woken model's outcome. Refused when the portal does not manage InferenceModels in
    the model's cluster, or when a dependency is missing or cyclic.
    """
    now = now or timezone.now()
    if not model.cluster.manages("InferenceModel"):
        raise WakeRefused(
            f"cluster {model.cluster.name} does not let the portal manage InferenceModels "
            f"(another controller acts there); wake it through that controller"
        )
    try:
        closure = dependency_closure(model)
    except ValueError as error:
        raise WakeRefused(str(error)) from None
    outcomes: dict[str, str] = {}
    gateway = ClusterGateway(model.cluster)
    try:
        for member in closure:
            wake_in_cluster(gateway, member, now)
            record(member, AuditEntry.Action.UPDATED, actor, message="woken: last-request-time set to now")
        for member in closure:
            member.refresh_from_db()
            outcomes[member.name] = reconcile_row(member, now, gateway)
    finally:
        gateway.close()
    return outcomes
