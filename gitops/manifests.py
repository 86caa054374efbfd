"""The manifest the portal writes to Git for an object, and how it is compared with the cluster's.

A file in Git states what people decided, so it holds the object as the team edited it and
nothing else (docs/gitops.md lists the fields, with the Argo CD and Flux settings to match):

- no ``status`` and nothing the API server fills in (uid, resourceVersion, generation,
  managedFields, creationTimestamp, ...): only name, namespace, labels and annotations of metadata;
- no value equal to its CRD default: the API server adds those again when it applies the file;
- none of what the portal's own controller writes directly as it runs (the kind's bookkeeping
  annotations, such as InferenceModel's last-request time; KubeAI Model's ``spec.replicas`` its
  autoscaler sets unless ``autoscalingDisabled``);
- none of the labels and annotations a GitOps engine stamps on what it applies (Flux's
  ``kustomize.toolkit.fluxcd.io/*``, Argo CD's ``argocd.argoproj.io/*``, kubectl's last-applied).

The same cleaning applied to both sides is what "the cluster holds the change" (applied) and "the
cluster differs from Git" (drift) compare.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
from typing import Any

import yaml

from clusters.models import KubeObject, cluster_document
from clusters.sync.audit import json_diff
from clusters.validation.schemas import openapi_schema

# Labels and annotations a GitOps engine (or kubectl) puts on the objects it applies: never decided
# by a team, never written to Git, never drift.
ENGINE_METADATA_PREFIXES = (
    "kustomize.toolkit.fluxcd.io/",
    "argocd.argoproj.io/",
    "kubectl.kubernetes.io/last-applied-configuration",
)


def controller_owned_spec(kind: str, spec: dict[str, Any]) -> tuple[str, ...]:
    """Top-level spec fields the portal's controller (or the kind's operator) writes as it runs."""
    if kind == "Model" and not spec.get("autoscalingDisabled"):
        return ("replicas",)
    return ()


def git_manifest(model: type[KubeObject], document: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """The manifest for Git of an object whose decided parts are ``document`` (desired_document's shape)."""
    kind = model.kube.kind
    owned = controller_owned_spec(kind, document["spec"])
    spec = {key: value for key, value in document["spec"].items() if key not in owned}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    for key, skipped in (("labels", frozenset()), ("annotations", model.bookkeeping_annotations)):
        kept = {
            k: v for k, v in (document.get(key) or {}).items()
            if k not in skipped and not k.startswith(ENGINE_METADATA_PREFIXES)
        }
        if kept:
            metadata[key] = kept
    schema = openapi_schema(model.kube).get("properties", {}).get("spec", {})
    return {
        "apiVersion": model.kube.api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": without_defaults(schema, spec),
    }


def without_defaults(schema: dict[str, Any], value: Any) -> Any:
    """``value`` less every field equal to its schema ``default`` (the inverse of the API server's
    structural defaulting, ``clusters.validation.schemas.apply_defaults``): it fills them again."""
    if isinstance(value, dict):
        result = {}
        properties = schema.get("properties", {})
        for key, item in value.items():
            extra = schema.get("additionalProperties")
            sub = properties.get(key) or (extra if isinstance(extra, dict) else {})
            if "default" in sub and item == sub["default"]:
                continue
            result[key] = without_defaults(sub, item)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [without_defaults(schema["items"], item) for item in value]
    return copy.deepcopy(value)


def render(manifest: dict[str, Any] | None) -> str:
    """A manifest as the YAML file written (keys in the order Kubernetes prints them); '' for none."""
    if manifest is None:
        return ""
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, allow_unicode=True)


def parse(text: str) -> dict[str, Any] | None:
    """A file's manifest, or None when the file is empty or not one YAML mapping."""
    try:
        loaded = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return None
    return loaded if isinstance(loaded, dict) else None


def blob_sha(text: str) -> str:
    """Git's object id of a file with this content (``git hash-object``): what the forges' contents
    API answers as ``sha``, so a file written can be recognised without reading it back."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def unified_diff(path: str, before: str, after: str) -> str:
    """The change to one file, as a pull request shows it."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}" if before else "/dev/null",
            tofile=f"b/{path}" if after else "/dev/null",
        )
    )


def cleaned(model: type[KubeObject], manifest: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """Any manifest of the object (the cluster's, a file's) as Git would hold it."""
    return git_manifest(model, cluster_document(manifest), namespace, name)


def differences(model: type[KubeObject], git: dict[str, Any], cluster: dict[str, Any]) -> list[dict[str, Any]]:
    """Where the cluster's object differs from Git's file, both cleaned alike: [{path, git, cluster}]."""
    metadata = cluster.get("metadata") or {}
    namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
    return [
        {"path": change["path"], "git": change["old"], "cluster": change["new"]}
        for change in json_diff(cleaned(model, git, namespace, name), cleaned(model, cluster, namespace, name))
    ]
