"""Mirrors of the serving kinds. Each declares its identity once and projects indexed columns."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from django.db import models

from clusters.kinds import KindInfo, register
from clusters.models import KubeObject
from clusters.quantities import quantity_to_decimal, quantity_to_int, saturate_int64
from clusters.serving import PodResources
from clusters.spec_rules import requests_within_limits
from clusters.validation import FieldError
from scheduler.pools import node_pool_of


def _dig(data: Any, *keys: str, default: Any = None) -> Any:
    """``data[k1][k2]...`` or ``default`` when any level is missing or not a map."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


def _millicores(value: Any) -> int | None:
    """A CPU quantity (``"4"``, ``"500m"``) in millicores; None when absent or not a quantity."""
    amount = quantity_to_decimal(value)
    return None if amount is None else math.ceil(amount * 1000)


class ServingModel(KubeObject):
    """Columns every serving kind projects, so the catalog can list all kinds side by side.

    Each column holds whatever the CRD allows its source to be, so a CRD-valid object is always
    stored: strings the CRD does not bound are text, without a B-tree index (PostgreSQL cannot
    index a value over a third of a page, 2,704 bytes); integers are int64, and quantities and their
    totals saturate at int64's maximum, as Kubernetes caps quantities.
    """

    model_name = models.TextField(blank=True, editable=False)
    engine = models.CharField(max_length=64, blank=True, db_index=True, editable=False)  # an enum in every CRD
    node_pool = models.TextField(blank=True, editable=False)
    memory_bytes = models.BigIntegerField(null=True, blank=True, db_index=True, editable=False)
    replicas = models.PositiveBigIntegerField(
        null=True, blank=True, editable=False, help_text="Desired replicas from spec."
    )
    gpu_count = models.PositiveBigIntegerField(default=0, editable=False, help_text="GPUs for all desired replicas.")
    ready = models.BooleanField(default=False, db_index=True, editable=False)

    class Meta(KubeObject.Meta):
        abstract = True

    # The kube_pod_labels label naming the object on its pods (right-sizing, see clusters/serving.py).
    pod_label: ClassVar[str]

    @classmethod
    def projected_fields(cls) -> list[str]:
        return ["model_name", "engine", "node_pool", "memory_bytes", "replicas", "gpu_count", "ready"]

    def pod_resources(self) -> PodResources:
        """What one pod of this object requests; each kind reads its own spec."""
        raise NotImplementedError


@register
class InferenceModel(ServingModel):
    """eh-ops ``InferenceModel``: one served model with a memory budget in a node pool."""

    kube = KindInfo("inference.eh-ops.io", "v1alpha1", "InferenceModel", "inferencemodels")

    observed_peak_bytes = models.BigIntegerField(null=True, blank=True, editable=False)
    utilization_percent = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)

    @classmethod
    def projected_fields(cls) -> list[str]:
        return [*super().projected_fields(), "observed_peak_bytes", "utilization_percent"]

    @classmethod
    def extra_rules(cls, manifest: dict[str, Any]) -> list[FieldError]:
        spec, name = manifest["spec"], manifest["metadata"]["name"]
        errors = requests_within_limits(spec.get("resources"), "spec.resources")
        if quantity_to_int(spec.get("memory")) == 0:
            errors.append(FieldError("spec.memory", spec["memory"], "must be greater than zero"))
        dependencies = spec.get("dependencies") or []
        if name in dependencies:
            errors.append(FieldError("spec.dependencies", dependencies, f"must not include the model itself ({name})"))
        if len(set(dependencies)) != len(dependencies):
            errors.append(FieldError("spec.dependencies", dependencies, "must not repeat a name"))
        return errors

    def project(self) -> None:
        spec, status = self.spec or {}, self.status or {}
        self.model_name = spec.get("modelName", "")
        self.engine = ""
        self.node_pool = node_pool_of(spec.get("nodeSelector"))
        self.memory_bytes = quantity_to_int(spec.get("memory"))
        self.replicas = spec.get("maxReplicas", 1)
        gpus = _dig(spec, "resources", "limits", "gpu") or _dig(spec, "resources", "requests", "gpu")
        self.gpu_count = saturate_int64((quantity_to_int(gpus) or 0) * (self.replicas or 0))
        self.ready = status.get("ready") is True
        self.observed_peak_bytes = quantity_to_int(status.get("observedPeakMemory"))
        self.utilization_percent = status.get("utilizationPercent")

    # -- right-sizing: the controller labels pods inference.eh-ops.io/model=<modelName>
    pod_label = "label_inference_eh_ops_io_model"

    def pod_resources(self) -> PodResources:
        resources = (self.spec or {}).get("resources") or {}
        gpus = _dig(resources, "limits", "gpu") or _dig(resources, "requests", "gpu")
        return PodResources(
            label_value=self.model_name,
            memory_bytes=self.memory_bytes,
            cpu_millicores=_millicores(_dig(resources, "requests", "cpu")),
            gpus=quantity_to_int(gpus) or 0,
            served_model=self.model_name,
        )


@register
class KubeAIModel(ServingModel):
    """KubeAI ``Model`` (kind ``Model``, named KubeAIModel here to avoid clashing with Django's Model)."""

    kube = KindInfo("kubeai.org", "v1", "Model", "models")

    url = models.TextField(blank=True, editable=False)
    features = models.TextField(
        blank=True, editable=False, help_text="Comma-wrapped list (',TextGeneration,') so one lookup serves filters."
    )
    resource_profile = models.TextField(blank=True, editable=False)

    class Meta(ServingModel.Meta):
        verbose_name = "KubeAI model"

    @classmethod
    def projected_fields(cls) -> list[str]:
        return [*super().projected_fields(), "url", "features", "resource_profile"]

    @classmethod
    def extra_rules(cls, manifest: dict[str, Any]) -> list[FieldError]:
        spec = manifest["spec"]
        errors: list[FieldError] = []
        url, engine = spec.get("url", ""), spec.get("engine")
        if url.startswith("ollama://") != (engine == "OLlama"):
            errors.append(
                FieldError(
                    "spec.url", url, f"must use ollama:// exactly when spec.engine is OLlama (engine is {engine})"
                )
            )
        if url.split("://")[0] in {"gs", "oss", "s3"} and not spec.get("cacheProfile"):
            errors.append(
                FieldError(
                    "spec.url", url, "needs spec.cacheProfile (gs://, oss:// and s3:// are only served from a cache)"
                )
            )
        low, high = spec.get("minReplicas"), spec.get("maxReplicas")
        if low is not None and high is not None and low > high:
            errors.append(FieldError("spec.minReplicas", low, f"must not exceed spec.maxReplicas ({high})"))
        for field in ("adapters", "files"):
            key = "name" if field == "adapters" else "path"
            seen: set[str] = set()
            for index, item in enumerate(spec.get(field) or []):
                if item[key] in seen:
                    errors.append(FieldError(f"spec.{field}[{index}].{key}", item[key], "is repeated"))
                seen.add(item[key])
        return errors

    def project(self) -> None:
        spec, status = self.spec or {}, self.status or {}
        self.model_name = self.name
        self.engine = spec.get("engine", "")
        self.url = spec.get("url", "")
        self.features = "," + ",".join(spec.get("features") or []) + "," if spec.get("features") else ""
        self.resource_profile = spec.get("resourceProfile", "")
        self.node_pool = ""
        self.memory_bytes = None
        replicas = spec.get("replicas", spec.get("minReplicas"))
        self.replicas = replicas
        _, _, count = self.resource_profile.partition(":")
        gpus = int(count) * (replicas or 0) if count.isdigit() and "cpu" not in self.resource_profile else 0
        self.gpu_count = saturate_int64(gpus)
        self.ready = (_dig(status, "replicas", "ready") or 0) > 0

    # -- right-sizing: KubeAI labels its pods model=<metadata.name>; memory and CPU come from the
    # resource profile, which the Model does not carry, so only GPUs and KV cache are judged.
    pod_label = "label_model"

    def pod_resources(self) -> PodResources:
        _, _, count = self.resource_profile.partition(":")
        gpus = int(count) if count.isdigit() and "cpu" not in self.resource_profile else 0
        url = self.url
        return PodResources(
            label_value=self.name,
            memory_bytes=None,
            cpu_millicores=None,
            gpus=gpus,
            served_model=url.removeprefix("hf://") if url.startswith("hf://") else "",
        )


@register
class ModelService(ServingModel):
    """OtterScale / llm-d ``ModelService``: decode (and optional prefill) roles behind an endpoint picker."""

    kube = KindInfo("model.otterscale.io", "v1alpha1", "ModelService", "modelservices")

    accelerator = models.CharField(max_length=32, blank=True, editable=False)
    phase = models.CharField(max_length=16, blank=True, editable=False)

    @classmethod
    def projected_fields(cls) -> list[str]:
        return [*super().projected_fields(), "accelerator", "phase"]

    @classmethod
    def extra_rules(cls, manifest: dict[str, Any]) -> list[FieldError]:
        spec = manifest["spec"]
        errors: list[FieldError] = []
        for role in ("decode", "prefill"):
            if isinstance(spec.get(role), dict):
                errors += requests_within_limits(spec[role].get("resources"), f"spec.{role}.resources")
        return errors

    @staticmethod
    def gpus_per_pod(role: dict[str, Any], accelerator: str) -> int:
        """max(tensor, 1) x max(dataLocal, 1), as the operator computes; ``data`` is not counted."""
        if accelerator == "cpu":
            return 0
        parallelism = role.get("parallelism") or {}
        return max(parallelism.get("tensor", 1), 1) * max(parallelism.get("dataLocal", 1), 1)

    def project(self) -> None:
        spec, status = self.spec or {}, self.status or {}
        roles = [spec[role] for role in ("decode", "prefill") if isinstance(spec.get(role), dict)]
        self.model_name = _dig(spec, "model", "name", default="")
        self.engine = "vLLM"
        self.accelerator = _dig(spec, "accelerator", "type", default="")
        self.node_pool = node_pool_of(_dig(spec, "decode", "nodeSelector"))
        self.replicas = sum(role.get("replicas", 1) for role in roles)  # two int32s: always an int64
        self.gpu_count = saturate_int64(
            sum(self.gpus_per_pod(role, self.accelerator) * role.get("replicas", 1) for role in roles)
        )
        memories = [
            (
                quantity_to_int(_dig(role, "resources", "requests", "memory"))
                or quantity_to_int(_dig(role, "resources", "limits", "memory")),
                role.get("replicas", 1),
            )
            for role in roles
        ]
        self.memory_bytes = (
            saturate_int64(sum(memory * count for memory, count in memories))
            if all(m for m, _ in memories) and memories
            else None
        )
        self.phase = status.get("phase", "")
        self.ready = self.phase == "Ready"

    # -- right-sizing: llm-d labels decode and prefill pods llm-d.ai/model=<metadata.name>; a
    # model's figure is its largest pod's, so the largest role's request is the declaration.
    pod_label = "label_llm_d_ai_model"

    def pod_resources(self) -> PodResources:
        spec = self.spec or {}
        roles = [spec[role] for role in ("decode", "prefill") if isinstance(spec.get(role), dict)]
        memories = [
            quantity_to_int(_dig(role, "resources", "requests", "memory"))
            or quantity_to_int(_dig(role, "resources", "limits", "memory"))
            for role in roles
        ]
        cpus = [_millicores(_dig(role, "resources", "requests", "cpu")) for role in roles]
        return PodResources(
            label_value=self.name,
            memory_bytes=max(memories) if memories and all(memories) else None,
            cpu_millicores=max(cpus) if cpus and all(c is not None for c in cpus) else None,
            gpus=max((self.gpus_per_pod(role, self.accelerator) for role in roles), default=0),
            served_model=self.model_name,
        )
