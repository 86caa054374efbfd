"""The portal as the KubeAI ``Model`` controller (reference 002), for clusters that ask for it.

KubeAI's own operator turns a Model into engine pods and scales them; where a cluster lets the
portal manage ``Model`` (``Cluster.managed_kinds``), this module does that part:

- **Pods.** A Deployment ``model-<name>`` (KubeAI's name for a Model's pods) running the engine:
  ``spec.image``, else the engine's image of ``KUBEAI_ENGINE_IMAGES``; the model from ``spec.url``
  (``hf://<repo>`` as the repo id, ``pvc://<claim>[/<path>]`` mounted read-only at ``/model``,
  ``ollama://<model>`` as Ollama's model) with the engine's own flags for it and port 8000, then
  ``spec.args`` and ``spec.env`` (``envFrom`` as given); the resources, nodeSelector and
  tolerations of ``resourceProfile: <name>:<count>`` from ``KUBEAI_RESOURCE_PROFILES``, requests
  and limits times the count, as KubeAI does; ``priorityClassName``. Pods carry KubeAI's ``model``
  label (what admission and right-sizing read them by). A profile the table does not know is a
  ``Failed`` condition naming ``spec.resourceProfile`` (and refused at the write: ``KubeAIModel``'s
  cluster rules). Left out: ``files`` (ConfigMap mounts), ``cacheProfile`` (KubeAI's model cache,
  so ``s3://``/``gs://``/``oss://`` URLs fail naming ``spec.url``) and Ollama's model pull at start.
- **A Service** ``model-<name>`` on port 8000 selecting those pods: the gateway routes a managed
  Model there (``inference_gateway.routes``) and the autoscaler reads its engines through it.
- **Replicas.** ``spec.replicas`` between ``minReplicas`` and ``maxReplicas`` (KubeAI's autoscaler
  writes it: ``inference_gateway.autoscaler``; a request held by the gateway at zero wakes it to one,
  :func:`wake_in_cluster`). Growth needs admission (``scheduler.admission``: memory, GPUs, the
  team's quota and what it may borrow) for the whole count: when it refuses, the most replicas
  it admits run, never fewer than already do, and the ``Scaling`` condition says the refusal; a
  Model admitted no replica at all is ``Ready`` False with admission's reason (``OverQuota``,
  ``InsufficientGPU``...), exactly as an InferenceModel's start. Teams share pools across kinds: a
  Model's growth within its team's guarantee stops idle models and preempts borrowers (an
  InferenceModel or another Model), and a borrowing Model is preempted for another team's
  guarantee, all of its replicas, with the ``Preempted`` and ``Borrowing`` conditions an
  InferenceModel carries (``models_app.preemption``). What runs is ``status.desiredReplicas``
  (``inference_portal_model_desired_replicas`` on ``/metrics``, for KEDA or an HPA).

No finalizer: the Deployment and Service go with the Model (owner references), and the pass's sweep
releases the budget of Models that left (``release_departed``).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings

from clusters.kube.client import ClusterGateway, NotFoundError
from clusters.kube.conditions import set_condition
from clusters.kube.failures import unschedulable, warn, with_failing
from clusters.kube.owned import label_value
from clusters.models import Cluster
from clusters.sync.inbound import upsert_from_cluster
from clusters.validation.quantities import quantity_to_decimal
from models_app.controller import (
    Plan,
    Reason,
    apply_child,
    borrowed_words,
    deployment_failure,
    ready_replicas,
    release_departed,
    team_conditions,
)
from models_app.models import KubeAIModel, kubeai_pod_shape, kubeai_profile, unknown_profile_errors
from models_app.preemption import admit_making_room, preempted_words, readmitted
from scheduler.public import AdmissionDecision, Demand, PodShape, admit, release

KIND = KubeAIModel.kube
PORT = 8000
MANAGED_BY = {"app.kubernetes.io/managed-by": "inference-portal"}
CHILD_SELECTOR = "app.kubernetes.io/managed-by=inference-portal,model"
SCALING_CONDITION = "Scaling"
"""True while the Deployment runs every replica ``spec.replicas`` asks for; False with admission's
reason and message while it runs fewer (quota, memory, GPUs)."""
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")  # RFC 1035, as the API server checks a Service's name
DNS_LABEL_MAX = 63
MODEL_PATH = "/model"
SERVED_SOURCES = ("hf://", "pvc://", "ollama://")


def child_name(name: str) -> str:
    """KubeAI's name for a Model's pods (its Deployment here)."""
    return f"model-{name}"


def service_name(name: str) -> str:
    """The Service in front of a Model's pods: :func:`child_name` as a DNS-1035 label, which a
    Service's name must be. A Model's name may hold dots (KubeAI's own catalog has
    ``llama-3.1-8b-instruct-fp8-l4``, whose Service the API server refused): they become ``-``, and
    a name so changed or shortened ends in a hash of the Model's, so two Models stay apart."""
    wanted = child_name(name)
    if DNS_LABEL.fullmatch(wanted):
        return wanted
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{re.sub('[^a-z0-9-]', '-', wanted.lower())[:DNS_LABEL_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def wanted_replicas(spec: dict[str, Any]) -> int:
    """The replicas the spec asks for: ``replicas`` (KubeAI defaults it to ``minReplicas``), within
    ``minReplicas`` and ``maxReplicas`` unless ``autoscalingDisabled`` hands the count to the user."""
    low = spec.get("minReplicas") or 0
    replicas = spec.get("replicas", low) or 0
    if spec.get("autoscalingDisabled"):
        return replicas
    high = spec.get("maxReplicas")
    return min(max(replicas, low), high) if high is not None else max(replicas, low)


def wake_replicas(spec: dict[str, Any]) -> int:
    """What a request for a Model at zero scales it to: one replica, or ``minReplicas`` when more."""
    return max(1, spec.get("minReplicas") or 0)


def wake_in_cluster(gateway: ClusterGateway, model: KubeAIModel) -> None:
    """A request is waiting for the Model: at zero replicas it is scaled to :func:`wake_replicas`,
    as KubeAI's proxy does for a request to a Model with none (the autoscaler takes it from there)."""
    cr = gateway.get(KIND, model.namespace, model.name)
    if wanted_replicas(cr["spec"]) == 0:
        gateway.patch(KIND, model.namespace, model.name, {"spec": {"replicas": wake_replicas(cr["spec"])}})


def reconcile_kubeai_model(gateway: ClusterGateway, row: KubeAIModel, now: datetime, preempted: str = "") -> str:
    """One reconcile of the Model: its Deployment and Service applied, its status written.
    ``preempted``: admission chose it to stop for a team reclaiming its guaranteed share
    (``models_app.preemption``): every replica goes, with that reason."""
    try:
        cr = gateway.get(KIND, row.namespace, row.name)
    except NotFoundError:
        release(row.cluster_id, KIND.kind, row.namespace, row.name)
        return "gone"
    if cr["metadata"].get("deletionTimestamp"):
        release(row.cluster_id, KIND.kind, row.namespace, row.name)
        return "deleting"
    deployments = gateway.builtin("apps/v1", "Deployment")
    deployment = deployments.get(row.namespace, child_name(row.name))
    if preempted:
        plan, limited = Plan(0, Reason.PREEMPTED, preempted), None
    else:
        plan, limited = _plan(gateway, row, cr, deployment, now)
    if plan.reason != Reason.FAILED or deployment is not None:
        deployment, refused = apply_child(deployments, cr, _deployment(cr, plan.replicas), deployment, now)
        if refused is None:
            _, refused = apply_child(gateway.builtin("v1", "Service"), cr, _service(cr), None, now)
        if refused is not None:
            plan, limited = refused, None
    if plan.replicas == 0:
        release(row.cluster_id, KIND.kind, row.namespace, row.name)
    stuck = None
    if plan.replicas and deployment is not None and ready_replicas(deployment) < 1:
        stuck = unschedulable(gateway, row.namespace, deployment["spec"]["selector"]["matchLabels"])
    status = _status(cr, deployment, plan, limited, now, stuck, borrowed_words(row, plan))
    if status != {key: (cr.get("status") or {}).get(key) for key in status}:
        cr = gateway.patch_status(KIND, row.namespace, row.name, status)
        upsert_from_cluster(KubeAIModel, row.cluster, cr)
    warn(gateway, KIND, {**cr, "status": {**(cr.get("status") or {}), **status}}, now)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    return f"{ready['reason']}: {ready['message']}"


def release_departed_models(cluster: Cluster) -> int:
    """The pass's sweep: the budget of Models that left (no finalizer holds them)."""
    return release_departed(cluster, KubeAIModel)


def _plan(
    gateway: ClusterGateway, row: KubeAIModel, cr: dict[str, Any], deployment: dict[str, Any] | None, now: datetime
) -> tuple[Plan, AdmissionDecision | None]:
    """The replicas to run now, and admission's refusal when they are fewer than the spec asks."""
    spec = cr["spec"]
    errors = unknown_profile_errors(spec)
    if errors:
        return Plan(0, Reason.FAILED, errors[0].message), None
    if not str(spec.get("url", "")).startswith(SERVED_SOURCES):
        return Plan(0, Reason.FAILED, f"spec.url: {spec.get('url')!r}: the portal's controller serves hf://, pvc:// "
                                      "and ollama:// models (s3://, gs:// and oss:// need KubeAI's model cache)"), None
    wanted = wanted_replicas(spec)
    if wanted == 0:
        return Plan(0, Reason.SCALED_TO_ZERO, "spec.replicas is 0: no active requests (minReplicas "
                                              f"{spec.get('minReplicas') or 0})"), None  # fmt: skip
    running = (deployment or {}).get("spec", {}).get("replicas") or 0
    preempted = preempted_words(row) if running else None  # set before its Deployment went to zero
    if preempted:
        return Plan(0, Reason.PREEMPTED, preempted), None
    if wanted <= running:  # a scale-down or a steady count: nothing more is asked of the pool
        return Plan(wanted), None
    shape, pool = kubeai_pod_shape(spec.get("resourceProfile", ""), 1, 1)
    refused: AdmissionDecision | None = None
    held = False
    for count in range(wanted, running, -1):
        decision = admit_making_room(_demand(row, shape, pool, count), now, gateway)  # idle models, borrowers stopped
        if decision.fits:
            readmitted(row)
            return Plan(count), refused
        refused, held = refused or decision, held or bool(decision.preempt)
    if running:
        if held:  # a refusal preemption was to resolve kept that count's room (admit_making_room): what runs again
            admit(_demand(row, shape, pool, running), now, gateway=gateway)
        return Plan(running), refused
    return Plan(0, refused.reason or Reason.INSUFFICIENT_MEMORY, refused.message), refused


def _demand(row: KubeAIModel, shape: PodShape, pool: str, count: int) -> Demand:
    """What ``count`` replicas of the Model's pod ask of its pool."""
    return Demand(row.cluster_id, pool, KIND.kind, row.namespace, row.name, shape.memory_bytes * count,
                  gpus=shape.gpus * count)  # fmt: skip


def _source(spec: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """What the engine loads the model from, and the volume to mount for a ``pvc://`` URL."""
    scheme, _, rest = str(spec["url"]).partition("://")
    if scheme != "pvc":
        return rest, None
    claim, _, path = rest.partition("/")
    volume = {"name": "model", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
    return f"{MODEL_PATH}/{path}".rstrip("/"), volume


def _engine(spec: dict[str, Any], name: str) -> tuple[list[str], dict[str, str]]:
    """The engine's own flags and environment for the model, on :data:`PORT` (KubeAI's per engine)."""
    source, _ = _source(spec)
    engine = spec["engine"]
    if engine == "VLLM":
        return [f"--model={source}", f"--served-model-name={name}", f"--port={PORT}"], {}
    if engine == "Infinity":
        return ["v2", f"--model-id={source}", f"--served-model-name={name}", f"--port={PORT}"], {}
    if engine == "FasterWhisper":
        return [], {"WHISPER__MODEL": source, "UVICORN_PORT": str(PORT)}
    return [], {"OLLAMA_HOST": f"0.0.0.0:{PORT}", "OLLAMA_MODEL": source}  # OLlama


def _times(value: Any, count: int) -> str:
    """A quantity times ``count``, as the API server reads it (whole units, else milli-units)."""
    amount = (quantity_to_decimal(value) or Decimal(0)) * count
    return str(int(amount)) if amount == amount.to_integral_value() else f"{int(amount * 1000)}m"


def _resources(profile: dict[str, Any], count: int) -> dict[str, Any]:
    return {
        part: {resource: _times(value, count) for resource, value in (profile.get(part) or {}).items()}
        for part in ("requests", "limits")
        if profile.get(part)
    }


def _owner(cr: dict[str, Any]) -> dict[str, Any]:
    metadata = cr["metadata"]
    return {"apiVersion": KIND.api_version, "kind": KIND.kind, "name": metadata["name"], "uid": metadata["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _labels(cr: dict[str, Any]) -> dict[str, str]:
    """KubeAI's ``model`` label (a label value: a longer name is shortened with its hash)."""
    return {**MANAGED_BY, "model": label_value(cr["metadata"]["name"])}


def _deployment(cr: dict[str, Any], replicas: int) -> dict[str, Any]:
    """The Deployment the portal wants for the Model (applied by clusters.kube.owned.ensure). A
    profile the table lacks renders none of its resources: such a Model is kept at zero."""
    metadata, spec = cr["metadata"], cr["spec"]
    name = metadata["name"]
    profile, count = kubeai_profile(spec.get("resourceProfile", ""))
    profile = profile or {}
    flags, engine_env = _engine(spec, name)
    env = {**engine_env, **(spec.get("env") or {})}
    _, volume = _source(spec)
    container: dict[str, Any] = {
        "name": "server",
        "image": spec.get("image") or settings.KUBEAI_ENGINE_IMAGES[spec["engine"]],
        "args": [*flags, *(spec.get("args") or [])],
        "env": [{"name": key, "value": str(value)} for key, value in sorted(env.items())],
        "ports": [{"name": "http", "containerPort": PORT}],
        "resources": _resources(profile, count),
    }
    if spec.get("envFrom"):
        container["envFrom"] = spec["envFrom"]
    if volume:
        container["volumeMounts"] = [{"name": "model", "mountPath": MODEL_PATH, "readOnly": True}]
    pod: dict[str, Any] = {"containers": [container], "nodeSelector": profile.get("nodeSelector") or {}}
    if profile.get("tolerations"):
        pod["tolerations"] = profile["tolerations"]
    if volume:
        pod["volumes"] = [volume]
    if spec.get("priorityClassName"):
        pod["priorityClassName"] = spec["priorityClassName"]
    labels = _labels(cr)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": child_name(name), "namespace": metadata["namespace"], "labels": labels,
                     "ownerReferences": [_owner(cr)]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"model": labels["model"]}},
                 "template": {"metadata": {"labels": labels}, "spec": pod}},
    }  # fmt: skip


def _service(cr: dict[str, Any]) -> dict[str, Any]:
    """The Service in front of the Model's pods: the gateway's route and the autoscaler's readings."""
    metadata = cr["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name(metadata["name"]), "namespace": metadata["namespace"],
                     "labels": _labels(cr), "ownerReferences": [_owner(cr)]},
        "spec": {"selector": {"model": _labels(cr)["model"]},
                 "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}]},
    }  # fmt: skip


def _status(
    cr: dict[str, Any], deployment: dict[str, Any] | None, plan: Plan, limited: AdmissionDecision | None,
    now: datetime, stuck: str | None, borrowed: str | None,
) -> dict[str, Any]:
    """KubeAI's ``replicas`` (all, ready) and the portal's ``desiredReplicas``, conditions
    (``Ready``, ``Scaling``, and the shared pool's ``Preempted`` and ``Borrowing``) and
    ``observedGeneration``."""
    ready = ready_replicas(deployment)
    wanted = wanted_replicas(cr["spec"])
    if plan.replicas == 0:
        reason, message = plan.reason, plan.message
    elif failure := deployment_failure(deployment or {}):
        reason, message = Reason.FAILED, failure
    elif ready >= 1:
        reason, message = Reason.DEPLOYED, f"{ready} of {plan.replicas} replicas ready and serving traffic"
    elif stuck:
        reason, message = Reason.FAILED_SCHEDULING, stuck
    else:
        reason, message = Reason.DEPLOYING, f"waiting for pods to become ready ({ready}/{plan.replicas})"
    generation = cr["metadata"].get("generation")
    conditions = set_condition((cr.get("status") or {}).get("conditions"), "Ready", reason == Reason.DEPLOYED,
                               reason, message, now, generation)  # fmt: skip
    conditions = with_failing(KIND.kind, conditions, now, generation)
    if limited is not None:
        conditions = set_condition(conditions, SCALING_CONDITION, False, limited.reason or Reason.INSUFFICIENT_MEMORY,
                                   f"{plan.replicas} of {wanted} replicas admitted: {limited.message}", now,
                                   generation)  # fmt: skip
    elif plan.replicas == wanted:
        conditions = set_condition(conditions, SCALING_CONDITION, True, "Scaled",
                                   f"{wanted} replicas as spec.replicas asks", now, generation)  # fmt: skip
    else:
        conditions = set_condition(conditions, SCALING_CONDITION, False, plan.reason, plan.message, now, generation)
    conditions = team_conditions(conditions, plan, reason, borrowed, now, generation)
    observed = (deployment or {}).get("status") or {}
    return {
        "replicas": {"all": observed.get("replicas") or 0 if plan.replicas else 0, "ready": ready},
        "desiredReplicas": plan.replicas,
        "conditions": conditions,
        "observedGeneration": generation,
    }

