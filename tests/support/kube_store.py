"""The state of the test Kubernetes API server: objects, resourceVersions, watch history.

It is a plain thread-safe object with no HTTP and no asyncio, so the HTTP handler (in the
server's event-loop thread) and the tests (in the test thread, seeding and asserting) use the
same write paths and see the same resourceVersions and watch events.

Stored objects are never mutated in place: every write builds a new dict. That is what makes
list snapshots (for ``continue`` tokens) and watch history cheap: they hold references.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import collections
import copy
import dataclasses
import datetime
import itertools
import json
import random
import string
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tests.support.kube_model import ApiError, ResourceType, Selector
from tests.support.kube_patch import FieldOwnership, json_patch, merge_patch, strip_directives

ObjectKey = tuple[str, str]  # (namespace or "" for cluster-scoped, name)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)

# Metadata the server owns: client-sent values are ignored on every update.
SERVER_METADATA = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                   "generation", "namespace", "name", "resourceVersion", "managedFields")

EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter, or use the continue token in this response to retrieve "
    "the remainder of the results. Continuing with the provided token results in an inconsistent list "
    "- objects that were created, modified, or deleted between the time the first chunk was returned "
    "and now may show up in the list."
)


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True, slots=True)
class WatchEvent:
    """One write as watchers see it; ``previous`` lets a selector turn MODIFIED into ADDED/DELETED."""

    resource_version: int
    type: str
    object: dict[str, Any]
    previous: dict[str, Any] | None


@dataclasses.dataclass
class _Bucket:
    """Objects and event history of one resource type."""

    resource: ResourceType
    objects: dict[ObjectKey, dict[str, Any]] = dataclasses.field(default_factory=dict)
    ownership: dict[ObjectKey, FieldOwnership] = dataclasses.field(default_factory=dict)
    history: list[WatchEvent] = dataclasses.field(default_factory=list)
    history_versions: list[int] = dataclasses.field(default_factory=list)
    compacted: int = 0  # events at or below this resourceVersion are gone from the history


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """What a write did: the object to answer with and whether it was created or removed."""

    object: dict[str, Any]
    created: bool = False
    removed: bool = False


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": metadata}


class KubeStore:
    """All objects of one emulated cluster, with a global resourceVersion counter like etcd's."""

    def __init__(self, *, max_history: int = 200_000, max_snapshots: int = 64) -> None:
        self._lock = threading.RLock()
        self._resource_version = 0
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}
        self._kinds: dict[tuple[str, str], ResourceType] = {}
        self._listeners: list[Callable[[], None]] = []
        self._snapshots: collections.OrderedDict[int, list[dict[str, Any]]] = collections.OrderedDict()
        self._snapshot_ids = itertools.count(1)
        self._max_history = max_history
        self._max_snapshots = max_snapshots

    # Resource types -------------------------------------------------------------------------

    def register(self, resource: ResourceType) -> ResourceType:
        """Serve a resource type; re-registering the same plural keeps its objects."""
        with self._lock:
            bucket = self._buckets.get(resource.key)
            if bucket is None:
                self._buckets[resource.key] = _Bucket(resource)
            else:
                bucket.resource = resource
            self._kinds[(resource.api_version, resource.kind)] = resource
        return resource

    def resources(self) -> list[ResourceType]:
        with self._lock:
            return [bucket.resource for bucket in self._buckets.values()]

    def resource(self, group: str, version: str, plural: str) -> ResourceType | None:
        bucket = self._buckets.get((group, version, plural))
        return bucket.resource if bucket else None

    def resource_for(self, api_version: str, kind: str) -> ResourceType:
        try:
            return self._kinds[(api_version, kind)]
        except KeyError:
            raise ValueError(f"no resource registered for apiVersion {api_version!r} kind {kind!r}") from None

    def find_plural(self, plural: str, group: str | None = None) -> ResourceType:
        """The resource type with this plural (and group, when two groups share a plural)."""
        matches = [r for r in self.resources() if r.plural == plural and (group is None or r.group == group)]
        if len({(r.group, r.plural) for r in matches}) != 1:
            raise ValueError(f"plural {plural!r} (group {group!r}) matches {len(matches)} resources; name the group")
        return matches[0]

    # Observers ------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from the writing thread) after every write; it must be cheap."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    @property
    def resource_version(self) -> int:
        return self._resource_version

    # Reads ----------------------------------------------------------------------------------

    def get(self, resource: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object (shared: callers must not mutate it); 404 if absent."""
        with self._lock:
            obj = self._buckets[resource.key].objects.get((namespace or "", name))
        if obj is None:
            raise ApiError.not_found(resource, name)
        return obj

    def select(self, resource: ResourceType, namespace: str | None, selector: Selector,
               name: str | None = None) -> list[dict[str, Any]]:
        """Objects in key order (namespace, name), as etcd lists them."""
        with self._lock:
            objects = self._buckets[resource.key].objects
            keys = sorted(objects)
            return [
                objects[key] for key in keys
                if (namespace is None or key[0] == namespace) and (name is None or key[1] == name)
                and (not selector or selector.matches(objects[key]))
            ]

    def snapshot(self, resource: ResourceType, namespace: str | None, selector: Selector,
                 name: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Matching objects and the resourceVersion they are current at, read atomically so a
        watch can send them as ADDED and continue with exactly the events after them."""
        with self._lock:
            return self.select(resource, namespace, selector, name), self._resource_version

    def list(self, resource: ResourceType, namespace: str | None, selector: Selector, *,
             limit: int | None = None, continue_token: str | None = None) -> dict[str, Any]:
        """A ``<Kind>List`` page; continue tokens page through a snapshot taken by the first page,
        so pages are consistent with each other as on a real server."""
        with self._lock:
            if continue_token:
                snapshot_id, offset, list_version = self._decode_continue(continue_token)
                items = self._snapshots.get(snapshot_id)
                if items is None:
                    raise ApiError.gone(EXPIRED_CONTINUE)
            else:
                items = self.select(resource, namespace, selector)
                snapshot_id, offset, list_version = 0, 0, self._resource_version
            end = offset + limit if limit else len(items)
            metadata: dict[str, Any] = {"resourceVersion": str(list_version)}
            if end < len(items):
                if not snapshot_id:
                    snapshot_id = next(self._snapshot_ids)
                    self._snapshots[snapshot_id] = items
                    while len(self._snapshots) > self._max_snapshots:
                        self._snapshots.popitem(last=False)
                metadata["continue"] = self._encode_continue(snapshot_id, end, list_version)
                if not selector:
                    metadata["remainingItemCount"] = len(items) - end
            elif snapshot_id:
                self._snapshots.pop(snapshot_id, None)
        return {"kind": f"{resource.kind}List", "apiVersion": resource.api_version,
                "metadata": metadata, "items": items[offset:end]}

    @staticmethod
    def _encode_continue(snapshot_id: int, offset: int, list_version: int) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": list_version, "snapshot": snapshot_id, "offset": offset})
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @staticmethod
    def _decode_continue(token: str) -> tuple[int, int, int]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            return int(data["snapshot"]), int(data["offset"]), int(data["rv"])
        except (ValueError, KeyError, TypeError, binascii.Error) as error:
            raise ApiError.bad_request(f"continue key is not valid: {error}") from error

    def expire_continue_tokens(self) -> int:
        """Forget every list snapshot, so outstanding continue tokens answer 410 Expired."""
        with self._lock:
            count = len(self._snapshots)
            self._snapshots.clear()
        return count

    # Watch history --------------------------------------------------------------------------

    def events_since(self, resource: ResourceType, since: int) -> tuple[list[WatchEvent], int]:
        """Events after ``since`` and the resourceVersion they bring the watcher up to;
        410 "too old resource version" when history before that point was compacted."""
        with self._lock:
            bucket = self._buckets[resource.key]
            if since < bucket.compacted:
                raise ApiError.gone(f"too old resource version: {since} ({bucket.compacted})")
            index = bisect.bisect_right(bucket.history_versions, since)
            return bucket.history[index:], self._resource_version

    def compact(self) -> int:
        """Drop all watch history up to now, like etcd compaction; returns the compaction point."""
        with self._lock:
            for bucket in self._buckets.values():
                bucket.history.clear()
                bucket.history_versions.clear()
                bucket.compacted = self._resource_version
            return self._resource_version

    # Writes ---------------------------------------------------------------------------------

    def create(self, resource: ResourceType, namespace: str | None, body: Mapping[str, Any], *,
               manager: str | None, operation: str = "Update") -> WriteResult:
        """POST: 409 AlreadyExists on a duplicate name; status is dropped where it is a subresource."""
        obj = self._new_object(resource, namespace, body)
        if resource.status_subresource:
            obj.pop("status", None)
        if obj["metadata"].get("resourceVersion"):
            raise ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created")
        return self._insert(resource, obj, manager, operation)

    def replace(self, resource: ResourceType, namespace: str | None, name: str, body: Mapping[str, Any], *,
                status: bool, manager: str | None) -> WriteResult:
        """PUT on the object or its ``/status``: the caller's resourceVersion must be current."""
        with self._lock:
            old = self.get(resource, namespace, name)
            if not isinstance(body, Mapping) or not isinstance(body.get("metadata"), Mapping):
                raise ApiError.bad_request("the body must be an object with metadata")
            sent_name = body["metadata"].get("name")
            if sent_name and sent_name != name:
                raise ApiError.bad_request(
                    f"the name of the object ({sent_name}) does not match the name on the URL ({name})")
            sent_version = body["metadata"].get("resourceVersion")
            if not sent_version and resource.custom:
                raise ApiError.invalid(resource, name, "metadata.resourceVersion", "0x0",
                                       "must be specified for an update")
            self._check_preconditions(resource, old, body["metadata"].get("uid"), sent_version)
            return self._update(resource, old, body, status=status, manager=manager)

    def patch(self, resource: ResourceType, namespace: str | None, name: str, patch_type: str, patch: Any, *,
              status: bool, manager: str | None, force: bool = False) -> WriteResult:
        """PATCH in any of the four content types; a patched resourceVersion is a precondition."""
        with self._lock:
            if patch_type == APPLY_PATCH:
                return self._apply(resource, namespace, name, patch, status=status, manager=manager, force=force)
            old = self.get(resource, namespace, name)
            if patch_type == JSON_PATCH:
                patched = json_patch(old, patch)
            elif isinstance(patch, Mapping):
                patched = merge_patch(old, strip_directives(patch) if patch_type == STRATEGIC_MERGE_PATCH else patch)
            else:
                raise ApiError.bad_request(f"a {patch_type} body must be a JSON object")
            metadata = patched.get("metadata") if isinstance(patched.get("metadata"), Mapping) else {}
            self._check_preconditions(resource, old, metadata.get("uid"), metadata.get("resourceVersion"))
            return self._update(resource, old, patched, status=status, manager=manager)

    def _apply(self, resource: ResourceType, namespace: str | None, name: str, applied: Any, *,
               status: bool, manager: str | None, force: bool) -> WriteResult:
        if not isinstance(applied, Mapping):
            raise ApiError.bad_request("an apply patch must be an object")
        if not manager:
            raise ApiError.bad_request("PATCH requests with apply content type must specify fieldManager")
        if (applied.get("apiVersion"), applied.get("kind")) != (resource.api_version, resource.kind):
            raise ApiError.bad_request(
                f"apiVersion and kind must be {resource.api_version} {resource.kind}, "
                f"got {applied.get('apiVersion')} {applied.get('kind')}")
        key = (namespace or "", name)
        old = self._buckets[resource.key].objects.get(key)
        if old is None:
            if status:
                raise ApiError.not_found(resource, name)
            body = {**applied, "metadata": {**(applied.get("metadata") or {}), "name": name}}
            return self.create(resource, namespace, body, manager=manager, operation="Apply")
        metadata = applied.get("metadata") or {}
        self._check_preconditions(resource, old, metadata.get("uid"), metadata.get("resourceVersion"))
        ownership = self._buckets[resource.key].ownership.get(key, FieldOwnership()).copy()
        merged = ownership.apply(manager, old, applied, status=status, force=force, resource=resource,
                                 name=name, now=now_rfc3339())
        return self._finish_update(resource, old, self._merge_write(resource, old, merged, status=status), ownership)

    def delete(self, resource: ResourceType, namespace: str | None, name: str,
               options: Mapping[str, Any] | None = None) -> WriteResult:
        """DELETE: with finalizers the object only gets ``deletionTimestamp`` (the caller answers
        202); without, it is removed. ``preconditions`` guard against deleting a newer object."""
        with self._lock:
            old = self.get(resource, namespace, name)
            preconditions = (options or {}).get("preconditions") or {}
            self._check_preconditions(resource, old, preconditions.get("uid"),
                                      preconditions.get("resourceVersion"), precondition=True)
            metadata = old["metadata"]
            if metadata.get("deletionTimestamp"):
                return WriteResult(old)
            if metadata.get("finalizers"):
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                ownership = self._buckets[resource.key].ownership.get((namespace or "", name))
                return self._commit(resource, old, new, ownership)
            return self._commit(resource, old, None, None)

    def put(self, manifest: Mapping[str, Any], *, manager: str | None = None) -> WriteResult:
        """Test-side upsert acting like another cluster writer: everything in the manifest,
        status included, is taken as is; identity and generation rules still apply."""
        resource = self.resource_for(manifest.get("apiVersion", ""), manifest.get("kind", ""))
        metadata = manifest.get("metadata") or {}
        namespace = (metadata.get("namespace") or "default") if resource.namespaced else None
        with self._lock:
            old = self._buckets[resource.key].objects.get((namespace or "", metadata.get("name", "")))
            if old is None:
                obj = self._new_object(resource, namespace, manifest, keep_identity=True)
                return self._insert(resource, obj, manager, "Update")
            new = copy.deepcopy(dict(manifest))
            new_metadata = new.setdefault("metadata", {})
            for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if key in old["metadata"] and key not in new_metadata:
                    new_metadata[key] = old["metadata"][key]
            new_metadata["namespace"] = namespace
            if namespace is None:
                new_metadata.pop("namespace")
            new_metadata["generation"] = self._next_generation(resource, old, new)
            return self._finish_update(resource, old, new, self._owners_after(resource, old, new, manager, False))

    # Write internals ------------------------------------------------------------------------

    def _new_object(self, resource: ResourceType, namespace: str | None, body: Mapping[str, Any],
                    keep_identity: bool = False) -> dict[str, Any]:
        if not isinstance(body, Mapping) or not isinstance(body.get("metadata", {}), Mapping):
            raise ApiError.bad_request("the body must be an object with metadata")
        obj = copy.deepcopy(dict(body))
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name"):
            if not metadata.get("generateName"):
                raise ApiError.invalid(resource, "", "metadata.name", '""', "name or generateName is required")
            suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            metadata["name"] = metadata["generateName"] + suffix
        if resource.namespaced:
            sent = metadata.get("namespace")
            if namespace and sent and sent != namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request")
            metadata["namespace"] = namespace or sent or "default"
        else:
            metadata.pop("namespace", None)
        if not keep_identity or "uid" not in metadata:
            metadata["uid"] = str(uuid.uuid4())
        if not keep_identity or "creationTimestamp" not in metadata:
            metadata["creationTimestamp"] = now_rfc3339()
        if not keep_identity:
            metadata.pop("deletionTimestamp", None)
            metadata.pop("deletionGracePeriodSeconds", None)
        else:
            metadata.pop("resourceVersion", None)
        metadata.pop("managedFields", None)
        metadata["generation"] = 1
        return obj

    def _insert(self, resource: ResourceType, obj: dict[str, Any], manager: str | None,
                operation: str) -> WriteResult:
        with self._lock:
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if key in self._buckets[resource.key].objects:
                raise ApiError.already_exists(resource, key[1])
            ownership = None
            if manager:
                ownership = FieldOwnership()
                now = now_rfc3339()
                if operation == "Apply":
                    obj = ownership.apply(manager, {}, obj, status=False, force=True, resource=resource,
                                          name=key[1], now=now)
                else:
                    ownership.record_update(manager, {}, obj, status=False, now=now)
            return self._commit(resource, None, obj, ownership)

    def _check_preconditions(self, resource: ResourceType, old: Mapping[str, Any], uid: str | None,
                             resource_version: str | None, precondition: bool = False) -> None:
        metadata = old["metadata"]
        name = metadata["name"]
        if uid and uid != metadata.get("uid"):
            raise ApiError.conflict(resource, name, f"Precondition failed: UID in precondition: {uid}, "
                                                    f"UID in object meta: {metadata.get('uid')}")
        if resource_version and resource_version != metadata.get("resourceVersion"):
            if precondition:
                raise ApiError.conflict(
                    resource, name, f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                                    f"ResourceVersion in object meta: {metadata.get('resourceVersion')}")
            raise ApiError.conflict(resource, name)

    def _next_generation(self, resource: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]) -> int:
        generation: int = old["metadata"].get("generation", 1)
        return generation + 1 if resource.spec_keys(old) != resource.spec_keys(new) else generation

    def _merge_write(self, resource: ResourceType, old: Mapping[str, Any], sent: Mapping[str, Any], *,
                     status: bool) -> dict[str, Any]:
        """The new object for a main-resource or ``/status`` write of ``sent`` over ``old``:
        the main resource never changes status (with the subresource on), ``/status`` changes
        nothing but status, and server-owned metadata is always the server's."""
        if status:
            new = copy.deepcopy(dict(old))
            if sent.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = copy.deepcopy(sent["status"])
            return new
        new = copy.deepcopy(dict(sent))
        new["apiVersion"], new["kind"] = resource.api_version, resource.kind
        metadata = new.get("metadata")
        metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        for key in SERVER_METADATA:
            metadata.pop(key, None)
            if key in old["metadata"]:
                metadata[key] = old["metadata"][key]
        new["metadata"] = metadata
        if resource.status_subresource:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        metadata["generation"] = self._next_generation(resource, old, new)
        return new

    def _update(self, resource: ResourceType, old: Mapping[str, Any], sent: Mapping[str, Any], *,
                status: bool, manager: str | None) -> WriteResult:
        new = self._merge_write(resource, old, sent, status=status)
        return self._finish_update(resource, old, new, self._owners_after(resource, old, new, manager, status))

    def _owners_after(self, resource: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any],
                      manager: str | None, status: bool) -> FieldOwnership | None:
        """Field ownership after a non-apply write by ``manager`` (unchanged without one)."""
        key = (old["metadata"].get("namespace", ""), old["metadata"]["name"])
        ownership = self._buckets[resource.key].ownership.get(key)
        if not manager:
            return ownership
        ownership = (ownership or FieldOwnership()).copy()
        ownership.record_update(manager, old, new, status=status, now=now_rfc3339())
        return ownership

    def _finish_update(self, resource: ResourceType, old: Mapping[str, Any], new: dict[str, Any],
                       ownership: FieldOwnership | None) -> WriteResult:
        """Finalizer rules, then commit; an object that is being deleted and has lost its last
        finalizer is removed by this very write (only DELETED is seen, as on a real server)."""
        old_finalizers = set(old["metadata"].get("finalizers") or ())
        new_finalizers = set(new["metadata"].get("finalizers") or ())
        if old["metadata"].get("deletionTimestamp"):
            if new_finalizers - old_finalizers:
                raise ApiError.invalid(resource, new["metadata"]["name"], "metadata.finalizers",
                                       json.dumps(sorted(new_finalizers - old_finalizers)),
                                       "no new finalizers can be added if the object is being deleted")
            if not new_finalizers:
                return self._commit(resource, old, None, None, final=new)
        return self._commit(resource, old, new, ownership)

    def _commit(self, resource: ResourceType, old: Mapping[str, Any] | None, new: dict[str, Any] | None,
                ownership: FieldOwnership | None, final: dict[str, Any] | None = None) -> WriteResult:
        """Store one write: bump the global resourceVersion, record the watch event, notify.

        A write that changes nothing is a no-op (no new resourceVersion, no event), as on a real
        server; the sync relies on that to reach a fixed point.
        """
        bucket = self._buckets[resource.key]
        source = new if new is not None else (final if final is not None else old)
        assert source is not None
        key = (source["metadata"].get("namespace", ""), source["metadata"]["name"])
        previous_owners = bucket.ownership[key].owners if key in bucket.ownership else {}
        owners = ownership.owners if ownership is not None else {}
        if old is not None and new is not None and _comparable(old) == _comparable(new) and owners == previous_owners:
            return WriteResult(dict(old))
        self._resource_version += 1
        version = self._resource_version
        if new is None:
            removed = copy.deepcopy(dict(source))
            removed["metadata"]["resourceVersion"] = str(version)
            del bucket.objects[key]
            bucket.ownership.pop(key, None)
            self._record(bucket, WatchEvent(version, "DELETED", removed, None))
            return WriteResult(removed, removed=True)
        new["metadata"]["resourceVersion"] = str(version)
        new["metadata"].pop("managedFields", None)
        if ownership is not None and owners:
            new["metadata"]["managedFields"] = ownership.managed_fields(resource.api_version)
            bucket.ownership[key] = ownership
        else:
            bucket.ownership.pop(key, None)
        bucket.objects[key] = new
        event_type = "ADDED" if old is None else "MODIFIED"
        self._record(bucket, WatchEvent(version, event_type, new, dict(old) if old is not None else None))
        return WriteResult(new, created=old is None)

    def _record(self, bucket: _Bucket, event: WatchEvent) -> None:
        bucket.history.append(event)
        bucket.history_versions.append(event.resource_version)
        if len(bucket.history) > self._max_history:
            drop = len(bucket.history) // 2
            bucket.compacted = bucket.history_versions[drop - 1]
            del bucket.history[:drop], bucket.history_versions[:drop]
        for listener in self._listeners:
            listener()
