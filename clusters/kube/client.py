"""The one door to a cluster's API server, over the official ``kubernetes`` client.

Builds an authenticated ``ApiClient`` from a :class:`~clusters.models.Cluster` (kubeconfig and
context, server URL with bearer token and CA, or the in-cluster service account), puts a timeout
on every call, and turns the client's exceptions into three kinds the sync engine acts on:
:class:`TransientError` (retry with backoff), :class:`ConflictError` / :class:`GoneError` (409 and
410, handled by merge and relist) and :class:`PermanentError` (shown to the user). Credentials
never appear in messages or logs.
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from clusters.kinds import KindInfo
from clusters.models import Cluster
from common.gc_tuning import collector_paused

FIELD_MANAGER = "inference-portal"


class GatewayError(Exception):
    """Base of the sync-relevant failures; ``status`` is the HTTP code (0 without a response)."""

    def __init__(
        self, message: str, status: int = 0, body: dict[str, Any] | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.status = status
        self.body = body or {}
        self.retry_after = retry_after  # seconds the server asked to wait (429/503 Retry-After)


class TransientError(GatewayError):
    """429, 5xx, timeouts, refused or reset connections: worth retrying with backoff."""


class ConflictError(GatewayError):
    """409: stale resourceVersion, name already taken, or a failed delete precondition."""


class GoneError(GatewayError):
    """410: a watch resourceVersion or list continue token too old; relist."""


class NotFoundError(GatewayError):
    """404: the object (or its namespace) does not exist."""


class PermanentError(GatewayError):
    """400, 401, 403, 422...: retrying will not help; the API server's message is shown as is."""


def _classify(error: ApiException) -> GatewayError:
    try:
        body = json.loads(error.body) if error.body else {}
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") or error.reason or "no message"
    status = error.status or 0
    text = f"{status} {body.get('reason') or error.reason}: {message}"
    if status == 409:
        return ConflictError(text, status, body)
    if status == 410:
        return GoneError(text, status, body)
    if status == 404:
        return NotFoundError(text, status, body)
    if status == 429 or status >= 500 or status == 0:
        return TransientError(text, status, body, _retry_after(error, body))
    return PermanentError(text, status, body)


def _retry_after(error: ApiException, body: dict[str, Any]) -> float | None:
    """The wait the API server asked for: the ``Retry-After`` header (seconds), else the Status's
    ``details.retryAfterSeconds``."""
    for value in ((error.headers or {}).get("Retry-After"), (body.get("details") or {}).get("retryAfterSeconds")):
        try:
            if value is not None and float(value) >= 0:
                return float(value)
        except (TypeError, ValueError):
            continue
    return None


_CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, OSError, TimeoutError)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except ApiException as error:
        raise _classify(error) from None
    except _CONNECTION_ERRORS as error:
        raise TransientError(f"connection failed: {type(error).__name__}") from None


def _stream_events(response: Any) -> Iterator[dict[str, Any]]:
    """Decode a watch response line by line (JSON per line, orjson), always releasing the connection."""
    try:
        with translated():
            for line in iter_resp_lines(response):
                if line.strip():
                    yield orjson.loads(line)
    finally:
        response.close()
        response.release_conn()


@dataclass
class ListPage:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None


def build_api_client(cluster: Cluster) -> client.ApiClient:
    """An ApiClient authenticated as the cluster record says."""
    if cluster.auth_method == Cluster.AuthMethod.KUBECONFIG:
        return config.new_client_from_config(
            config_file=cluster.kubeconfig_path, context=cluster.kubeconfig_context or None
        )
    configuration = client.Configuration()
    if cluster.auth_method == Cluster.AuthMethod.IN_CLUSTER:
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    if cluster.auth_method != Cluster.AuthMethod.TOKEN:
        raise PermanentError(f"cluster {cluster.name} is a {cluster.get_auth_method_display()}: no API server")
    refused = cluster.insecure_url_errors().get("server_url")
    if refused:
        raise PermanentError(f"cluster {cluster.name}: server_url {refused}")
    configuration.host = cluster.server_url.rstrip("/")
    if cluster.bearer_token:
        configuration.api_key = {"authorization": f"Bearer {cluster.bearer_token}"}
    configuration.verify_ssl = not cluster.insecure_skip_tls_verify
    if cluster.ca_cert:
        with tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False) as handle:
            handle.write(cluster.ca_cert)
        configuration.ssl_ca_cert = handle.name
    return client.ApiClient(configuration)


def impersonate(api_client: client.ApiClient, user: str, groups: list[str]) -> None:
    """Every request of ``api_client`` goes as ``user`` in ``groups`` (``Impersonate-User`` and one
    ``Impersonate-Group`` header per group: the API server reads repeated headers, not a list), so
    the cluster's RBAC decides; the client's own identity needs only the ``impersonate`` verb."""
    pool = api_client.rest_client.pool_manager
    send = pool.request

    def request(method: str, url: str, *args: Any, headers: Any = None, **kwargs: Any) -> Any:
        merged = urllib3.HTTPHeaderDict(headers or {})
        merged["Impersonate-User"] = user
        for group in groups:
            merged.add("Impersonate-Group", group)
        return send(method, url, *args, headers=merged, **kwargs)

    pool.request = request


class PassSnapshot:
    """Objects listed once for a reconcile pass, so that its reads of them cost no request.

    Issue 44: a pass read every managed object and each one's Deployment live (a GET of the model,
    two of its Deployment: 300 requests per 100 models per pass). A pass lists each managed kind
    and the children it owns once per namespace instead (``clusters.sync.controllers``) and gives
    the snapshot to its gateways: a read of a listed scope is served from here (a copy: callers
    change what they read), one of anything else goes to the cluster. The pass's own writes keep it
    current (the object the API server answered replaces the listed one; a delete makes the name
    unknown, so the next read of it is live). What others write during the pass is seen by the next
    pass, or by the reconcile their change wakes through the watch, as an informer's cache is; a
    stale read costs at most a write refused with 409 (resourceVersion preconditions) or one more
    apply. Shared by the pass's worker threads: each object is reconciled by one of them, and each
    update is one dict assignment under the GIL."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._complete: set[tuple[str, str | None]] = set()  # (type, namespace); None: every namespace
        self._unknown: set[tuple[str, str, str]] = set()

    @staticmethod
    def type_key(api_version: str, kind: str) -> str:
        return f"{api_version}/{kind}"

    def add(self, type_key: str, namespace: str | None, items: list[dict[str, Any]]) -> None:
        """Everything of ``type_key`` in ``namespace`` (None: the whole cluster), as one list gave it."""
        for item in items:
            metadata = item["metadata"]
            self._objects[type_key, metadata.get("namespace") or "", metadata["name"]] = item
        self._complete.add((type_key, namespace))

    def read(self, type_key: str, namespace: str, name: str) -> tuple[bool, dict[str, Any] | None]:
        """(known, the object or None when the listed scope lacks it); (False, None) to read live."""
        key = (type_key, namespace, name)
        listed = (type_key, namespace) in self._complete or (type_key, None) in self._complete
        if not listed or key in self._unknown:
            return False, None
        found = self._objects.get(key)
        return True, copy.deepcopy(found) if found is not None else None

    def wrote(self, type_key: str, namespace: str, name: str, answer: dict[str, Any] | None) -> None:
        """The pass wrote the object: keep the API server's answer, or forget it (read it live)."""
        key = (type_key, namespace, name)
        if answer and answer.get("metadata", {}).get("name") == name:
            self._objects[key] = copy.deepcopy(answer)
            self._unknown.discard(key)
        else:
            self._objects.pop(key, None)
            self._unknown.add(key)


class ClusterGateway:
    """Verbs on custom resources of one cluster. One instance per thread (ApiClient is not shared).

    ``acting_for`` (user name, groups): requests impersonate that person (see :func:`impersonate`).
    """

    def __init__(
        self,
        cluster: Cluster,
        api_client: client.ApiClient | None = None,
        acting_for: tuple[str, list[str]] | None = None,
    ):
        self.cluster = cluster
        self.timeout = cluster.request_timeout_seconds
        self.owns_api_client = api_client is None
        self.api_client = api_client or build_api_client(cluster)
        if acting_for is not None:
            impersonate(self.api_client, *acting_for)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.core = client.CoreV1Api(self.api_client)
        self.snapshot: PassSnapshot | None = None  # a reconcile pass's listed objects (PassSnapshot)

    def _wrote(self, kind: KindInfo, namespace: str, name: str, answer: Any) -> None:
        if self.snapshot is not None:
            self.snapshot.wrote(PassSnapshot.type_key(kind.api_version, kind.kind), namespace, name,
                                answer if isinstance(answer, dict) else None)  # fmt: skip

    def close(self) -> None:
        self.api_client.close()
        ca_file = self.api_client.configuration.ssl_ca_cert
        if self.owns_api_client and ca_file and self.cluster.ca_cert and ca_file.startswith(tempfile.gettempdir()):
            Path(ca_file).unlink(missing_ok=True)  # written by build_api_client for this client only

    def list_page(self, kind: KindInfo, namespace: str | None, limit: int, continue_token: str | None) -> ListPage:
        """One page of a paged list (``limit``/``continue``); GoneError when the token expired.

        The body is read raw (``_preload_content=False``) and decoded by orjson into plain dicts:
        the client's own path decodes with ``json`` and walks the result again as its model
        (measured: a third of the portal's CPU in a relist, beside the write). Errors (non-2xx)
        are raised by the client before the body is read, as on its own path."""
        kwargs: dict[str, Any] = {"limit": limit, "_request_timeout": self.timeout * 3, "_preload_content": False}
        if continue_token:
            kwargs["_continue"] = continue_token
        with translated():
            if namespace:
                response = self.custom.list_namespaced_custom_object(
                    kind.group, kind.version, namespace, kind.plural, **kwargs
                )
            else:
                response = self.custom.list_cluster_custom_object(kind.group, kind.version, kind.plural, **kwargs)
            try:
                raw = response.data
            finally:
                response.release_conn()
        with collector_paused():  # decoding a page builds thousands of containers, all kept
            body = orjson.loads(raw)
        metadata = body.get("metadata") or {}
        return ListPage(body.get("items") or [], metadata.get("resourceVersion", ""), metadata.get("continue") or None)

    def list_nodes(self) -> list[dict[str, Any]]:
        """Every Node (paged), as plain dicts, for node-pool capacity."""
        nodes: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": 500, "_request_timeout": self.timeout * 3}
            if token:
                kwargs["_continue"] = token
            with translated():
                page = self.core.list_node(**kwargs)
            nodes += [self.api_client.sanitize_for_serialization(node) for node in page.items]
            token = page.metadata._continue
            if not token:
                return nodes

    def get(self, kind: KindInfo, namespace: str, name: str) -> dict[str, Any]:
        if self.snapshot is not None:
            known, found = self.snapshot.read(PassSnapshot.type_key(kind.api_version, kind.kind), namespace, name)
            if known and found is None:
                raise NotFoundError(f'{kind.plural}.{kind.group} "{name}" not found', 404)
            if known:
                return found
        with translated():
            return self.custom.get_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, _request_timeout=self.timeout
            )

    def create(self, kind: KindInfo, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        with translated():
            created = self.custom.create_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                body,
                field_manager=FIELD_MANAGER,
                _request_timeout=self.timeout,
            )
        # The client returns None for codes it does not map; read the object back then.
        self._wrote(kind, namespace, body["metadata"]["name"], created)
        return created or self.get(kind, namespace, body["metadata"]["name"])

    def patch(self, kind: KindInfo, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch; with ``metadata.resourceVersion`` in it, ConflictError when stale."""
        return self._merge_patch(self.custom.patch_namespaced_custom_object, kind, namespace, name, patch)

    def patch_status(self, kind: KindInfo, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch only ``status`` through the ``/status`` subresource (controller-owned fields)."""
        return self._merge_patch(
            self.custom.patch_namespaced_custom_object_status, kind, namespace, name, {"status": status}
        )

    def _merge_patch(self, method: Any, kind: KindInfo, namespace: str, name: str, body: dict[str, Any]) -> dict:
        with translated():
            patched = method(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                name,
                body,
                field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json",
                _request_timeout=self.timeout,
            )
        self._wrote(kind, namespace, name, patched)
        return patched or self.get(kind, namespace, name)

    def delete(self, kind: KindInfo, namespace: str, name: str, uid: str | None) -> dict[str, Any] | None:
        """DELETE guarded by the uid, so a newer object of the same name is never removed."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid) if uid else None)
        self._wrote(kind, namespace, name, None)  # it may linger (finalizers): read it live from now on
        with translated():
            return self.custom.delete_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, body=options, _request_timeout=self.timeout
            )

    def builtin(self, api_version: str, kind: str) -> BuiltinResource:
        """Verbs on a built-in kind the controllers manage (Deployment, Job, CronJob, ConfigMap) or
        the portal reads live (ReplicaSet, Pod, Event)."""
        return BuiltinResource(self, api_version, kind)

    def pod_log(self, namespace: str, pod: str, container: str | None, tail_lines: int) -> str:
        """The last ``tail_lines`` lines a container printed (the API server asks the node's kubelet)."""
        with translated():
            return self.core.read_namespaced_pod_log(
                pod, namespace, container=container or None, tail_lines=tail_lines, _request_timeout=self.timeout
            )

    def dry_run_create(self, kind: KindInfo, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create with ``dryRun=All``: the API server runs every check (schema, CEL rules, admission
        policies, quota) and answers what it would store, storing nothing."""
        with translated():
            return self.custom.create_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, body, dry_run="All",
                field_manager=FIELD_MANAGER, _request_timeout=self.timeout,
            )

    def dry_run_patch(self, kind: KindInfo, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """The JSON merge patch an edit sends, with ``dryRun=All`` (see ``dry_run_create``)."""
        with translated():
            return self.custom.patch_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, patch, dry_run="All",
                field_manager=FIELD_MANAGER, _content_type="application/merge-patch+json",
                _request_timeout=self.timeout,
            )

    def watch_options(self, resource_version: str, timeout_seconds: int) -> dict[str, Any]:
        """Arguments of every watch: from ``resource_version``, bookmarks on, a server timeout and a
        client read timeout a little longer, so a stream that stalls silently is noticed."""
        return {
            "watch": True,
            "resource_version": resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout_seconds,
            "_preload_content": False,
            "_request_timeout": (self.timeout, timeout_seconds + self.timeout),
        }

    def watch(
        self, kind: KindInfo, namespace: str | None, resource_version: str, timeout_seconds: int
    ) -> Iterator[dict[str, Any]]:
        """Raw watch events (dicts, BOOKMARK and ERROR included) from ``resource_version``.

        The server ends the stream after ``timeout_seconds``; the client's read timeout is a
        little longer, so a stream that stalls silently is noticed.
        """
        kwargs = self.watch_options(resource_version, timeout_seconds)
        with translated():
            if namespace:
                response = self.custom.list_namespaced_custom_object(
                    kind.group, kind.version, namespace, kind.plural, **kwargs
                )
            else:
                response = self.custom.list_cluster_custom_object(kind.group, kind.version, kind.plural, **kwargs)
        yield from _stream_events(response)


_BUILTIN_APIS = {
    ("apps/v1", "Deployment"): (client.AppsV1Api, "deployment"),
    ("batch/v1", "Job"): (client.BatchV1Api, "job"),
    ("batch/v1", "CronJob"): (client.BatchV1Api, "cron_job"),
    ("v1", "ConfigMap"): (client.CoreV1Api, "config_map"),
    ("v1", "Service"): (client.CoreV1Api, "service"),
    ("apps/v1", "ReplicaSet"): (client.AppsV1Api, "replica_set"),
    ("v1", "Pod"): (client.CoreV1Api, "pod"),
    ("v1", "Event"): (client.CoreV1Api, "event"),
}


class BuiltinResource:
    """get/create/patch/delete of one built-in namespaced kind through the typed client, as plain dicts."""

    def __init__(self, gateway: ClusterGateway, api_version: str, kind: str):
        try:
            api_class, self.snake = _BUILTIN_APIS[(api_version, kind)]
        except KeyError:
            raise ValueError(f"{kind} ({api_version}) is not a built-in kind the portal manages") from None
        self.gateway, self.api = gateway, api_class(gateway.api_client)
        self.type_key = PassSnapshot.type_key(api_version, kind)
        self.api_version, self.kind = api_version, kind

    def _wrote(self, namespace: str, name: str, answer: dict[str, Any] | None) -> None:
        if self.gateway.snapshot is not None:
            self.gateway.snapshot.wrote(self.type_key, namespace, name, answer)

    def _call(self, verb: str, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        method = getattr(self.api, f"{verb}_namespaced_{self.snake}")
        with translated():
            result = method(*args, _request_timeout=self.gateway.timeout, **kwargs)
        return None if result is None else self.gateway.api_client.sanitize_for_serialization(result)

    def _list_method(self, namespace: str | None) -> Any:
        """The list call of one namespace, or of all (the cluster's namespace list decides which)."""
        if namespace:
            method = getattr(self.api, f"list_namespaced_{self.snake}")
            return lambda **kwargs: method(namespace, **kwargs)
        return getattr(self.api, f"list_{self.snake}_for_all_namespaces")

    def list(
        self, label_selector: str, namespace: str | None = None, field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object with the labels (and fields, e.g. a pod's ``spec.nodeName``) in ``namespace``
        (None: all), and the list's resourceVersion."""
        with translated():
            result = self._list_method(namespace)(label_selector=label_selector, field_selector=field_selector,
                                                  _request_timeout=self.gateway.timeout * 3)  # fmt: skip
        body = self.gateway.api_client.sanitize_for_serialization(result)
        return body.get("items") or [], (body.get("metadata") or {}).get("resourceVersion", "")

    def raw_items(self, namespace: str | None, timeout: float) -> list[dict[str, Any]]:
        """Every object in ``namespace`` (None: all) as the API server sent it, decoded by orjson (the
        typed path's models, walked back into dicts, were most of the fleet pages' CPU), within
        ``timeout`` seconds a read. Timestamps stay the server's RFC 3339 text."""
        with translated():
            response = self._list_method(namespace)(_preload_content=False, _request_timeout=timeout)
            try:
                raw = response.data
            finally:
                response.release_conn()
        with collector_paused():
            return orjson.loads(raw).get("items") or []

    def watch(
        self, label_selector: str, resource_version: str, timeout_seconds: int, namespace: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Raw watch events of the labelled objects in ``namespace`` (None: all; see ClusterGateway.watch)."""
        with translated():
            response = self._list_method(namespace)(
                label_selector=label_selector, **self.gateway.watch_options(resource_version, timeout_seconds)
            )
        yield from _stream_events(response)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist (from the pass's snapshot where it listed them)."""
        if self.gateway.snapshot is not None:
            # Children are listed by the controller's label: one without it (someone else's object
            # of that name, which ensure must refuse to take over) is not there, so a miss is read live.
            known, found = self.gateway.snapshot.read(self.type_key, namespace, name)
            if known and found is not None:
                return found
        try:
            return self._call("read", name, namespace)
        except NotFoundError:
            return None

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create; when another reconcile created it first (409 AlreadyExists), return that one."""
        try:
            created = self._call("create", namespace, body, field_manager=FIELD_MANAGER)
        except ConflictError:
            created = None
            self._wrote(namespace, body["metadata"]["name"], None)  # another made it: read it live
        self._wrote(namespace, body["metadata"]["name"], created)
        return created or self.get(namespace, body["metadata"]["name"])

    def apply(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of the whole intent as the field manager ``inference-portal``; forced,
        as the portal is the controller of what it applies (see clusters/kube/owned.py)."""
        applied = self._call(
            "patch", body["metadata"]["name"], namespace, body, field_manager=FIELD_MANAGER, force=True,
            _content_type="application/apply-patch+yaml",
        )
        self._wrote(namespace, body["metadata"]["name"], applied)
        return applied or self.get(namespace, body["metadata"]["name"])

    def delete(self, namespace: str, name: str) -> None:
        """Delete with background propagation (a Job's pods go too); a missing object is fine."""
        self._wrote(namespace, name, None)
        try:
            self._call("delete", name, namespace, propagation_policy="Background")
        except NotFoundError:
            return
