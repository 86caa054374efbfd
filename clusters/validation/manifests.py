"""Validate manifests of mirrored kinds and move them in and out of mirror rows.

Every entry point (model ``clean()``, API serializers, ``/api/apply/``, forms, admin, demo
loader) goes through :func:`validate_manifest`, so a rule is written once and enforced the same
everywhere.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Model

from clusters.kinds import known_kinds, model_for
from clusters.validation.json_values import json_value_errors
from clusters.validation.limits import MAX_OBJECT_BYTES
from clusters.validation.metadata_rules import metadata_errors, pod_metadata_errors
from clusters.validation.schemas import MISSING, FieldError, ManifestInvalid, default_manifest, schema_errors

# The models call these rules, so the rules type them by Django's base class: importing
# clusters.models, even for type hints, would close a circle.

__all__ = ["FieldError", "ManifestInvalid", "identity_errors", "resolve_kind", "validate_manifest"]


def resolve_kind(manifest: Any) -> type[Model]:
    """The mirror model for a manifest's ``apiVersion`` and ``kind``, or ManifestInvalid."""
    if not isinstance(manifest, dict):
        raise ManifestInvalid([FieldError("(root)", manifest, "must be an object (a Kubernetes manifest)")])
    model = model_for(str(manifest.get("apiVersion")), str(manifest.get("kind")))
    if model is None:
        raise ManifestInvalid(
            [
                FieldError(
                    "kind",
                    f"{manifest.get('kind')} ({manifest.get('apiVersion')})",
                    "is not a mirrored kind; known kinds: " + ", ".join(known_kinds()),
                )
            ]
        )
    return model


def validate_manifest(model: type[Model], manifest: dict[str, Any], cluster: Any = None) -> dict[str, Any]:
    """Return the manifest with CRD defaults applied, or raise ManifestInvalid with every error.

    Status is not validated here: it belongs to the cluster, and the main resource ignores it.
    A missing ``metadata.namespace`` becomes ``default``, as ``kubectl`` does. Given the cluster the
    object goes to, the kind's ``cluster_rules`` run too (where a model may answer, its gateway id).
    """
    body = {key: value for key, value in manifest.items() if key != "status"}
    _refuse_unstorable(body)
    errors: list[FieldError] = []
    info = model.kube
    for field, expected in (("apiVersion", info.api_version), ("kind", info.kind)):
        if manifest.get(field, expected) != expected:
            errors.append(FieldError(field, manifest.get(field), f"must be {expected} for this endpoint"))
    errors += metadata_errors(manifest.get("metadata"))
    if isinstance(body.get("metadata"), dict) and not body["metadata"].get("namespace"):
        body["metadata"] = {**body["metadata"], "namespace": "default"}
    if not isinstance(body.get("spec", {}), dict):
        errors.append(FieldError("spec", body.get("spec"), "must be an object"))
    else:
        body.setdefault("spec", {})
        defaulted = default_manifest(info, body)
        errors += schema_errors(info, {k: v for k, v in defaulted.items() if k not in ("apiVersion", "kind")})
        if not errors:
            errors += pod_metadata_errors(
                defaulted, model.pod_label_maps, model.pod_annotation_maps, model.pod_toleration_lists
            )
            errors += model.extra_rules(defaulted)
        if not errors and cluster is not None:
            errors += model.cluster_rules(cluster, defaulted)
        if not errors:
            return defaulted
    raise ManifestInvalid(errors)


def _refuse_unstorable(body: dict[str, Any]) -> None:
    """Values no cluster or database takes, checked before any other rule runs on them: not plain
    JSON (NUL, NaN, deep nesting) or larger than etcd stores (then the rest is not worth checking)."""
    errors = json_value_errors(body)
    if errors:
        raise ManifestInvalid(errors)
    size = len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_OBJECT_BYTES:
        rule = f"is {size} bytes as JSON, more than the {MAX_OBJECT_BYTES} (1.5 MiB) a cluster stores"
        raise ManifestInvalid([FieldError("(root)", MISSING, rule)])


def identity_errors(
    model: type[Model], cluster: Any, metadata: dict[str, Any], instance: Model | None = None
) -> list[FieldError]:
    """Name and namespace are an object's identity in its cluster: fixed once created, unique.

    Every write path (API, forms, YAML mode) checks them here, after :func:`validate_manifest`.
    """
    if instance is not None:
        return [
            FieldError(f"metadata.{key}", metadata.get(key), f"cannot change (is {current}); delete and create instead")
            for key, current in (("name", instance.name), ("namespace", instance.namespace))
            if metadata.get(key, current) != current
        ]
    if model.objects.filter(cluster=cluster, namespace=metadata["namespace"], name=metadata["name"]).exists():
        return [
            FieldError("metadata.name", metadata["name"], f"already exists in {cluster.name}/{metadata['namespace']}")
        ]
    return []
