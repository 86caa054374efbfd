"""Making room for a model admission refused, whatever the kinds that hold the pool.

Admission (``scheduler.admission``) answers a refused start with what would make room: idle models
to scale to zero, and for a demand within its team's guarantee the borrowers to preempt, newest
first. Those holders may be of any kind the portal controls (an InferenceModel reclaiming its
team's share from a KubeAI Model that borrows, or the other way round), so the controllers do not
stop them themselves: each registers its kind here (:func:`register`, from ``models_app.apps``)
with the reconcile that takes a ``preempted`` reason, and :func:`admit_making_room` stops what
admission offered through the victim's own controller, under the victim's reconcile lease, then
asks again. A kind the portal does not control on that cluster is never stopped: its room stays
taken and the claimant stays refused, naming it.

A preempted model is marked (:func:`preempted_words`) before its Deployment goes to zero, so a
reconcile of it that read the Deployment earlier has finished and any later one keeps it down
until admission lets it start again (:func:`readmitted`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Protocol

from django.core.cache import cache

from clusters.kube.client import ClusterGateway
from clusters.sync.work_queue import LEASE_SECONDS, object_key, run_when_free
from models_app.models import ServingModel
from scheduler.public import AdmissionDecision, Demand, ModelKey, admit

PREEMPT_WAIT_SECONDS = 10.0
"""How long a claimant waits for a victim's own reconcile to end (reconciles take well under that)."""
ROUNDS = 3
"""Each round stops what admission offered and asks again; a round frees one resource (GPUs, then
memory), so two rounds and a check."""


class Reconcile(Protocol):
    def __call__(self, gateway: ClusterGateway, row: ServingModel, now: datetime, preempted: str = "") -> str: ...


_CONTROLLED: dict[str, tuple[type[ServingModel], Reconcile]] = {}


def register(model: type[ServingModel], reconcile: Reconcile) -> None:
    """``model``'s kind can be stopped for another's start: idle (its reconcile scales it to zero
    by its own cooldown) or preempted (``reconcile(..., preempted=why)`` keeps it at zero)."""
    _CONTROLLED[model.kube.kind] = (model, reconcile)


def admit_making_room(demand: Demand, now: datetime, gateway: ClusterGateway) -> AdmissionDecision:
    """Admission's decision for ``demand`` after stopping what it offered (idle models, and the
    borrowers a guarantee preempts); the claimant's room is held before its victims stop
    (``hold_for_preemption``), so none of them takes it back in between."""
    decision, stopping = admit(demand, now, gateway=gateway, hold_for_preemption=True), set()
    for _ in range(ROUNDS):
        if decision.fits or not decision.frees_enough:
            break
        stopping |= _stop_now(gateway, decision, now)
        decision = admit(demand, now, stopping=stopping, gateway=gateway, hold_for_preemption=True)
    return decision


def preempted_words(row: ServingModel) -> str | None:
    """Why the model was preempted, while its preemption lasts (it is kept at zero meanwhile)."""
    return cache.get(_key(row))


def readmitted(row: ServingModel) -> None:
    """Admission let the model start again: its preemption is over."""
    cache.delete(_key(row))


def _key(row: ServingModel) -> str:
    return f"preempted:{row.kube.kind}:{row.cluster_id}:{row.namespace}:{row.name}"


def _stop_now(gateway: ClusterGateway, decision: AdmissionDecision, now: datetime) -> set[ModelKey]:
    """Scale the models admission offered to zero now, each through its own controller, and return
    their keys: the idle ones (idle by the same definition the controller's own reconcile uses,
    ``scheduler.idle``, so its next pass would stop them anyway), and the borrowers preempted for a
    demand within its team's guarantee (``Preempted``, naming the team that reclaims)."""
    stopped: set[ModelKey] = set()
    candidates: list[tuple[ModelKey, int, str]] = [(holder.key, holder.id, "") for holder in decision.idle_candidates]
    candidates += [(holder.key, holder.id, decision.preempted_words[holder.key]) for holder in decision.preempt]
    for key, row_id, words in candidates:
        controlled = _CONTROLLED.get(key[0])
        if controlled is None or key in stopped:
            continue
        model, reconcile = controlled
        row = model.objects.select_related("cluster").filter(pk=row_id).first()
        if row is None or not row.cluster.manages(key[0]):
            continue
        if not words:
            reconcile(gateway, row, now)
            stopped.add(key)
            continue
        if run_when_free(object_key(row._meta.label, row.pk), _preempt(gateway, row, now, words, reconcile),
                         PREEMPT_WAIT_SECONDS, partial(reconcile, gateway, row, now)) is not None:  # fmt: skip
            stopped.add(key)
    return stopped


def _preempt(
    gateway: ClusterGateway, row: ServingModel, now: datetime, words: str, reconcile: Reconcile
) -> Callable[[], str]:
    def preempt() -> str:
        # Marked first, under the victim's own reconcile lease: a reconcile of it that read its
        # Deployment before this one scaled it down has finished, and any later one keeps it down.
        cache.set(_key(row), words, LEASE_SECONDS)
        return reconcile(gateway, row, now, preempted=words)

    return preempt
