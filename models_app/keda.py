"""A KEDA ``ScaledObject`` for a serving model, rendered on request (issue 42, docs/autoscaling.md).

The portal decides how many replicas each serving model should have and publishes the figure as
the gauge ``inference_portal_model_desired_replicas{cluster, namespace, kind, name}`` on its
``/metrics``. A team whose cluster scales workloads with KEDA applies the object rendered here: it
points KEDA at the model's Deployment with a ``prometheus`` trigger that reads that gauge, so the
Deployment follows the portal's decision without the portal writing to it.

Why each choice:

- ``metricType: AverageValue`` with ``threshold: "1"``: the HPA KEDA makes then wants
  ``ceil(value / 1)`` replicas, the gauge itself; ``activationThreshold: "0"`` wakes the model from
  zero as soon as the portal wants one replica.
- ``max(...)`` around the series: several portal processes (or a Prometheus pair) may publish the
  same series with other labels (``instance``); KEDA refuses a query that answers more than one.
- ``ignoreNullValues: "false"`` and a ``currentReplicas`` fallback: a series that is missing (the
  portal or Prometheus down) must keep the replicas where they are, never read as 0 and stop the
  model.
- no scaling delays of KEDA's or the HPA's own (``cooldownPeriod: 0``, a zero scale-down window,
  tolerance 0): the gauge has already waited out the model's idle time (InferenceModel
  ``spec.cooldownPeriod``, KubeAI ``scaleDownDelaySeconds``), and the HPA's default 10 %
  tolerance would leave 10 replicas where the portal wants 11.

The Deployment is the one the model owns in its cluster (an owner reference to the model, as every
operator sets; llm-d's ModelService owns a decode and a prefill Deployment: the decode one serves).
It is read live, so a model its operator has not deployed yet is refused, naming what is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from kubernetes.config import ConfigException

from clusters.kube.client import ClusterGateway, GatewayError, TransientError
from clusters.kube.live import SCOPES, Scope
from clusters.validation.schemas import MISSING, FieldError
from models_app.models import InferenceModel, KubeAIModel, ModelService, ServingModel

SCALED_OBJECT_API_VERSION = "keda.sh/v1alpha1"
DESIRED_REPLICAS_METRIC = "inference_portal_model_desired_replicas"
# KEDA's own maxReplicaCount when a ScaledObject names none: the ceiling of a model whose kind sets none.
KEDA_DEFAULT_MAX_REPLICAS = 100
MAX_INT32 = 2**31 - 1
# llm-d labels each role's Deployment so (reference 004): the decode pods are the ones that answer.
ROLE_LABEL, SERVING_ROLE = "llm-d.ai/role", "decode"
# KEDA reads the trigger this often (its default is 30 s, twice the usual scrape interval).
POLLING_INTERVAL_SECONDS = 15
SERVING_KINDS = ", ".join(kind.kube.kind for kind in (InferenceModel, KubeAIModel, ModelService))


class ScaledObjectRefused(Exception):
    """No ScaledObject can be rendered: ``error`` names the field, its value and the rule;
    ``http_status`` is 400 for the request's own input, 409 for the model or its cluster as they
    are now (no Deployment yet, replica bounds KEDA cannot use), 503 when the cluster is not reached."""

    def __init__(self, error: FieldError, http_status: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.http_status = http_status


@dataclass(frozen=True)
class ReplicaBounds:
    """The ScaledObject's minReplicaCount and maxReplicaCount, and the model's fields they come from
    (named in a refusal)."""

    minimum: int
    maximum: int
    minimum_field: str
    maximum_field: str


def replica_bounds(model: ServingModel) -> ReplicaBounds:
    """The model's own bounds: KubeAI's ``minReplicas``/``maxReplicas`` (0 and KEDA's default 100
    when unset, KubeAI's "no limit"); an InferenceModel from 0 (its controller scales it to zero
    when idle) to ``maxReplicas`` (the CRD's default 1); a ModelService from 1 (llm-d keeps its
    decode pods: the endpoint picker needs one) to ``spec.decode.replicas``, the count its team
    asked for (no field says more may run)."""
    spec = model.spec or {}

    def field(holder: dict[str, Any], key: str, default: int) -> int:
        return default if holder.get(key) is None else holder[key]

    if isinstance(model, KubeAIModel):
        return ReplicaBounds(field(spec, "minReplicas", 0), field(spec, "maxReplicas", KEDA_DEFAULT_MAX_REPLICAS),
                             "spec.minReplicas", "spec.maxReplicas")  # fmt: skip
    if isinstance(model, InferenceModel):
        return ReplicaBounds(0, field(spec, "maxReplicas", 1), "minReplicas", "spec.maxReplicas")
    if isinstance(model, ModelService):
        decode = spec.get("decode") if isinstance(spec.get("decode"), dict) else {}
        return ReplicaBounds(1, field(decode, "replicas", 1), "minReplicas", "spec.decode.replicas")
    raise ScaledObjectRefused(FieldError("kind", type(model).__name__, f"is not a serving kind ({SERVING_KINDS})"), 400)


def checked_bounds(bounds: ReplicaBounds, minimum: int | None = None, maximum: int | None = None) -> ReplicaBounds:
    """``bounds`` with the request's overrides (``minReplicas``, ``maxReplicas``), refused when KEDA
    could not use them: a maximum below 1 (KEDA scales nothing) or below the minimum. A refused
    override is the request's (400), a refused model field the model's (409)."""
    if minimum is not None:
        bounds = ReplicaBounds(minimum, bounds.maximum, "minReplicas", bounds.maximum_field)
    if maximum is not None:
        bounds = ReplicaBounds(bounds.minimum, maximum, bounds.minimum_field, "maxReplicas")

    def refused(field: str, value: int, rule: str) -> ScaledObjectRefused:
        return ScaledObjectRefused(FieldError(field, value, rule), 409 if field.startswith("spec.") else 400)

    if bounds.maximum < 1:
        raise refused(bounds.maximum_field, bounds.maximum, "must be at least 1 for KEDA to scale the model")
    if bounds.minimum > bounds.maximum:
        raise refused(bounds.minimum_field, bounds.minimum,
                      f"must not exceed the maximum ({bounds.maximum_field} = {bounds.maximum})")  # fmt: skip
    return bounds


def desired_replicas_query(model: ServingModel) -> str:
    """The PromQL the trigger runs: the portal's gauge for this one model (JSON's string escapes
    are PromQL's, so any name stays one label value)."""
    labels = {"cluster": model.cluster.name, "namespace": model.namespace, "kind": model.kube.kind,
              "name": model.name}  # fmt: skip
    selector = ",".join(f"{label}={json.dumps(value)}" for label, value in labels.items())
    return f"max({DESIRED_REPLICAS_METRIC}{{{selector}}})"


def serving_deployment(model: ServingModel) -> str:
    """The name of the Deployment the model owns in its cluster, read live; refused (409) when it
    owns none or several that no role label tells apart, 503 when the cluster is not reached."""

    def refused(rule: str, http_status: int = 409) -> ScaledObjectRefused:
        return ScaledObjectRefused(FieldError("spec.scaleTargetRef", MISSING, rule), http_status)

    scope = SCOPES.get(model.kube.kind, lambda _: Scope())(model)
    try:
        gateway = ClusterGateway(model.cluster)
        try:
            items, _ = gateway.builtin("apps/v1", "Deployment").list(scope.selectors.get("Deployment", ""),
                                                                     model.namespace)  # fmt: skip
        finally:
            gateway.close()
    except TransientError as error:
        raise refused(f"cluster {model.cluster.name} could not be read just now ({error})", 503) from None
    except (GatewayError, ConfigException) as error:  # refused, or no API server to ask (a snapshot cluster)
        raise refused(f"the model's Deployments could not be listed: {error}") from None
    owned = [item for item in items if model.uid and any(
        reference.get("uid") == model.uid for reference in item["metadata"].get("ownerReferences") or [])]
    serving = [item for item in owned if (item["metadata"].get("labels") or {}).get(ROLE_LABEL) == SERVING_ROLE]
    chosen = serving or owned
    if len(chosen) == 1:
        return chosen[0]["metadata"]["name"]
    what = f"{model.kube.kind} {model.name} in namespace {model.namespace}"
    if not chosen:
        raise refused(f"no Deployment owned by {what} (its operator has not deployed it yet)")
    names = ", ".join(sorted(item["metadata"]["name"] for item in chosen))
    raise refused(f"several Deployments owned by {what} ({names}), none labelled {ROLE_LABEL}={SERVING_ROLE}")


def render_scaled_object(model: ServingModel, minimum: int | None = None, maximum: int | None = None) -> dict[str, Any]:
    """The ScaledObject (a manifest dict) that scales ``model``'s Deployment to the portal's desired
    replicas, between the model's bounds or the request's ``minimum``/``maximum``; ScaledObjectRefused
    names what stands in the way."""
    bounds = checked_bounds(replica_bounds(model), minimum, maximum)
    deployment = serving_deployment(model)
    no_delay = {"stabilizationWindowSeconds": 0, "tolerance": "0"}
    return {
        "apiVersion": SCALED_OBJECT_API_VERSION,
        "kind": "ScaledObject",
        "metadata": {"name": model.name, "namespace": model.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicaCount": bounds.minimum,
            "maxReplicaCount": bounds.maximum,
            "pollingInterval": POLLING_INTERVAL_SECONDS,
            "cooldownPeriod": 0,
            "fallback": {"failureThreshold": 3, "replicas": bounds.minimum, "behavior": "currentReplicas"},
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": no_delay, "scaleDown": no_delay}}},
            "triggers": [{
                "type": "prometheus",
                "name": "desired-replicas",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": settings.KEDA_PROMETHEUS_SERVER_ADDRESS,
                    "query": desired_replicas_query(model),
                    "threshold": "1",
                    "activationThreshold": "0",
                    "ignoreNullValues": "false",
                },
            }],
        },
    }  # fmt: skip
