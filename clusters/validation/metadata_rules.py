"""Kubernetes object-metadata rules that no CRD schema can express (the API server checks them itself).

Names, namespaces, label keys and values follow apimachinery's validation, so an object the
portal accepts is never refused by the cluster for its metadata. Patterns are matched with
``fullmatch``: Go's ``$`` is the end of the text, Python's ``$`` also matches before a final newline.
"""

from __future__ import annotations

import re
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
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict):
        errors.append(FieldError("metadata.labels", labels, "must be a map of strings"))
        labels = {}
    for key, value in labels.items():
        path = f"metadata.labels.{key}"
        errors += _qualified_name_errors(path, key)
        if not isinstance(value, str) or (value and (len(value) > 63 or not LABEL_NAME.fullmatch(value))):
            errors.append(
                FieldError(
                    path,
                    value,
                    "must be a string of at most 63 alphanumeric characters, "
                    "'-', '_' or '.', starting and ending with an alphanumeric",
                )
            )
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, dict):
        errors.append(FieldError("metadata.annotations", annotations, "must be a map of strings"))
        annotations = {}
    for key, value in annotations.items():
        path = f"metadata.annotations.{key}"
        errors += _qualified_name_errors(path, key)
        if not isinstance(value, str):
            errors.append(FieldError(path, value, "must be a string"))
    size = sum(len(str(key).encode()) + len(str(value).encode()) for key, value in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        errors.append(
            FieldError(
                "metadata.annotations",
                MISSING,
                f"are {size} bytes in total (keys and values), more than the limit {MAX_ANNOTATIONS_BYTES} (256 KiB)",
            )
        )
    return errors
