"""Waking a scaled-to-zero model on request: an InferenceModel's dependencies first, then the
model; a KubeAI Model to one replica (``models_app.kubeai_controller.wake_in_cluster``)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from clusters.kube.client import ClusterGateway, GatewayError, TransientError
from clusters.kube.failures import failing_condition, is_refusal, refusal_message
from clusters.models import AuditEntry
from clusters.sync.audit import Actor, record
from clusters.sync.controllers import reconcile_row
from clusters.sync.work_queue import BUSY
from models_app import kubeai_controller
from models_app.controller import Reason, dependency_closure, wake_in_cluster
from models_app.models import InferenceModel, KubeAIModel
from scheduler.public import NEVER_FITS


class WakeRefused(Exception):
    """The model cannot be woken here; the message says why (naming the dependency or the cycle, or
    the cluster's own refusal). ``http_status``: 400 for the portal's rules, 409 or 422 when the
    cluster refused (422: it found the object invalid) or the controller did not start it (409:
    admission, a failed plan), 503 when it could not be reached. ``capacity``: the refusal is
    admission's (memory, GPUs, a quota), which may clear once capacity frees, so a caller that can
    wait (the gateway's wake) keeps trying until its deadline; not when the model asks for more than
    its pool holds in all (``NEVER_FITS``), which only a change to the model can clear."""

    def __init__(self, message: str, http_status: int = 400, capacity: bool = False) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.capacity = capacity


WAIT_FOR_RECONCILE_SECONDS = 30.0
"""How long a wake waits for another reconcile of a model it wakes (the periodic pass, a watch
event) to end before reconciling it itself: the wake answers from its own reconcile."""

CAPACITY_REASONS = frozenset({Reason.INSUFFICIENT_MEMORY, Reason.INSUFFICIENT_GPU, Reason.OVER_QUOTA, Reason.PREEMPTED})
"""Refusals that may clear without a change to the model: capacity frees, a reclaim ends."""


def _refused(member: InferenceModel | KubeAIModel) -> WakeRefused | None:
    """The reconcile did not start ``member``: the cluster refused what it wrote (its Deployment),
    or the controller refused the start (admission, a failed plan). The row's ``Ready`` condition,
    as the reconcile just stored it, says so; a wake that did not start the model is no success."""
    member.refresh_from_db(fields=["status"])
    condition = failing_condition(member.kube.kind, member.status)
    if condition is None:
        return None
    reason = condition["reason"]
    if is_refusal(reason):
        return WakeRefused(
            f"cluster {member.cluster.name} refused {member.name}: {condition.get('message')}",
            422 if reason == "Invalid" else 409,
        )
    message = condition.get("message") or ""
    return WakeRefused(f"{member.name} was not started: {reason}: {message}", 409,
                       capacity=reason in CAPACITY_REASONS and NEVER_FITS not in message)  # fmt: skip


def _cluster_refusal(model: InferenceModel | KubeAIModel, error: GatewayError) -> WakeRefused:
    if isinstance(error, TransientError):
        return WakeRefused(f"cluster {model.cluster.name} could not be reached: {error}", 503)
    return WakeRefused(
        f"cluster {model.cluster.name} refused: {refusal_message(error)}", 422 if error.status == 422 else 409
    )


def wake(model: InferenceModel | KubeAIModel, actor: Actor, now: datetime | None = None) -> dict[str, str]:
    """Record a request on the model (and an InferenceModel's dependencies), then reconcile them,
    dependencies first.

    Returns each woken model's outcome. Refused when the portal does not manage the model's kind in
    its cluster, when a dependency is missing or cyclic, or when a KubeAI Model's replicas are its
    user's (``autoscalingDisabled``).
    """
    now = now or timezone.now()
    kind = model.kube.kind
    if not model.cluster.manages(kind):
        raise WakeRefused(
            f"cluster {model.cluster.name} does not let the portal manage {kind}s "
            f"(another controller acts there); wake it through that controller"
        )
    if isinstance(model, KubeAIModel) and (model.spec or {}).get("autoscalingDisabled"):
        raise WakeRefused(f"{model.name} has spec.autoscalingDisabled: its replicas are set by hand "
                          f"(spec.replicas {(model.spec or {}).get('replicas', 0)}), not by requests")
    try:
        closure = dependency_closure(model) if isinstance(model, InferenceModel) else [model]
    except ValueError as error:
        raise WakeRefused(str(error)) from None
    outcomes: dict[str, str] = {}
    gateway = ClusterGateway(model.cluster)
    try:
        for member in closure:
            if isinstance(member, KubeAIModel):
                kubeai_controller.wake_in_cluster(gateway, member)
                record(member, AuditEntry.Action.UPDATED, actor, message="woken: a request scaled it from zero")
                continue
            wake_in_cluster(gateway, member, now)
            record(member, AuditEntry.Action.UPDATED, actor, message="woken: last-request-time set to now")
        for member in closure:
            member.refresh_from_db()
            outcomes[member.name] = reconcile_row(member, now, gateway, wait_seconds=WAIT_FOR_RECONCILE_SECONDS)
            if outcomes[member.name] == BUSY:  # its holder runs once more, after this wake's write
                continue  # the status is the holder's earlier run's: no refusal of this wake to read there
            refused = _refused(member)
            if refused is not None:
                raise refused
    except GatewayError as error:
        raise _cluster_refusal(model, error) from None
    finally:
        gateway.close()
    return outcomes
