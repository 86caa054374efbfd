"""Mirrors of the serving kinds. Each declares its identity once and projects indexed columns."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from clusters.json_columns import JSONField
from clusters.kinds import KindInfo, register
from clusters.models import KubeObject
from clusters.serving import PodResources
from clusters.validation.quantities import quantity_to_int, saturate_int64
from clusters.validation.schemas import FieldError
from clusters.validation.spec_rules import extended_resources_whole, requests_within_limits
from common.durations import parse_duration
from models_app.gateway_rules import gateway_rules
from scheduler.public import (
    GPU_RESOURCE_BY_ACCELERATOR,
    RIGHTSIZING_STATUS_FIELDS,
    PodShape,
    cpu_millis_of,
    node_pool_of,
    selected_product,
    shapes_from_json,
)

LAST_REQUEST_ANNOTATION = "inference.eh-ops.io/last-request-time"


def _dig(data: Any, *keys: str, default: Any = None) -> Any:
    """``data[k1][k2]...`` or ``default`` when any level is missing or not a map."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


class ServingModel(KubeObject):
    """Columns every serving kind projects, so the catalog can list all kinds side by side.

    Each column holds whatever the CRD allows its source to be, so a CRD-valid object is always
    stored: strings the CRD does not bound are text, without a B-tree index (PostgreSQL cannot
    index a value over a third of a page, 2,704 bytes); integers are int64, and quantities and their
    totals saturate at int64's maximum, as Kubernetes caps quantities.
    """

    model_name = models.TextField(blank=True, editable=False)
    # engine, memory_bytes and ready are indexed with the catalog's tie-breakers (migration 0010)
    engine = models.CharField(max_length=64, blank=True, editable=False)  # an enum in every CRD
    node_pool = models.TextField(blank=True, editable=False)
    memory_bytes = models.BigIntegerField(null=True, blank=True, editable=False)
    replicas = models.PositiveBigIntegerField(
        null=True, blank=True, editable=False, help_text="Desired replicas from spec."
    )
    gpu_count = models.PositiveBigIntegerField(
        default=0, editable=False, help_text="GPUs of the replicas the cluster reports (desired ones until it reports)."
    )
    ready = models.BooleanField(default=False, editable=False)
    accelerator = models.CharField(max_length=32, blank=True, editable=False)
    phase = models.CharField(max_length=16, blank=True, editable=False)
    # What the scheduler reads (scheduler/consumption.py): projected here so budgets, admission and
    # placement never decode spec, status or annotations.
    running_replicas = models.PositiveBigIntegerField(
        null=True, blank=True, editable=False, help_text="Replicas the cluster reports; empty when it reported none."
    )
    pods = JSONField(default=list, blank=True, editable=False, help_text="PodShapes: what each pod needs.")
    last_active_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Last request, else creation: where the cooldown starts."
    )
    cooldown_seconds = models.PositiveBigIntegerField(
        null=True, blank=True, editable=False, help_text="Idle after this long without requests; empty: never idle."
    )

    class Meta(KubeObject.Meta):
        abstract = True

    # The kind's pages are models/<url_slug>/ (and rightsizing/<url_slug>/).
    url_slug: ClassVar[str]
    # The kube_pod_labels label naming the object on its pods (right-sizing, see clusters/serving.py).
    pod_label: ClassVar[str]
    # Where one pod's memory is declared in the spec, which right-sizing's apply sets (None: outside
    # the spec, so right-sizing only recommends); whether the CRD's status carries right-sizing fields.
    pod_memory_path: ClassVar[str | None] = None
    rightsizing_status: ClassVar[bool] = False
    # The field the served model's name (``model_name``, the gateway id's second half) comes from.
    model_name_path: ClassVar[str] = "spec.modelName"

    @classmethod
    def cluster_rules(cls, cluster: Any, manifest: dict[str, Any]) -> list[FieldError]:
        """One object per gateway id in the portal (the gateway's rule: ``models_app.gateway_rules``)."""
        metadata = manifest["metadata"]
        row = cls(cluster=cluster, namespace=metadata["namespace"], name=metadata["name"], spec=manifest["spec"])
        row.project()
        rules = gateway_rules()
        return (rules.picking_errors(metadata.get("annotations") or {})
                + rules.gateway_id_errors(row, cluster, cls.model_name_path, ServingModel.__subclasses__()))

    @property
    def gateway_id(self) -> str:
        """What clients send as ``model`` to the gateway: unique across the portal."""
        return gateway_rules().gateway_id(self.namespace, self.model_name)

    @classmethod
    def projected_fields(cls) -> list[str]:
        return [
            "model_name", "engine", "node_pool", "memory_bytes", "replicas", "gpu_count", "ready", "accelerator",
            "phase", "running_replicas", "pods", "last_active_at", "cooldown_seconds",
        ]  # fmt: skip

    def set_pods(self, shapes: list[PodShape]) -> None:
        """Store the pod shapes and the totals every kind derives from them the same way: GPUs of
        the replicas the cluster reports (the desired ones until it reports any)."""
        self.pods = [shape.to_json() for shape in shapes]
        self.gpu_count = saturate_int64(sum(shape.gpus * shape.running for shape in shapes))
        self.accelerator = next((shape.accelerator for shape in shapes if shape.accelerator), "")

    def created_or_requested_at(self) -> datetime | None:
        """The last-request annotation, else the object's creation in the cluster."""
        stamp = (self.annotations or {}).get(LAST_REQUEST_ANNOTATION)
        return (parse_datetime(str(stamp)) if stamp else None) or self.cluster_created_at

    def pod_label_value(self) -> str:
        """The value of ``pod_label`` on this object's pods: its name (KubeAI and llm-d label so)."""
        return self.name

    def served_model(self) -> str:
        """The served model's Hugging Face id where the spec names one, to look its weights up."""
        return self.model_name

    def spec_with_pod_memory(self, memory: str) -> dict[str, Any]:
        """The spec with one pod's memory set to ``memory`` (at ``pod_memory_path``)."""
        raise NotImplementedError(f"{self.kube.kind} declares its pods' memory outside its spec")

    def pod_resources(self) -> PodResources:
        """What one pod requests, read from the pod shapes the kind projected (one parse of the spec
        serves planning and right-sizing): a model's figure is its largest pod's, so each resource
        is the largest role's; 0 (undeclared) becomes None."""
        shapes = shapes_from_json(self.pods)
        return PodResources(
            label_value=self.pod_label_value(),
            memory_bytes=max((shape.memory_bytes for shape in shapes), default=0) or None,
            cpu_millicores=max((shape.cpu_millis for shape in shapes), default=0) or None,
            gpus=max((shape.gpus for shape in shapes), default=0),
            served_model=self.served_model(),
        )


@register
class InferenceModel(ServingModel):
    """eh-ops ``InferenceModel``: one served model with a memory budget in a node pool."""

    kube = KindInfo("inference.eh-ops.io", "v1alpha1", "InferenceModel", "inferencemodels")
    url_slug = "inferencemodels"
    # set by a request (the gateway's wake, which audits the wake itself): not audited again as the
    # cluster's change (clusters.sync.audit.decided_changes)
    bookkeeping_annotations = frozenset({LAST_REQUEST_ANNOTATION})
    pod_label_maps = ("spec.nodeSelector",)  # the Deployment's pod template (models_app.controller)

    observed_peak_bytes = models.BigIntegerField(null=True, blank=True, editable=False)
    utilization_percent = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    # right-sizing's figures (scheduler.rightsizing.writeback), kept through every status write
    portal_status_keys = {**dict.fromkeys(RIGHTSIZING_STATUS_FIELDS), "observedPeakMemory": "observed_peak_bytes",
                          "utilizationPercent": "utilization_percent"}  # fmt: skip

    @classmethod
    def projected_fields(cls) -> list[str]:
        return [*super().projected_fields(), "observed_peak_bytes", "utilization_percent"]

    @classmethod
    def extra_rules(cls, manifest: dict[str, Any]) -> list[FieldError]:
        spec, name = manifest["spec"], manifest["metadata"]["name"]
        errors = requests_within_limits(spec.get("resources"), "spec.resources")
        errors += extended_resources_whole(spec.get("resources"), "spec.resources", frozenset({"gpu"}))
        if quantity_to_int(spec.get("memory")) == 0:
            errors.append(FieldError("spec.memory", spec["memory"], "must be greater than zero"))
        dependencies = spec.get("dependencies") or []
        if name in dependencies:
            errors.append(FieldError("spec.dependencies", dependencies, f"must not include the model itself ({name})"))
        if len(set(dependencies)) != len(dependencies):
            errors.append(FieldError("spec.dependencies", dependencies, "must not repeat a name"))
        return errors

    @classmethod
    def cluster_rules(cls, cluster: Any, manifest: dict[str, Any]) -> list[FieldError]:
        """Where the model may answer (the gateway's rule: ``models_app.gateway_rules``), then its gateway id."""
        errors = gateway_rules().backend_url_errors(cluster, manifest["metadata"]["namespace"], manifest["spec"])
        return errors or super().cluster_rules(cluster, manifest)

    def project(self) -> None:
        spec, status = self.spec or {}, self.status or {}
        self.model_name = spec.get("modelName", "")
        self.engine = ""
        self.node_pool = node_pool_of(spec.get("nodeSelector"))
        self.memory_bytes = quantity_to_int(spec.get("memory"))
        self.replicas = spec.get("maxReplicas", 1)
        resources = spec.get("resources") or {}
        gpus = quantity_to_int(_dig(resources, "limits", "gpu") or _dig(resources, "requests", "gpu")) or 0
        reported = status.get("replicas")
        self.running_replicas = reported if isinstance(reported, int) and not isinstance(reported, bool) else None
        running = self.replicas if self.running_replicas is None else self.running_replicas
        memory = self.memory_bytes or 0
        # spec.memory is the model's footprint: weights and KV cache, in GPU memory when it has GPUs.
        self.set_pods([
            PodShape(
                "server", self.replicas or 0, running or 0, memory,
                cpu_millis_of(_dig(resources, "requests", "cpu")), gpus, memory if gpus else 0,
                "nvidia" if gpus else "", selected_product(spec.get("nodeSelector")),
            )
        ])  # fmt: skip
        self.ready = status.get("ready") is True
        self.phase = _condition_reason(status) or ("Ready" if self.ready else "")
        self.observed_peak_bytes = quantity_to_int(status.get("observedPeakMemory"))
        self.utilization_percent = status.get("utilizationPercent")
        self.last_active_at = self.created_or_requested_at()
        cooldown = parse_duration(str(spec.get("cooldownPeriod", "10m")))
        self.cooldown_seconds = int(cooldown.total_seconds()) if cooldown is not None else None

    # -- right-sizing: the controller labels pods inference.eh-ops.io/model=<modelName>; spec.memory is
    # the one pod's memory; the CRD's status carries observedPeakMemory, recommendation and the rest.
    pod_label = "label_inference_eh_ops_io_model"
    pod_memory_path = "spec.memory"
    rightsizing_status = True

    def spec_with_pod_memory(self, memory: str) -> dict[str, Any]:
        """``spec.memory`` and, where the spec declares it, the container's memory request become
        ``memory`` (the pod's request is the number the scheduler places by; leaving it would keep
        the old figure); a memory limit below the new request is raised to it."""
        spec = copy.deepcopy(self.spec or {})
        spec["memory"] = memory
        resources = spec.get("resources") if isinstance(spec.get("resources"), dict) else {}
        if isinstance(resources.get("requests"), dict) and "memory" in resources["requests"]:
            resources["requests"]["memory"] = memory
        limits = resources.get("limits")
        if isinstance(limits, dict) and "memory" in limits:
            limits["memory"] = max(limits["memory"], memory, key=lambda value: quantity_to_int(value) or 0)
        return spec

    def pod_label_value(self) -> str:
        return self.model_name


class UtilizationSortKey(models.Model):
    """An InferenceModel's utilization with the catalog's tie-breakers, in a narrow table of its own
    that PostgreSQL triggers keep (migration 0012): the catalog's sort by utilization reads this
    table's ``(utilization, namespace, name, model_id)`` index from its cursor on, as every other
    sort reads an index of the kind's own table (models_app.catalog.CatalogRows).

    Why apart: the cluster rewrites utilization with every status report. An index on it in the
    model's own table would make each such update a non-HOT one, writing the wide row anew into
    every index of that table (trigram GIN ones included, migration 0003); here it rewrites one
    narrow row and its two index entries. Never written by the application (on SQLite, the
    embedded demo's database, it stays empty and the sort reads the models' table).
    """

    model_id = models.BigIntegerField(primary_key=True, help_text="The InferenceModel's id.")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    utilization = models.PositiveSmallIntegerField(null=True)

    class Meta:
        indexes = [models.Index(fields=["utilization", "namespace", "name", "model_id"], name="utilization_sort")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}: {self.utilization}"

    @classmethod
    def of(cls, rows: QuerySet) -> QuerySet:
        """The keys of ``rows`` (InferenceModels): every key when nothing narrows them, else those
        of their ids (a semi-join PostgreSQL answers while it walks the key index in order)."""
        keys = cls.objects.all()
        return keys.filter(model_id__in=rows.values("id")) if rows.query.where else keys

    @classmethod
    def ordered_ids(cls, rows: QuerySet, sign: str) -> QuerySet:
        """The ids of ``rows`` by utilization, then namespace, name and id, ascending (``sign``
        "") or descending ("-"): the key index read in order either way (the admin's sort)."""
        terms = (f"{sign}{key}" for key in ("utilization", "namespace", "name", "model_id"))
        return cls.of(rows).order_by(*terms).values_list("model_id", flat=True)


@register
class KubeAIModel(ServingModel):
    """KubeAI ``Model`` (kind ``Model``, named KubeAIModel here to avoid clashing with Django's Model)."""

    kube = KindInfo("kubeai.org", "v1", "Model", "models")
    url_slug = "kubeai-models"
    model_name_path = "metadata.name"

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
    def cluster_rules(cls, cluster: Any, manifest: dict[str, Any]) -> list[FieldError]:
        """Where the portal is the cluster's Model controller, the profile must be one it can render."""
        errors = unknown_profile_errors(manifest["spec"]) if cluster.manages(cls.kube.kind) else []
        return errors or super().cluster_rules(cluster, manifest)

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
        replicas = spec.get("replicas", spec.get("minReplicas"))
        reported = _dig(status, "replicas", "all")
        self.running_replicas = reported if isinstance(reported, int) and not isinstance(reported, bool) else None
        running = self.running_replicas if self.running_replicas is not None else replicas or 0
        # KubeAI's autoscaler owns the count: the status says what runs, the spec what was asked.
        self.replicas = running
        shape, pool = kubeai_pod_shape(self.resource_profile, replicas or 0, running)
        self.node_pool = pool
        self.set_pods([shape])
        self.memory_bytes = saturate_int64(shape.memory_bytes * max(running, replicas or 0, 1)) or None
        self.ready = (_dig(status, "replicas", "ready") or 0) > 0
        self.phase = "Ready" if self.ready else ("Starting" if running else "ScaledToZero")

    # -- right-sizing: KubeAI labels its pods model=<metadata.name>; memory, CPU and GPUs come from
    # the resource profile (KUBEAI_RESOURCE_PROFILES), as planning reads them.
    pod_label = "label_model"

    def served_model(self) -> str:
        return self.url.removeprefix("hf://") if self.url.startswith("hf://") else ""


@register
class ModelService(ServingModel):
    """OtterScale / llm-d ``ModelService``: decode (and optional prefill) roles behind an endpoint picker."""

    kube = KindInfo("model.otterscale.io", "v1alpha1", "ModelService", "modelservices")
    url_slug = "modelservices"
    pod_label_maps = ("spec.decode.nodeSelector", "spec.prefill.nodeSelector")  # the serving pods
    pod_annotation_maps = ("spec.decode.annotations", "spec.prefill.annotations")
    pod_toleration_lists = ("spec.decode.tolerations", "spec.prefill.tolerations")
    model_name_path = "spec.model.name"

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
        roles = {name: spec[name] for name in ("decode", "prefill") if isinstance(spec.get(name), dict)}
        self.model_name = _dig(spec, "model", "name", default="")
        self.engine = "vLLM"
        accelerator = _dig(spec, "accelerator", "type", default="")
        self.node_pool = node_pool_of(_dig(spec, "decode", "nodeSelector"))
        self.replicas = sum(role.get("replicas", 1) for role in roles.values())  # two int32s: always an int64
        reported = {name: status.get(f"{name}Replicas") for name in roles}
        known = {name: count for name, count in reported.items() if isinstance(count, int)}
        self.running_replicas = sum(known.values()) if known else None
        self.set_pods([
            PodShape(
                name, role.get("replicas", 1), known.get(name, role.get("replicas", 1)),
                _role_memory(role) or 0, cpu_millis_of(_dig(role, "resources", "requests", "cpu")),
                self.gpus_per_pod(role, accelerator), 0, "" if accelerator == "cpu" else accelerator,
                selected_product(role.get("nodeSelector")),
            )
            for name, role in roles.items()
        ])  # fmt: skip
        self.accelerator = accelerator
        memories = [(_role_memory(role), role.get("replicas", 1)) for role in roles.values()]
        self.memory_bytes = (
            saturate_int64(sum(memory * count for memory, count in memories))
            if all(m for m, _ in memories) and memories
            else None
        )
        self.phase = status.get("phase", "")
        self.ready = self.phase == "Ready"

    # -- right-sizing: llm-d labels decode and prefill pods llm-d.ai/model=<metadata.name>; a pod's
    # memory is its role's request (a limit, when set, must not be below it).
    pod_label = "label_llm_d_ai_model"
    pod_memory_path = "spec.decode.resources.requests.memory"

    def spec_with_pod_memory(self, memory: str) -> dict[str, Any]:
        """Every role's memory request (and limit, where one is set) becomes ``memory``: the
        observation judged the largest pod of either role, so both roles get its answer."""
        spec = copy.deepcopy(self.spec or {})
        for role in ("decode", "prefill"):
            if isinstance(spec.get(role), dict):
                resources = spec[role].setdefault("resources", {})
                resources.setdefault("requests", {})["memory"] = memory
                if "memory" in (resources.get("limits") or {}):
                    resources["limits"]["memory"] = memory
        return spec

def _role_memory(role: dict[str, Any]) -> int | None:
    return quantity_to_int(_dig(role, "resources", "requests", "memory")) or quantity_to_int(
        _dig(role, "resources", "limits", "memory")
    )


def _condition_reason(status: dict[str, Any]) -> str:
    """The Ready condition's reason (Deployed, ScaledToZero, InsufficientMemory...), the model's phase."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return str(condition.get("reason") or "")[:16]
    return ""


def kubeai_pod_shape(resource_profile: str, count: int, running: int) -> tuple[PodShape, str]:
    """One KubeAI pod and its pool from ``resourceProfile: <name>:<count>`` and the profile table.

    KubeAI multiplies the profile's requests and limits by the count; the profile's nodeSelector
    picks the pool. An unknown profile needs nothing known and stays in the default pool.
    """
    profile, times = kubeai_profile(resource_profile)
    profile = profile or {}
    requests, limits = profile.get("requests") or {}, profile.get("limits") or {}
    resource = next((r for r in GPU_RESOURCE_BY_ACCELERATOR.values() if r in limits or r in requests), "")
    gpus = (quantity_to_int(limits.get(resource) or requests.get(resource)) or 0) * times if resource else 0
    accelerator = next((a for a, r in GPU_RESOURCE_BY_ACCELERATOR.items() if r == resource), "")
    shape = PodShape(
        "server", count, running, (quantity_to_int(requests.get("memory")) or 0) * times,
        cpu_millis_of(requests.get("cpu")) * times, gpus, 0, accelerator,
        selected_product(profile.get("nodeSelector")),
    )  # fmt: skip
    return shape, node_pool_of(profile.get("nodeSelector"))


def kubeai_profile(resource_profile: str) -> tuple[dict[str, Any] | None, int]:
    """``resourceProfile: <name>:<count>`` read against the profile table (KUBEAI_RESOURCE_PROFILES):
    the profile (None when the table has no such name) and the count (1 when it names none)."""
    name, _, multiple = resource_profile.partition(":")
    return settings.KUBEAI_RESOURCE_PROFILES.get(name), int(multiple) if multiple.isdigit() else 1


def unknown_profile_errors(spec: dict[str, Any]) -> list[FieldError]:
    """``spec.resourceProfile`` naming no profile of the table, where the portal must render the
    pods from it (it is the Model's controller): the mirror of another controller's Model keeps
    whatever profile that controller's own table knows."""
    value = spec.get("resourceProfile")
    if not value or kubeai_profile(value)[0] is not None:
        return []
    known = ", ".join(sorted(settings.KUBEAI_RESOURCE_PROFILES)) or "none"
    return [FieldError("spec.resourceProfile", value,
                       f"names no resource profile of KUBEAI_RESOURCE_PROFILES (known: {known})")]

