"""Recording who changed what: actors, field-level diffs and audit entries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusters.models import AuditEntry, KubeObject
from clusters.sync.merge import ABSENT


@dataclass(frozen=True)
class Actor:
    """Who acts and through what: a user (``label`` says whether by token), or a cluster's field manager."""

    label: str
    source: str
    user: Any = None

    @classmethod
    def from_request(cls, request: Any, source: str) -> Actor:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return cls("anonymous", source)
        by_token = getattr(request, "auth", None) is not None  # DRF sets it for token auth only
        return cls(f"{user.get_username()} (token)" if by_token else user.get_username(), source, user)

    @classmethod
    def cluster(cls, manifest: dict[str, Any] | None = None) -> Actor:
        """The cluster, named by the field manager of the newest ``managedFields`` entry when known."""
        entries = ((manifest or {}).get("metadata") or {}).get("managedFields") or []
        newest = max(entries, key=lambda entry: entry.get("time") or "", default=None)
        manager = newest.get("manager") if newest else None
        return cls(f"cluster: {manager}" if manager else "cluster", AuditEntry.Source.CLUSTER)


SYNC_ENGINE = Actor("sync engine", AuditEntry.Source.SYNC)


def _no_map(value: Any) -> bool:
    return value is ABSENT or value == {}


def json_diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Leaf-level changes; maps recurse, lists and scalars are whole values (as in the merge).

    An empty map and no map are the same (Kubernetes stores ``labels: {}`` as no labels): a new
    object's history lists what it was given, not "labels: not set -> {}"."""
    if old == new or (_no_map(old) and _no_map(new)):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        changes = []
        for key in [*old, *(k for k in new if k not in old)]:
            changes += json_diff(old.get(key, ABSENT), new.get(key, ABSENT), f"{path}.{key}" if path else key)
        return changes
    return [{"path": path, "old": None if old is ABSENT else old, "new": None if new is ABSENT else new}]


def decided_changes(model: type[KubeObject], changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``changes`` less those of the kind's bookkeeping annotations (``KubeObject.bookkeeping_annotations``):
    what an audit entry lists. Empty: the change was bookkeeping only and deserves no entry."""
    skipped = {f"annotations.{key}" for key in model.bookkeeping_annotations}
    return [change for change in changes if change["path"] not in skipped]


def record(
    obj: KubeObject, action: str, actor: Actor, changes: list[dict[str, Any]] | None = None, message: str = ""
) -> AuditEntry:
    return AuditEntry.objects.create(
        kind=obj.kube.kind,
        object_id=obj.pk,
        cluster_id=obj.cluster_id,
        namespace=obj.namespace,
        name=obj.name,
        action=action,
        source=actor.source,
        actor=actor.user,
        actor_label=actor.label,
        changes=changes or [],
        message=message,
    )
