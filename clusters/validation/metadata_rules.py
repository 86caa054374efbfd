"""Kubernetes object-metadata rules that no CRD schema can express (the API server checks them itself).

Names, namespaces, label keys and values follow apimachinery's validation, so an object the
portal accepts is never refused by the cluster for its metadata. Patterns are matched with
``fullmatch``: Go's ``$`` is the end of the text, Python's ``$`` also matches before a final newline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from clusters.validation.limits import MAX_ANNOTATIONS_BYTES
from clusters.validation.schemas import MISSING, FieldError

DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _qualified_name_errors(path: str, key: str) -> list[FieldError]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        errors.append(FieldError(path, key, "has a prefix that is not a DNS subdomain (lowercase, dots, at most 253)"))
    if not name or len(name) > 63 or not LABEL_NAME.fullmatch(name):
        errors.append(
            FieldError(
                path,
                key,
                "must be at most 63 alphanumeric characters, '-', '_' or '.', "
                "starting and ending with an alphanumeric (optionally prefixed 'example.com/')",
            )
        )
    return errors


def metadata_errors(metadata: Any) -> list[FieldError]:
    """Every problem with name, namespace, labels and annotations of a manifest's metadata."""
    if not isinstance(metadata, dict):
        return [FieldError("metadata", metadata, "must be an object with at least a name")]
    errors: list[FieldError] = []
    name = metadata.get("name")
    if not name:
        errors.append(FieldError("metadata.name", MISSING, "is required"))
    elif not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
        errors.append(
            FieldError(
                "metadata.name",
                name,
                "must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.', at most 253 characters)",
            )
        )
    namespace = metadata.get("namespace")
    if namespace is not None and (
        not isinstance(namespace, str) or len(namespace) > 63 or not DNS1123_LABEL.fullmatch(namespace)
    ):
        errors.append(
            FieldError(
                "metadata.namespace",
                namespace,
                "must be a lowercase RFC 1123 label (a-z, 0-9, '-', at most 63 characters)",
            )
        )
    errors += label_map_errors("metadata.labels", metadata.get("labels"))
    errors += annotation_map_errors("metadata.annotations", metadata.get("annotations"))
    return errors


def label_map_errors(path: str, labels: Any) -> list[FieldError]:
    """Every problem with a map of labels at ``path`` (an object's labels, or a pod's nodeSelector,
    which the API server checks by the same rules): keys are qualified names, values at most 63
    alphanumeric characters, '-', '_' or '.', alphanumeric at both ends, or empty."""
    if not labels:
        return []
    if not isinstance(labels, dict):
        return [FieldError(path, labels, "must be a map of strings")]
    errors: list[FieldError] = []
    for key, value in labels.items():
        where = f"{path}.{key}"
        errors += _qualified_name_errors(where, key)
        if not isinstance(value, str) or (value and (len(value) > 63 or not LABEL_NAME.fullmatch(value))):
            errors.append(
                FieldError(
                    where,
                    value,
                    "must be a string of at most 63 alphanumeric characters, "
                    "'-', '_' or '.', starting and ending with an alphanumeric",
                )
            )
    return errors


def annotation_map_errors(path: str, annotations: Any) -> list[FieldError]:
    """Every problem with a map of annotations at ``path`` (an object's, or a pod's): keys are
    qualified names, values strings, at most 256 KiB of keys and values together."""
    if not annotations:
        return []
    if not isinstance(annotations, dict):
        return [FieldError(path, annotations, "must be a map of strings")]
    errors: list[FieldError] = []
    for key, value in annotations.items():
        where = f"{path}.{key}"
        errors += _qualified_name_errors(where, key)
        if not isinstance(value, str):
            errors.append(FieldError(where, value, "must be a string"))
    size = sum(len(str(key).encode()) + len(str(value).encode()) for key, value in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        errors.append(
            FieldError(
                path,
                MISSING,
                f"are {size} bytes in total (keys and values), more than the limit {MAX_ANNOTATIONS_BYTES} (256 KiB)",
            )
        )
    return errors


def _at(manifest: dict[str, Any], path: str) -> Any:
    value: Any = manifest
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def toleration_errors(path: str, tolerations: Any) -> list[FieldError]:
    """Every problem with a pod's tolerations at ``path``, by the API server's rules: a key is a
    qualified name (empty only with operator Exists), operator Equal or Exists, a value is a label
    value (none with Exists), effect NoSchedule, PreferNoSchedule or NoExecute, and
    tolerationSeconds only with NoExecute."""
    if not tolerations:
        return []
    if not isinstance(tolerations, list):
        return [FieldError(path, tolerations, "must be a list of tolerations")]
    errors: list[FieldError] = []
    for index, toleration in enumerate(tolerations):
        where = f"{path}[{index}]"
        if not isinstance(toleration, dict):
            errors.append(FieldError(where, toleration, "must be an object"))
            continue
        key, operator, value = toleration.get("key"), toleration.get("operator"), toleration.get("value")
        effect = toleration.get("effect")
        if key and not isinstance(key, str):
            errors.append(FieldError(f"{where}.key", key, "must be a string"))
        elif key:
            errors += _qualified_name_errors(f"{where}.key", key)
        elif operator != "Exists":
            errors.append(FieldError(f"{where}.operator", operator or MISSING, "must be Exists when key is empty"))
        if operator not in (None, "", "Equal", "Exists"):
            errors.append(FieldError(f"{where}.operator", operator, "must be Equal or Exists"))
        if operator == "Exists" and value:
            errors.append(FieldError(f"{where}.value", value, "must be empty when operator is Exists"))
        elif value is not None and (not isinstance(value, str) or (
                value and (len(value) > 63 or not LABEL_NAME.fullmatch(value)))):
            errors.append(FieldError(f"{where}.value", value, "must be a string of at most 63 alphanumeric "
                                     "characters, '-', '_' or '.', starting and ending with an alphanumeric"))
        if effect not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            errors.append(FieldError(f"{where}.effect", effect, "must be NoSchedule, PreferNoSchedule or NoExecute"))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(FieldError(f"{where}.tolerationSeconds", toleration["tolerationSeconds"],
                                     "is allowed only with effect NoExecute"))
    return errors


def pod_metadata_errors(
    manifest: dict[str, Any],
    label_maps: Iterable[str],
    annotation_maps: Iterable[str],
    toleration_lists: Iterable[str] = (),
) -> list[FieldError]:
    """Every problem with the parts of ``manifest`` (dotted paths) that end up in a pod: its labels
    or nodeSelector (``label_maps``), annotations (``annotation_maps``) and tolerations
    (``toleration_lists``). The CRD only says "a map of strings" or "a list of objects"; the API
    server refuses the Deployment or Pod made from them later, far from the person who wrote them,
    so every write path refuses them here, naming the field."""
    errors: list[FieldError] = []
    for path in label_maps:
        errors += label_map_errors(path, _at(manifest, path))
    for path in annotation_maps:
        errors += annotation_map_errors(path, _at(manifest, path))
    for path in toleration_lists:
        errors += toleration_errors(path, _at(manifest, path))
    return errors
