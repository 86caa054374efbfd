"""Three-way merge of JSON documents (spec, labels, annotations), the heart of conflict handling.

One pure function, tested exhaustively on its own (tests/clusters/test_merge.py). Maps merge key
by key; everything else — scalars and lists — is a whole value, as in JSON merge patch (RFC
7386), so two sides that changed the same list differently conflict. A removed key is a change
like any other: removed on one side and edited on the other is a conflict. On a conflict the
merged document keeps the portal's value, and the conflict lists base, portal and cluster values
so a person can choose.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


class _Absent:
    """A key that is not there (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class MergeConflict:
    """The same field changed differently on both sides. ABSENT values mean "not set"."""

    path: str
    base: Any
    portal: Any
    cluster: Any

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: absent values become None with a ``*_set`` flag, for the API and pages."""
        out: dict[str, Any] = {"path": self.path}
        for side in ("base", "portal", "cluster"):
            value = getattr(self, side)
            out[side] = None if value is ABSENT else value
            out[f"{side}_set"] = value is not ABSENT
        return out


@dataclass(frozen=True)
class MergeResult:
    merged: Any
    conflicts: list[MergeConflict]


def three_way_merge(base: Any, portal: Any, cluster: Any, path: str = "") -> MergeResult:
    """Merge the portal's and the cluster's changes since ``base``; ABSENT stands for a missing key."""
    if portal == cluster:
        return MergeResult(portal, [])
    if portal == base:
        return MergeResult(cluster, [])
    if cluster == base:
        return MergeResult(portal, [])
    if isinstance(portal, dict) and isinstance(cluster, dict):
        base_map = base if isinstance(base, dict) else {}
        merged: dict[str, Any] = {}
        conflicts: list[MergeConflict] = []
        for key in [*portal, *(k for k in cluster if k not in portal)]:
            result = three_way_merge(
                base_map.get(key, ABSENT),
                portal.get(key, ABSENT),
                cluster.get(key, ABSENT),
                f"{path}.{key}" if path else key,
            )
            conflicts += result.conflicts
            if result.merged is not ABSENT:
                merged[key] = result.merged
        return MergeResult(merged, conflicts)
    return MergeResult(portal, [MergeConflict(path, base, portal, cluster)])


def merge_patch_between(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (removed keys become ``null``).

    Outbound updates send this with ``metadata.resourceVersion`` instead of a PUT, so fields the
    portal does not mirror (finalizers, owner references, other managers' metadata) stay intact.
    """
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key, ABSENT)
        if isinstance(before, dict) and isinstance(value, dict):
            nested = merge_patch_between(before, value)
            if nested:
                patch[key] = nested
        elif before != value:
            patch[key] = value
    return patch


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch: maps merge recursively, ``null`` deletes, anything else replaces.

    The inverse of :func:`merge_patch_between`; the API's PATCH and the planner's edited specs use it.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result
