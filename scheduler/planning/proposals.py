"""Turn what a user proposes (an existing model, an edited one, a new manifest) into plain proposals.

Every new or edited spec goes through :func:`clusters.validation.manifests.validate_manifest`, the project's
single validator; its errors come back with the path inside the request (``models[2].manifest.
spec.memory``), so the API answers 400 naming the field, the value and the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusters.kinds import with_article
from clusters.models import Cluster, KubeObject
from clusters.sync.merge import apply_merge_patch
from clusters.validation.manifests import resolve_kind, validate_manifest
from clusters.validation.quantities import quantity_to_int
from clusters.validation.schemas import FieldError, ManifestInvalid
from scheduler.consumption import GPU_RESOURCE_BY_ACCELERATOR, PodShape, shapes_from_json
from scheduler.holdings import Identified, serving_model_for, serving_models


@dataclass
class Proposal(Identified):
    """A model the plan should run, with the figures placement needs."""

    kind: str
    cluster_id: int
    namespace: str
    name: str
    pool: str
    memory_bytes: int
    gpus: int = 0
    dependencies: list[str] = field(default_factory=list)
    origin: str = "new"  # existing | edited | new | estimate | dependency
    path: str = ""  # where in the request it came from, for error messages
    pods: list[PodShape] = field(default_factory=list)


def _prefixed(errors: list[FieldError], prefix: str) -> list[FieldError]:
    return [FieldError(f"{prefix}.{error.path}", error.value, error.rule) for error in errors]


def _from_row(model: type[KubeObject], row: KubeObject, origin: str, path: str) -> Proposal:
    row.project()
    pods = shapes_from_json(row.pods)
    if row.memory_bytes is None and not any(pod.gpus for pod in pods):
        # Memory or GPUs is what a model holds (scheduler.holdings); with neither there is nothing to place.
        rule = "declares neither memory nor GPUs; only models that declare one can be planned"
        raise ManifestInvalid([FieldError(path, f"{model.kube.kind} {row.namespace}/{row.name}", rule)])
    spec = row.spec or {}
    dependencies = spec.get("dependencies") if isinstance(spec.get("dependencies"), list) else []
    return Proposal(
        kind=model.kube.kind,
        cluster_id=row.cluster_id,
        namespace=row.namespace,
        name=row.name,
        pool=row.node_pool,
        memory_bytes=row.memory_bytes or 0,
        gpus=row.gpu_count or 0,
        dependencies=[name for name in dependencies if isinstance(name, str)],
        origin=origin,
        path=path,
        pods=pods,
    )


def _from_estimate(estimate: dict[str, Any], cluster: Cluster, path: str) -> Proposal:
    """A model known only by numbers (a calculator result): one pod in a pool, no manifest yet.

    Keys: ``name``, ``namespace`` (default ``default``), ``pool``, ``memory`` (node memory of the
    pod), ``gpus``, ``gpu_memory`` (weights + KV cache across its GPUs), ``accelerator``,
    ``gpu_product``. Each bad value is a field error naming it.
    """
    errors: list[FieldError] = []

    def quantity(key: str, required: bool) -> int:
        value = estimate.get(key)
        amount = quantity_to_int(value) if value not in (None, "") else None
        if (
            (amount is None and required)
            or (amount is not None and amount < 0)
            or (value not in (None, "") and amount is None)
        ):
            errors.append(FieldError(f"{path}.estimate.{key}", value, "must be a non-negative quantity (e.g. 40Gi)"))
        return amount or 0

    name, pool = estimate.get("name"), estimate.get("pool")
    for key, value in (("name", name), ("pool", pool)):
        if not isinstance(value, str) or not value:
            errors.append(FieldError(f"{path}.estimate.{key}", value, "is required (a non-empty string)"))
    gpus = estimate.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        errors.append(FieldError(f"{path}.estimate.gpus", gpus, "must be a whole number >= 0"))
        gpus = 0
    accelerator = estimate.get("accelerator") or ("nvidia" if gpus else "")
    if accelerator and accelerator not in GPU_RESOURCE_BY_ACCELERATOR:
        rule = f"must be one of {', '.join(GPU_RESOURCE_BY_ACCELERATOR)}"
        errors.append(FieldError(f"{path}.estimate.accelerator", accelerator, rule))
    memory, gpu_memory = quantity("memory", True), quantity("gpu_memory", False)
    if errors:
        raise ManifestInvalid(errors)
    namespace = str(estimate.get("namespace") or "default")
    pod = PodShape("server", 1, 0, memory, 0, gpus, gpu_memory, accelerator, str(estimate.get("gpu_product") or ""))
    return Proposal("Estimate", cluster.pk, namespace, name, pool, memory, gpus, [], "estimate", path, [pod])


def _validated_row(model: type[KubeObject], manifest: dict[str, Any], cluster: Cluster, path: str) -> KubeObject:
    try:
        valid = validate_manifest(model, manifest)
    except ManifestInvalid as invalid:
        raise ManifestInvalid(_prefixed(invalid.errors, path)) from None
    metadata = valid["metadata"]
    return model(cluster=cluster, namespace=metadata["namespace"], name=metadata["name"], spec=valid["spec"])


def proposal_from_request(
    item: dict[str, Any], index: int, cluster: Cluster, visible: Callable[[int, str], bool] | None = None
) -> Proposal:
    """One entry of the request's ``models``: ``{"kind", "id"[, "spec"]}`` or ``{"manifest"}``.

    ``visible(cluster_id, namespace)`` hides rows of other teams: their ids answer exactly like ids
    that do not exist, before anything about the row is validated or reported; a new model may be
    proposed only in a namespace the user sees.
    """
    path = f"models[{index}]"
    if "estimate" in item:
        if visible is not None and not visible(cluster.pk, str(item["estimate"].get("namespace") or "default")):
            rule = "is not a namespace your teams may read"
            value = item["estimate"].get("namespace") or "default"
            raise ManifestInvalid([FieldError(f"{path}.estimate.namespace", value, rule)])
        return _from_estimate(item["estimate"], cluster, path)
    if "manifest" in item:
        manifest = item["manifest"]
        try:
            model = resolve_kind(manifest)
        except ManifestInvalid as invalid:
            raise ManifestInvalid(_prefixed(invalid.errors, f"{path}.manifest")) from None
        if model not in serving_models():
            raise ManifestInvalid([FieldError(f"{path}.manifest.kind", manifest.get("kind"),
                                              "is not a serving kind")])  # fmt: skip
        row = _validated_row(model, manifest, cluster, f"{path}.manifest")
        if visible is not None and not visible(cluster.pk, row.namespace):
            # Planning there would tell whether a model of that name exists (and what it declares).
            rule = "is not a namespace your teams may read"
            raise ManifestInvalid([FieldError(f"{path}.manifest.metadata.namespace", row.namespace, rule)])
        return _from_row(model, row, "new", path)
    kind = item.get("kind", "InferenceModel")
    model = serving_model_for(kind)
    if model is None:
        known = ", ".join(m.kube.kind for m in serving_models())
        raise ManifestInvalid([FieldError(f"{path}.kind", kind, f"is not a serving kind; one of {known}")])
    row = model.objects.filter(cluster=cluster, pk=item.get("id")).first()
    if row is None or (visible is not None and not visible(row.cluster_id, row.namespace)):
        raise ManifestInvalid(
            [
                FieldError(
                    f"{path}.id", item.get("id"), f"is not the id of {with_article(kind)} in cluster {cluster.name}"
                )
            ]
        )
    if item.get("spec") is None:
        return _from_row(model, row, "existing", path)
    manifest = row.to_manifest()
    manifest.pop("status", None)
    manifest["spec"] = apply_merge_patch(row.spec, item["spec"])
    edited = _validated_row(model, manifest, cluster, path)
    return _from_row(model, edited, "edited", path)
