"""Patch formats and field ownership of the test Kubernetes API server.

The sync's three-way merge is built on JSON merge patch semantics (lists are whole values),
so the server applies merge patches exactly per RFC 7386; JSON Patch (RFC 6902) is delegated
to ``jsonpatch`` (already installed as a dependency of kmock). Server-side apply is reduced to
what the sync can observe: a merge, per-field ownership and FieldManagerConflict on 409.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import jsonpatch
import jsonpointer

from tests.support.kube_model import ApiError, ResourceType

Path = tuple[str, ...]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, the rest replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strip_directives(patch: Any) -> Any:
    """Drop strategic-merge directives (``$patch``, ``$setElementOrder/...``, ``$retainKeys``).

    Strategic merge patches are applied as merge patches here; without this, the directives
    kubectl sends for built-in kinds would be stored as if they were fields.
    """
    if isinstance(patch, Mapping):
        return {key: strip_directives(value) for key, value in patch.items() if not key.startswith("$")}
    return patch


def json_patch(target: Mapping[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902 JSON Patch; a failed ``test`` or a bad path is 422 as on the real server."""
    if not isinstance(operations, list):
        raise ApiError.bad_request("json patch body must be a JSON array of operations")
    try:
        result = jsonpatch.JsonPatch(operations).apply(target, in_place=False)
    except jsonpatch.InvalidJsonPatch as error:
        raise ApiError.bad_request(f"invalid json patch: {error}") from error
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                       causes=[{"reason": "UnexpectedServerResponse", "message": str(error)}]) from error
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "json patch must leave an object")
    return result


def leaves(obj: Mapping[str, Any], prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every leaf path of an object; lists and empty maps are leaves (whole values)."""
    for key, value in obj.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and value:
            yield from leaves(value, path)
        else:
            yield path, value


def owned_region(obj: Mapping[str, Any], status: bool) -> dict[Path, Any]:
    """The leaves that field managers own: the status for ``/status`` writes, otherwise
    everything outside metadata and status plus labels and annotations."""
    if status:
        return {("status", *path): value for path, value in leaves(obj.get("status") or {})}
    region: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        if isinstance(value, Mapping) and value:
            region.update(leaves(value, (key,)))
        else:
            region[(key,)] = value
    metadata = obj.get("metadata") or {}
    for key in ("labels", "annotations"):
        region.update(leaves(metadata.get(key) or {}, ("metadata", key)))
    return region


def _remove_path(obj: dict[str, Any], path: Path) -> None:
    """Delete a leaf and the maps it leaves empty (the field set shrinks, as SSA removes it)."""
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):
        if parent[key] == {}:
            del parent[key]
        else:
            break


class FieldOwnership:
    """Which field manager owns which leaf of one object, rendered as ``managedFields``.

    Writes that are not server-side apply take the fields they change (operation ``Update``);
    applies own what they send, conflict on fields another manager owns with a different
    value unless forced, and drop fields they stopped sending when nobody else owns them.
    """

    def __init__(self) -> None:
        self.owners: dict[Path, dict[str, str]] = {}
        self.times: dict[tuple[str, str, bool], str] = {}

    def copy(self) -> FieldOwnership:
        other = FieldOwnership()
        other.owners = {path: dict(managers) for path, managers in self.owners.items()}
        other.times = dict(self.times)
        return other

    def record_update(self, manager: str, old: Mapping[str, Any], new: Mapping[str, Any],
                      status: bool, now: str) -> None:
        """Give ``manager`` the fields this write changed; forget fields that disappeared."""
        before = owned_region(old, status)
        after = owned_region(new, status)
        changed = [path for path, value in after.items() if path not in before or before[path] != value]
        for path in changed:
            self.owners[path] = {manager: "Update"}
        if changed:
            self.times[(manager, "Update", status)] = now
        self._forget_missing(new)

    def apply(self, manager: str, live: Mapping[str, Any], applied: Mapping[str, Any], *,
              status: bool, force: bool, resource: ResourceType, name: str, now: str) -> dict[str, Any]:
        """Server-side apply ``applied`` onto ``live``; returns the new object or raises 409."""
        sent = owned_region(applied, status)
        current = owned_region(live, status)
        conflicts = [
            (path, other)
            for path, value in sent.items()
            if path in current and current[path] != value
            for other in self.owners.get(path, {})
            if other != manager
        ]
        if conflicts and not force:
            causes = [{"reason": "FieldManagerConflict",
                       "message": f'conflict with "{other}" using {resource.api_version}',
                       "field": "." + ".".join(path)} for path, other in conflicts]
            summary = "\n".join(f'- conflict with "{other}" using {resource.api_version}: .{".".join(path)}'
                                for path, other in conflicts)
            noun = "conflict" if len(conflicts) == 1 else "conflicts"
            raise ApiError(409, "Conflict", f"Apply failed with {len(conflicts)} {noun}: {summary}",
                           name=name, resource=resource, causes=causes)
        result: dict[str, Any] = merge_patch(live, applied)
        for path, managers in list(self.owners.items()):
            if manager in managers and path not in sent and (path[0] == "status") == status:
                del managers[manager]
                if not managers:
                    _remove_path(result, path)
        for path in sent:
            managers = {} if force else self.owners.get(path, {})
            managers[manager] = "Apply"
            self.owners[path] = managers
        self.times[(manager, "Apply", status)] = now
        self._forget_missing(result)
        return result

    def _forget_missing(self, obj: Mapping[str, Any]) -> None:
        present = owned_region(obj, False) | owned_region(obj, True)
        self.owners = {path: managers for path, managers in self.owners.items() if path in present and managers}

    def managed_fields(self, api_version: str) -> list[dict[str, Any]]:
        """The ``metadata.managedFields`` entries, one per manager, operation and subresource."""
        groups: dict[tuple[str, str, bool], dict[str, Any]] = {}
        for path, managers in sorted(self.owners.items()):
            for manager, operation in managers.items():
                node = groups.setdefault((manager, operation, path[0] == "status"), {})
                for key in path:
                    node = node.setdefault(f"f:{key}", {})
        entries = []
        for (manager, operation, status), fields in groups.items():
            entry: dict[str, Any] = {
                "manager": manager,
                "operation": operation,
                "apiVersion": api_version,
                "time": self.times.get((manager, operation, status), ""),
                "fieldsType": "FieldsV1",
                "fieldsV1": fields,
            }
            if status:
                entry["subresource"] = "status"
            entries.append(entry)
        return entries
