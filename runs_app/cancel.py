"""Cancelling a run from the portal.

Krateo's InferenceRun has no field that stops a run (reference 003 specifies configRef,
timeoutSeconds and parameters; the runner is a plain Job). Where the portal is the InferenceRun
controller it ends the run itself: the run becomes Failed with "cancelled by <who>" and its Job
and pods are deleted (runs_app.controller.cancel_in_cluster); the run object and its history stay.
Where another controller acts, the portal cannot tell it to stop, so Cancel is refused with the
way that works everywhere: Delete, after which Kubernetes removes the Job the run owns.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from clusters.kube.client import ClusterGateway, GatewayError, NotFoundError
from clusters.models import AuditEntry
from clusters.sync.audit import Actor, record
from clusters.sync.inbound import upsert_from_cluster
from runs_app.controller import TERMINAL, cancel_in_cluster
from runs_app.models import InferenceRun


class CancelRefused(Exception):
    """The run cannot be cancelled here; the message says why and what to do instead."""


def refusal(run: InferenceRun) -> str | None:
    """Why Cancel is not offered for this run, or None when it is."""
    if run.phase in TERMINAL:
        return f"the run has already ended ({run.phase})"
    if not run.uid:
        return "the cluster does not have the run yet"
    if not run.cluster.manages("InferenceRun"):
        return (
            f"cluster {run.cluster.name} runs InferenceRuns with another controller, which has no way to stop a "
            "run: delete the run instead (Kubernetes then removes its Job)"
        )
    if run.schedule:
        return "a scheduled run starts a Job on each tick: delete the run to stop its schedule"
    return None


def cancel(run: InferenceRun, actor: Actor, now: datetime | None = None) -> InferenceRun:
    reason = refusal(run)
    if reason:
        raise CancelRefused(reason)
    message = f"cancelled by {actor.label}"
    gateway = ClusterGateway(run.cluster)
    try:
        live = cancel_in_cluster(gateway, run, message, now or timezone.now())
    except NotFoundError:
        raise CancelRefused("the cluster no longer has the run") from None
    except GatewayError as error:
        raise CancelRefused(f"cluster {run.cluster.name} refused: {error}") from None
    finally:
        gateway.close()
    upsert_from_cluster(InferenceRun, run.cluster, live)
    record(run, AuditEntry.Action.UPDATED, actor, message=f"{message}: Job and pods deleted")
    run.refresh_from_db()
    return run
