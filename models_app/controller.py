"""The portal as the InferenceModel controller (reference 000), for clusters that ask for it.

Per model: a Deployment named after it with exactly the reference's labels and annotations, the
container image and resources (``gpu`` -> ``nvidia.com/gpu``), the nodeSelector, and an owner
reference to the model. Replicas follow demand: scale to zero once ``cooldownPeriod`` has passed
since the ``inference.eh-ops.io/last-request-time`` annotation (the model's creation when it was
never requested), back up when woken, dependencies first. Starting needs memory-budget admission
from ``scheduler.admission.admit``; a model that does not fit stays at zero with ``InsufficientMemory``
and the planner's message (``InsufficientGPU`` when GPUs are short). A start within the model's
team's guarantee preempts models that borrow in the pool (admission names them, newest first): they
go to zero in the same reconcile with ``Ready`` reason ``Preempted``, a ``Preempted`` condition and
a Warning Event naming the team that reclaimed; a running model on borrowed capacity carries a
``Borrowing`` condition while it lasts. A Deployment the cluster refuses
(422 invalid, 403 admission) keeps the model at zero with the cluster's reason and message. Failures
are recorded as Warning Events on the model (``clusters.kube.failures``). The finalizer
``inference.eh-ops.io/finalizer`` runs the reference's
cleanup: release the budget, clean the model's metrics (its series leave ``/metrics`` once the row is
``Deleting``: ``models_app.metrics``), remove the finalizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils.dateparse import parse_datetime

from clusters.kube.client import ClusterGateway, NotFoundError, PermanentError
from clusters.kube.conditions import rfc3339, set_condition
from clusters.kube.failures import (
    ensure_backing_off,
    failing_condition,
    refusal,
    unschedulable,
    warn,
    with_failing,
)
from clusters.kube.owned import NotOwnedError, label_value
from clusters.models import Cluster, SyncState
from clusters.sync.handover import remove_finalizer
from clusters.sync.inbound import upsert_from_cluster
from clusters.validation.quantities import quantity_to_int
from common.durations import parse_duration
from models_app.gateway_rules import gateway_rules
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel, ServingModel
from models_app.preemption import admit_making_room, preempted_words, readmitted
from scheduler.models import MemoryReservation
from scheduler.public import (
    Demand,
    borrowing,
    idle_since,
    node_pool_of,
    release,
    shapes_from_json,
)

FINALIZER = "inference.eh-ops.io/finalizer"
MEMORY_ANNOTATION = "inference.eh-ops.io/memory"
KIND = InferenceModel.kube


class Reason:
    DEPLOYING = "Deploying"
    DEPLOYED = "Deployed"
    FAILED = "Failed"
    INSUFFICIENT_MEMORY = "InsufficientMemory"
    INSUFFICIENT_GPU = "InsufficientGPU"
    OVER_QUOTA = "OverQuota"  # a team quota (scheduler.admission.quotas) refused it
    DEPENDENCY_NOT_FOUND = "DependencyNotFound"
    SCALED_TO_ZERO = "ScaledToZero"
    PENDING = "Pending"
    TERMINATING = "Terminating"
    FAILED_SCHEDULING = "FailedScheduling"  # the kube-scheduler cannot place a pod (its own event's reason)
    PREEMPTED = "Preempted"  # stopped for another team reclaiming its guaranteed share (scheduler.admission)


PREEMPTED_CONDITION = "Preempted"
"""True from the preemption until the model serves again: the Ready reason moves on (the preempted
model's next start is refused while the pool is full), this condition keeps who took its place."""
BORROWING_CONDITION = "Borrowing"
"""True while the model runs on capacity its team borrows beyond its guarantee (``scheduler.public.borrowing``)."""
FAILURES = {
    Reason.FAILED, Reason.INSUFFICIENT_MEMORY, Reason.INSUFFICIENT_GPU, Reason.OVER_QUOTA, Reason.DEPENDENCY_NOT_FOUND,
    Reason.FAILED_SCHEDULING, Reason.PREEMPTED,
}  # fmt: skip
"""The ``Ready`` reasons that say something is wrong (a Warning Event, the object's ``lastError``)."""


@dataclass
class Plan:
    """How many replicas the model should have now, and why (the reason when it is zero)."""

    replicas: int
    reason: str = ""
    message: str = ""


def deployment_labels(cr: dict[str, Any]) -> dict[str, str]:
    """Exactly the reference's labels on managed Deployments. Label values are at most 63
    characters of ``[A-Za-z0-9._-]``, so the object name and ``modelName`` (a Hugging Face id such
    as ``meta-llama/Llama-2-7b-chat-hf``) go through ``label_value``; the full ``modelName`` is in
    the container's ``MODEL_NAME``."""
    return {
        "app.kubernetes.io/name": label_value(cr["metadata"]["name"]),
        "app.kubernetes.io/component": "inference-server",
        "inference.eh-ops.io/model": label_value(cr["spec"]["modelName"]),
        "inference.eh-ops.io/managed": "true",
    }


def last_request_time(cr: dict[str, Any], deployment: dict[str, Any] | None = None) -> datetime | None:
    """When the model was last asked for: the newest ``inference.eh-ops.io/last-request-time`` on the
    model or on its Deployment (a request path may stamp either), else the model's creation. The
    newest wins, so an older stamp never replaces a newer one and cuts a cooldown short."""
    stamps = [
        (obj["metadata"].get("annotations") or {}).get(LAST_REQUEST_ANNOTATION) for obj in (cr, deployment) if obj
    ]
    times = [parsed for stamp in stamps if stamp and (parsed := parse_datetime(stamp))]
    if times:
        return max(times)
    created = cr["metadata"].get("creationTimestamp")
    return parse_datetime(created) if created else None


def reconcile_inference_model(gateway: ClusterGateway, row: InferenceModel, now: datetime, preempted: str = "") -> str:
    """One reconcile of the model; ``preempted``: admission chose it to stop for a team reclaiming
    its guarantee (the words name that team), so it goes to zero whatever its own plan."""
    try:
        cr = gateway.get(KIND, row.namespace, row.name)
    except NotFoundError:
        release(row.cluster_id, KIND.kind, row.namespace, row.name)
        return "gone"
    finalizers = cr["metadata"].get("finalizers") or []
    if cr["metadata"].get("deletionTimestamp"):
        return _finalize(gateway, row, cr, now) if FINALIZER in finalizers else "deleting"
    if FINALIZER not in finalizers:
        cr = gateway.patch(
            KIND,
            row.namespace,
            row.name,
            {
                "metadata": {
                    "finalizers": [*finalizers, FINALIZER],
                    "resourceVersion": cr["metadata"]["resourceVersion"],
                }
            },
        )
    deployments = gateway.builtin("apps/v1", "Deployment")
    deployment = deployments.get(row.namespace, row.name)
    plan = Plan(0, Reason.PREEMPTED, preempted) if preempted else _plan(gateway, row, cr, deployment, now)
    if plan.reason != Reason.FAILED or deployment is not None:
        deployment, refused = apply_child(deployments, cr, _deployment(cr, deployment, plan.replicas, now), deployment,
                                          now)  # fmt: skip
        if refused is not None:
            plan = refused
    if plan.replicas == 0:
        release(row.cluster_id, KIND.kind, row.namespace, row.name)
    stuck = None
    if plan.replicas and deployment is not None and ready_replicas(deployment) < 1:  # starting: can it be placed?
        stuck = unschedulable(gateway, row.namespace, deployment["spec"]["selector"]["matchLabels"])
    status = _status(cr, deployment, plan, now, stuck, borrowed_words(row, plan))
    if status != {key: cr.get("status", {}).get(key) for key in status}:
        cr = gateway.patch_status(KIND, row.namespace, row.name, status)
        upsert_from_cluster(InferenceModel, row.cluster, cr)
    warn(gateway, KIND, {**cr, "status": {**(cr.get("status") or {}), **status}}, now)
    return f"{status['conditions'][0]['reason']}: {status['conditions'][0]['message']}"


def apply_child(
    resource: Any, cr: dict[str, Any], desired: dict[str, Any], current: dict[str, Any] | None, now: datetime
) -> tuple[dict[str, Any] | None, Plan | None]:
    """Apply an owned object (``clusters.kube.owned.ensure``): the object as the cluster has it
    after, and None; or, when it could not be written, what is there and the plan at zero that says
    why. A write the cluster refused a moment ago is not sent again until it or the owner changes
    (``clusters.kube.failures.ensure_backing_off``, the backoff every controller shares); another
    controller's object of that name is never taken over (``Failed``)."""
    try:
        return ensure_backing_off(resource, cr, desired, now), None
    except NotOwnedError as error:
        return None, Plan(0, Reason.FAILED, str(error))
    except PermanentError as error:  # the cluster refused it (422 invalid, 403 admission...), or held it
        return current, Plan(0, *refusal(error))


def release_departed(cluster: Cluster, model: type[ServingModel] = InferenceModel) -> int:
    """Release the budget held for models of ``model``'s kind that left without their finalizer
    (deleted while the portal did not manage them, finalizer removed by hand) or, for a kind the
    portal holds no finalizer on, that left at all: their rows are gone or ``DeletedInCluster``, so
    no reconcile reaches them. One query per pass; returns how many."""
    live = model.objects.filter(cluster=cluster, namespace=OuterRef("namespace"), name=OuterRef("name"))
    departed = MemoryReservation.objects.filter(pool__cluster=cluster, kind=model.kube.kind).exclude(
        Exists(live.exclude(sync_state=SyncState.DELETED_IN_CLUSTER))
    )
    released, _ = departed.delete()
    return released


def desired_gpus(row: InferenceModel) -> int:
    """The GPUs the model asks for when it runs: its desired pods', not ``gpu_count`` (the GPUs of
    the replicas the cluster reports), which is 0 once a refused model was kept at zero."""
    return sum(shape.gpus * shape.count for shape in shapes_from_json(row.pods))


def _plan(
    gateway: ClusterGateway, row: InferenceModel, cr: dict[str, Any], deployment: dict[str, Any] | None, now: datetime
) -> Plan:
    """Replicas for now. Dependencies and memory admission gate a *start* only: a model already
    running keeps running through a dependency's blip or a pool budget that shrank (the planner
    reports the pool over budget); only its cooldown scales it to zero. An edit that asks more GPUs per
    pod than its pods have is a start of new pods: admission decides it, and a refusal stops it."""
    spec = cr["spec"]
    if not spec.get("containerImage"):
        return Plan(0, Reason.FAILED, "spec.containerImage is required when the portal manages the Deployment")
    if spec.get("maxReplicas", 1) == 0:
        return Plan(0, Reason.SCALED_TO_ZERO, "spec.maxReplicas is 0")
    cooldown = parse_duration(spec.get("cooldownPeriod", "10m"))
    requested = last_request_time(cr, deployment)
    if idle_since(requested, cooldown, now) is not None:
        failing = failing_condition(KIND.kind, cr.get("status"))
        current = failing and failing.get("observedGeneration") == cr["metadata"].get("generation")
        if current and ready_replicas(deployment) == 0:
            # Refused and never started since: the cooldown ends no failure (nothing ran to cool
            # down); the failure stays on the object, its lastError and page until it changes.
            return Plan(0, failing["reason"], failing.get("message") or "")
        return Plan(
            0,
            Reason.SCALED_TO_ZERO,
            f"no request since {rfc3339(requested)} (cooldown {spec.get('cooldownPeriod', '10m')})",
        )
    if deployment is not None and (deployment["spec"].get("replicas") or 0) >= 1:
        preempted = preempted_words(row)  # set before its Deployment went to zero (models_app.preemption)
        if preempted:
            return Plan(0, Reason.PREEMPTED, preempted)
        if pod_gpus(deployment) >= max((shape.gpus for shape in shapes_from_json(row.pods)), default=0):
            return Plan(spec.get("maxReplicas", 1))
        # More GPUs per pod than its pods have: the new pods are a start, which admission decides. Rolled
        # out unasked, no pod of 64 GPUs could be placed, yet the pool counted 64 held per replica and
        # refused every other model of it (issue 43).
    waiting = _dependencies_not_ready(gateway, row, spec.get("dependencies") or [], now)
    if waiting:
        return waiting
    demand = Demand(
        row.cluster_id,
        node_pool_of(spec.get("nodeSelector")),
        KIND.kind,
        row.namespace,
        row.name,
        quantity_to_int(spec["memory"]) or 0,
        gpus=desired_gpus(row),
    )
    # the gateway: pods on the pool's nodes count too; idle models and borrowers stopped for it
    decision = admit_making_room(demand, now, gateway)
    if not decision.fits:
        return Plan(0, decision.reason or Reason.INSUFFICIENT_MEMORY, decision.message)
    readmitted(row)
    return Plan(spec.get("maxReplicas", 1))


def dependency_closure(row: InferenceModel) -> list[InferenceModel]:
    """The model's dependencies, transitively, dependencies first (the model itself last).

    Names are InferenceModel names in the same cluster and namespace (a ``modelName`` is accepted
    when no object has that name). Raises ValueError naming a missing dependency or the cycle.
    """
    siblings = {
        model.name: model
        for model in InferenceModel.objects.filter(cluster_id=row.cluster_id, namespace=row.namespace).exclude(
            sync_state="DeletedInCluster"
        )
    }
    by_model_name = {model.model_name: model for model in siblings.values()}
    ordered: list[InferenceModel] = []

    def visit(model: InferenceModel, path: tuple[str, ...]) -> None:
        if model.name in path:
            raise ValueError("dependency cycle: " + " -> ".join((*path, model.name)))
        for name in model.spec.get("dependencies") or []:
            dependency = siblings.get(name) or by_model_name.get(name)
            if dependency is None:
                raise ValueError(f"dependency {name} of {model.name} does not exist in namespace {row.namespace}")
            visit(dependency, (*path, model.name))
        if model not in ordered:
            ordered.append(model)

    visit(siblings.get(row.name, row), ())
    return ordered


def _dependencies_not_ready(
    gateway: ClusterGateway, row: InferenceModel, names: list[str], now: datetime
) -> Plan | None:
    """Wake dependencies that are down (they start first); None once every one is ready."""
    if not names:
        return None
    try:
        closure = dependency_closure(row)
    except ValueError as error:
        reason = Reason.FAILED if "cycle" in str(error) else Reason.DEPENDENCY_NOT_FOUND
        return Plan(0, reason, str(error))
    waiting = []
    deployments = gateway.builtin("apps/v1", "Deployment")
    for dependency in closure[:-1]:
        # The dependency's Deployment is the live truth; its status may not be reconciled yet.
        if ready_replicas(deployments.get(dependency.namespace, dependency.name)) >= 1:
            continue
        waiting.append(dependency.name)
        wake_in_cluster(gateway, dependency, now)
    if waiting:
        return Plan(0, Reason.PENDING, f"waiting for dependencies to be ready: {', '.join(waiting)}")
    return None


def ready_replicas(deployment: dict[str, Any] | None) -> int:
    """Ready replicas of the Deployment's current spec. The Deployment controller reports a
    generation late: right after a scale to zero its status still counts the old pods as ready,
    so a status older than the spec (``observedGeneration`` behind ``generation``) counts none."""
    if not deployment:
        return 0
    status = deployment.get("status") or {}
    if (status.get("observedGeneration") or 0) < (deployment["metadata"].get("generation") or 0):
        return 0
    return min(status.get("readyReplicas") or 0, deployment["spec"].get("replicas") or 0)


def pod_gpus(deployment: dict[str, Any]) -> int:
    """GPUs one pod of the Deployment's template asks for (its containers' ``nvidia.com/gpu``)."""
    total = 0
    for container in deployment["spec"]["template"]["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        asked = (resources.get("limits") or {}).get("nvidia.com/gpu") or (resources.get("requests") or {}).get(
            "nvidia.com/gpu")
        total += quantity_to_int(asked) or 0
    return total


def wake_in_cluster(gateway: ClusterGateway, model: InferenceModel, now: datetime) -> None:
    """Record a request now on the model (the annotation the cooldown counts from)."""
    gateway.patch(
        KIND, model.namespace, model.name, {"metadata": {"annotations": {LAST_REQUEST_ANNOTATION: rfc3339(now)}}}
    )


def _container_resources(resources: dict[str, Any]) -> dict[str, Any]:
    return {
        part: {("nvidia.com/gpu" if name == "gpu" else name): value for name, value in values.items()}
        for part, values in (resources or {}).items()
        if values
    }


def _deployment(cr: dict[str, Any], current: dict[str, Any] | None, replicas: int, now: datetime) -> dict[str, Any]:
    """The Deployment the portal wants for the model (applied by clusters.kube.owned.ensure)."""
    metadata, spec = cr["metadata"], cr["spec"]
    labels = deployment_labels(cr)
    requested = last_request_time(cr, current) or now
    if not spec.get("containerImage"):
        replicas = 0
    # Selectors cannot change after creation: select on the object's name only, so editing
    # modelName relabels the pods instead of breaking every later update with a 422.
    selector = {"app.kubernetes.io/name": labels["app.kubernetes.io/name"]}
    try:  # the port the gateway connects to, read by its parser (one reading of the field)
        port = gateway_rules().backend_port(spec.get("backendUrl")) or 8000
    except ValueError:  # a URL the gateway cannot read: it routes nothing there; the pods still start
        port = 8000
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "labels": labels,
            "annotations": {MEMORY_ANNOTATION: spec["memory"], LAST_REQUEST_ANNOTATION: rfc3339(requested)},
            "ownerReferences": [
                {
                    "apiVersion": KIND.api_version,
                    "kind": KIND.kind,
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": spec.get("nodeSelector") or {},
                    "containers": [
                        {
                            "name": "inference-server",
                            "image": spec["containerImage"],
                            "env": [{"name": "MODEL_NAME", "value": spec["modelName"]}],
                            "ports": [{"name": "http", "containerPort": port}],
                            "resources": _container_resources(spec.get("resources") or {}),
                        }
                    ],
                },
            },
        },
    }


def deployment_failure(deployment: dict[str, Any]) -> str | None:
    for condition in (deployment.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Progressing" and condition.get("status") == "False":
            return condition.get("message") or condition.get("reason") or "the rollout is not progressing"
        if condition.get("type") == "ReplicaFailure" and condition.get("status") == "True":
            return condition.get("message") or "pods could not be created"
    return None


def _status(
    cr: dict[str, Any], deployment: dict[str, Any] | None, plan: Plan, now: datetime,
    unschedulable: str | None = None, borrowed: str | None = None,
) -> dict[str, Any]:
    """The status the controller owns. ``unschedulable``: the scheduler's word on a pod it cannot
    place; ``borrowed``: the team's borrowing in words while this model runs on borrowed capacity
    (the ``Borrowing`` condition), else None."""
    observed = (deployment or {}).get("status") or {}
    ready = ready_replicas(deployment)
    if plan.replicas == 0:
        reason, message = plan.reason, plan.message
    elif failure := deployment_failure(deployment or {}):
        reason, message = Reason.FAILED, failure
    elif ready >= 1:
        reason, message = Reason.DEPLOYED, "Deployment is ready and serving traffic"
    elif unschedulable:
        reason, message = Reason.FAILED_SCHEDULING, unschedulable
    else:
        reason, message = Reason.DEPLOYING, f"waiting for pods to become ready ({ready}/{plan.replicas})"
    generation = cr["metadata"].get("generation")
    conditions = (cr.get("status") or {}).get("conditions")
    conditions = set_condition(conditions, "Ready", reason == Reason.DEPLOYED, reason, message, now, generation)
    conditions = with_failing(KIND.kind, conditions, now, generation)
    available = (observed.get("availableReplicas") or 0) >= 1
    conditions = set_condition(
        conditions,
        "Available",
        available,
        reason,
        "Model is available and serving requests" if available else message,
        now,
        generation,
    )
    conditions = team_conditions(conditions, plan, reason, borrowed, now, generation)
    return {
        "ready": reason == Reason.DEPLOYED,
        "replicas": observed.get("replicas") or 0 if plan.replicas else 0,
        "conditions": conditions,
        "observedGeneration": generation,
    }


def borrowed_words(row: ServingModel, plan: Plan) -> str | None:
    """Admission's words for the capacity the model borrows (its ``Borrowing`` condition), read only
    while it is to run: a model kept at zero borrows nothing."""
    if not plan.replicas:
        return None
    return borrowing(row.cluster_id, row.node_pool).get((row.kube.kind, row.cluster_id, row.namespace, row.name))


def team_conditions(
    conditions: list[dict[str, Any]], plan: Plan, reason: str, borrowed: str | None, now: datetime,
    generation: int | None,
) -> list[dict[str, Any]]:
    """The conditions teams on a shared pool read, the same on every kind the portal controls:
    ``Preempted`` from a preemption until the model serves again (the Ready reason moves on to
    the refusal of its restart; this one keeps who took its place), and ``Borrowing`` while the
    model runs on capacity its team borrows (``borrowed``: admission's words for it)."""
    if plan.reason == Reason.PREEMPTED:
        conditions = set_condition(conditions, PREEMPTED_CONDITION, True, "Reclaimed", plan.message, now, generation)
    elif reason == Reason.DEPLOYED and _condition_true(conditions, PREEMPTED_CONDITION):
        conditions = set_condition(conditions, PREEMPTED_CONDITION, False, "Readmitted",
                                   "admitted again and serving", now, generation)  # fmt: skip
    if borrowed:
        conditions = set_condition(conditions, BORROWING_CONDITION, True, "BorrowedCapacity",
                                   f"{borrowed}: this model runs on borrowed capacity and is preempted first when "
                                   "another team reclaims its guaranteed share", now, generation)  # fmt: skip
    elif _condition_true(conditions, BORROWING_CONDITION):
        conditions = set_condition(conditions, BORROWING_CONDITION, False, "WithinGuarantee",
                                   "the model does not run on borrowed capacity", now, generation)  # fmt: skip
    return conditions


def _condition_true(conditions: list[dict[str, Any]], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def _finalize(gateway: ClusterGateway, row: InferenceModel, cr: dict[str, Any], now: datetime) -> str:
    """The reference's cleanup: release the budget (the metrics went when the row became
    ``Deleting``), remove the finalizer."""
    conditions = set_condition(
        (cr.get("status") or {}).get("conditions"),
        "Ready",
        False,
        Reason.TERMINATING,
        "Model is being terminated",
        now,
        cr["metadata"].get("generation"),
    )
    cr = gateway.patch_status(KIND, row.namespace, row.name, {"ready": False, "conditions": conditions})
    release(row.cluster_id, KIND.kind, row.namespace, row.name)
    remove_finalizer(gateway, KIND, row.namespace, row.name, FINALIZER, current=cr)
    return "finalized"
