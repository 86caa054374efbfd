"""The "review changes" step of the YAML editor: what a save would change, field by field, and
whether the cluster would take it.

The portal's validator knows the CRD's schema, but a cluster can refuse more: CEL rules of a newer
CRD, admission policies and webhooks, quotas. So before saving, the edit is sent to the API server
with ``dryRun=All`` (the merge patch the save would send, or the create), which runs every check
and stores nothing. When the cluster cannot be reached (or has no API server, as a snapshot) the
review says so and rests on the local validation alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes.config import ConfigException

from clusters.kinds import model_for
from clusters.kube.client import ClusterGateway, ConflictError, GatewayError, NotFoundError, PermanentError
from clusters.models import Cluster, KubeObject
from clusters.sync.audit import json_diff
from clusters.sync.merge import merge_patch_between

CLUSTER, LOCAL = "cluster", "local"


@dataclass
class Change:
    path: str
    old: str  # YAML; "" when the field is new
    new: str  # YAML; "" when the field is removed


@dataclass
class Review:
    changes: list[Change] = field(default_factory=list)
    checked_by: str = LOCAL
    note: str = ""  # why only the local validation checked it
    refused: str = ""  # the API server's refusal, word for word


def editable(manifest: dict[str, Any] | None) -> dict[str, Any]:
    """The parts of a manifest an edit changes (what the save sends), in manifest shape."""
    if not manifest:
        return {}
    metadata = manifest.get("metadata") or {}
    return {
        "metadata": {key: metadata.get(key) or {} for key in ("labels", "annotations")},
        "spec": manifest.get("spec") or {},
    }


def _as_yaml(value: Any) -> str:
    if value is None:
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True).removesuffix(
        "\n...\n").strip()


def field_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> list[Change]:
    """Leaf changes between two manifests' editable parts, as field paths with YAML values."""
    return [Change(c["path"], _as_yaml(c["old"]), _as_yaml(c["new"])) for c in json_diff(editable(old), editable(new))]


def _dry_run(gateway: ClusterGateway, obj: KubeObject | None, manifest: dict[str, Any]) -> None:
    kind = model_for(manifest["apiVersion"], manifest["kind"]).kube
    metadata = manifest["metadata"]
    if obj is not None and obj.uid:
        patch = merge_patch_between(editable(obj.to_manifest()), editable(manifest))
        try:
            gateway.dry_run_patch(kind, metadata["namespace"], metadata["name"], patch)
            return
        except NotFoundError:
            pass  # not (or no longer) in the cluster: the save creates it
    body = {key: value for key, value in manifest.items() if key != "status"}
    body["metadata"] = {k: v for k, v in metadata.items() if k not in ("resourceVersion", "uid")}
    gateway.dry_run_create(kind, metadata["namespace"], body)


def review(cluster: Cluster, obj: KubeObject | None, manifest: dict[str, Any]) -> Review:
    """The field changes from ``obj`` (None: a new object) to the validated ``manifest``, checked by
    the cluster's dry run when it answers, else by the local validation (which already passed)."""
    result = Review(changes=field_changes(obj.to_manifest() if obj is not None else None, manifest))
    try:
        gateway = ClusterGateway(cluster)
    except (GatewayError, ConfigException) as error:
        result.note = str(error)  # says which cluster and that it has no API server to ask
        return result
    try:
        _dry_run(gateway, obj, manifest)
        result.checked_by = CLUSTER
    except (PermanentError, NotFoundError, ConflictError) as error:  # refused: invalid, forbidden, no namespace, taken
        result.checked_by, result.refused = CLUSTER, str(error)
    except GatewayError as error:  # transient: unreachable, timed out, 5xx
        result.note = f"cluster {cluster.name} could not be reached ({error})"
    finally:
        gateway.close()
    return result
