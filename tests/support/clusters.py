"""The cluster a test talks to: the real control plane the session started (behind the fault
proxy), or the cluster ``KUBECONFIG`` names (kind, k3d...). Every test works in a fresh namespace
and registers a Cluster row limited to it, so tests never see each other's objects.

Objects are written as another writer would (``kubectl``, a controller): through the official
client, status through the ``/status`` subresource. Nothing here writes the status of a built-in
object: Deployments become ready because kwok runs their pods, Jobs end because kwok ends theirs.
"""

from __future__ import annotations

import copy
import io
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import kubernetes
from django.core.management import call_command

from clusters.kinds import KindInfo, model_for
from clusters.kube import informers
from clusters.models import Cluster
from clusters.sync import controllers
from devstack.control_plane import ADMIN_TOKEN, ControlPlane
from tests.support.fault_proxy import FaultProxy, RequestInfo

_open: list[KubeCluster] = []
"""The namespaces of the tests under way in this process (a test may hold two: two teams)."""


def reconcile_row(row: Any, **options: Any) -> Any:
    """``clusters.sync.controllers.reconcile_row``, once this process's informers hold what the
    cluster holds (:func:`settle`): what a test waited for on the cluster is what the pass reads."""
    settle()
    return controllers.reconcile_row(row, **options)


def reconcile_cluster(cluster: Cluster, **options: Any) -> Any:
    """``clusters.sync.controllers.reconcile_cluster``, once the informers are settled (:func:`settle`)."""
    settle()
    return controllers.reconcile_cluster(cluster, **options)


def settle(timeout: float = 30.0) -> None:
    """Wait until every informer cache of this process (clusters/kube/informers.py) holds, for each
    open test namespace it covers, the objects the cluster holds at their resourceVersions.

    The controllers read built-in objects through those caches, which run a watch's latency behind
    the cluster; a test that waited on the cluster (a pod started, a Deployment ready) and then runs
    a pass would otherwise decide on what was true a moment before, on a busy machine. The cluster
    is read again on every try: its own controllers may move it on meanwhile."""
    deadline = time.monotonic() + timeout
    for kube in list(_open):
        for api_version, kind, shared in kube.caches():
            while (behind := kube.cache_lag(api_version, kind, shared)) is not None:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{shared.name} still differs from the cluster after {timeout:g} s: {behind}")
                time.sleep(0.02)


class KubeCluster:
    """One test's view of a real API server: a fresh namespace, helpers to act as other writers."""

    def __init__(self, api_client: kubernetes.client.ApiClient, *, name: str = "test",
                 plane: ControlPlane | None = None, proxy: FaultProxy | None = None,
                 kubeconfig: str | None = None, namespace: str | None = None) -> None:
        """A fresh namespace, deleted by ``close()``; or an existing ``namespace`` (such as
        ``default``), where ``close()`` deletes the custom resources written through ``write``."""
        self.name = name
        self.api_client = api_client
        self.plane = plane
        self.proxy = proxy
        self.kubeconfig = kubeconfig
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.dynamic = kubernetes.dynamic.DynamicClient(api_client)
        self.owns_namespace = namespace is None
        self.namespace = namespace or f"t-{uuid.uuid4().hex[:10]}"
        self.written: set[tuple[KindInfo, str]] = set()
        if self.owns_namespace:
            kubernetes.client.CoreV1Api(api_client).create_namespace({"metadata": {"name": self.namespace}})
        _open.append(self)

    @property
    def supports_faults(self) -> bool:
        return self.proxy is not None

    def register(self, **extra: Any) -> Cluster:
        """The Cluster row, limited to this test's namespace; through the fault proxy when there is one."""
        extra.setdefault("namespaces", [self.namespace])
        if self.plane is None:
            return Cluster.objects.create(name=self.name, auth_method=Cluster.AuthMethod.KUBECONFIG,
                                          kubeconfig_path=self.kubeconfig, **extra)
        return Cluster.objects.create(name=self.name, auth_method=Cluster.AuthMethod.TOKEN,
                                      server_url=self.proxy.url, bearer_token=ADMIN_TOKEN,
                                      ca_cert=self.plane.ca_pem, **extra)

    def sync(self) -> str:
        """``manage.py sync --once``: resync, then one reconcile pass, once the informers hold what
        the cluster holds (:func:`settle`)."""
        settle()
        out = io.StringIO()
        call_command("sync", "--once", "--cluster", self.name, stdout=out)
        return out.getvalue()

    # -- custom resources, as another writer ---------------------------------------------------------
    def write(self, manifest: dict[str, Any], field_manager: str = "kubectl-edit") -> dict[str, Any]:
        """Create or replace (status included, through ``/status``) as kubectl or a controller would."""
        kind = model_for(manifest["apiVersion"], manifest["kind"]).kube
        group, version = kind.group, kind.version
        body = copy.deepcopy(manifest)
        body["metadata"]["namespace"] = self.namespace
        status = body.pop("status", None)
        current = self.read(kind, body["metadata"]["name"])
        self.written.add((kind, body["metadata"]["name"]))
        if current is None:
            result = self.custom.create_namespaced_custom_object(
                group, version, self.namespace, kind.plural, body, field_manager=field_manager)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            result = self.custom.replace_namespaced_custom_object(
                group, version, self.namespace, kind.plural, body["metadata"]["name"], body,
                field_manager=field_manager)
        if status is not None:
            result = self.custom.patch_namespaced_custom_object_status(
                group, version, self.namespace, kind.plural, body["metadata"]["name"], {"status": status},
                field_manager=field_manager)
        return result

    def read(self, kind: KindInfo, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(kind.group, kind.version, namespace or self.namespace,
                                                            kind.plural, name)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def remove(self, kind: KindInfo, name: str, namespace: str | None = None) -> None:
        self.custom.delete_namespaced_custom_object(kind.group, kind.version, namespace or self.namespace,
                                                    kind.plural, name)

    def writes_during(self, action: Callable[[], Any]) -> list[RequestInfo]:
        """The write requests (create, update, patch, delete) the portal sent through the proxy while
        ``action`` ran: a steady state sends none."""
        seen = len(self.proxy.requests_seen)
        action()
        return [r for r in self.proxy.requests_seen[seen:] if r.verb in ("create", "update", "patch", "delete")]

    def compact_behind_the_watch(self, plural: str, change: Callable[[], Any]) -> None:
        """Keep the watches of ``plural`` away (503) while ``change()`` moves the cluster on and etcd
        compacts past their resourceVersion; let them back: they meet a real 410 and relist."""
        deadline = time.monotonic() + 10
        while not self.proxy.open_watches(plural) and time.monotonic() < deadline:
            time.sleep(0.02)  # a watcher opens its stream a moment after its list
        self.proxy.inject("watch", plural, status=503, times=None)
        self.proxy.disconnect_watches()
        change()
        self.plane.compact()
        self.proxy.clear_faults()

    def caches(self) -> list[tuple[str, str, informers.Informer]]:
        """The process's listed informers whose scope holds objects of this namespace."""
        found = []
        for key, shared in informers.registered():
            api_version, kind, namespace = key[2], key[3], key[4]
            if namespace in (None, self.namespace) and shared.synced.is_set():
                found.append((api_version, kind, shared))
        return found

    def cache_lag(self, api_version: str, kind: str, shared: informers.Informer) -> dict[str, Any] | None:
        """How ``shared`` differs from the cluster in this namespace (name: cluster's resourceVersion,
        cache's), or None when it holds the same objects at the same versions."""
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        listed = resource.get(namespace=self.namespace, label_selector=shared.selector or None).to_dict()["items"]
        cluster = {item["metadata"]["name"]: item["metadata"]["resourceVersion"] for item in listed}
        cached = {item["metadata"]["name"]: item["metadata"]["resourceVersion"]
                  for item in shared.items(self.namespace)}  # fmt: skip
        if cluster == cached:
            return None
        return {name: (cluster.get(name), cached.get(name)) for name in cluster.keys() | cached.keys()
                if cluster.get(name) != cached.get(name)}  # fmt: skip

    def informed(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Wait until this process's informer caches (clusters/kube/informers.py) that hold the
        object have it as the cluster has it (its resourceVersion), or no longer have it: a test
        that waited on the cluster and reconciles next reads through them, a moment behind."""
        namespace = namespace or self.namespace
        version = None

        def caught_up() -> bool:
            nonlocal version  # the cluster's, read again each time: its own controllers may move it on
            current = self.get(api_version, kind, name, namespace)
            version = current["metadata"]["resourceVersion"] if current else None
            for shared in informers.covering(api_version, kind, namespace):
                if not shared.selector or current is None or informers.selector_matches(
                        current["metadata"].get("labels"), shared.selector):
                    cached = shared.get(namespace, name)
                    if (cached["metadata"]["resourceVersion"] if cached else None) != version:
                        return False
            return True

        deadline = time.monotonic() + 30
        while not caught_up():
            if time.monotonic() > deadline:
                raise AssertionError(f"the informers did not see {kind} {name} at {version} within 30 s")
            time.sleep(0.02)

    # -- any object ------------------------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """A built-in (or any) object of this namespace (or ``namespace``) as a dict, or None."""
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        try:
            return resource.get(name=name, namespace=namespace or self.namespace).to_dict()
        except kubernetes.dynamic.exceptions.NotFoundError:
            return None

    def list(self, api_version: str, kind: str, **selectors: str) -> list[dict[str, Any]]:
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return [item.to_dict() for item in resource.get(namespace=self.namespace, **selectors).items]

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A merge patch, as ``kubectl patch --type merge`` by a person."""
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return resource.patch(name=name, namespace=self.namespace, body=body,
                              content_type="application/merge-patch+json").to_dict()

    def delete(self, api_version: str, kind: str, name: str, propagation: str = "Background") -> None:
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        resource.delete(name=name, namespace=self.namespace, body={"propagationPolicy": propagation})

    def close(self) -> None:
        if self in _open:
            _open.remove(self)
        informers.stop_all()  # no cache of the test's namespace watches on while it goes
        if self.proxy is not None:
            self.proxy.clear_faults()
        try:
            if self.owns_namespace:
                self._release_pods()
                kubernetes.client.CoreV1Api(self.api_client).delete_namespace(self.namespace)
                return
            for kind, name in self.written:
                self.remove(kind, name)
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise


    def _release_pods(self) -> None:
        """Force the namespace's pods off their nodes before the namespace goes: the next test's
        admission counts every pod on the shared kwok nodes (``scheduler.admission.cluster_pods``),
        and a namespace's deletion leaves its pods holding GPUs for as long as the namespace
        controller takes. The owners go first, so nothing recreates a pod deleted here."""
        apps, batch = kubernetes.client.AppsV1Api(self.api_client), kubernetes.client.BatchV1Api(self.api_client)
        for delete in (apps.delete_collection_namespaced_deployment, apps.delete_collection_namespaced_replica_set,
                       apps.delete_collection_namespaced_stateful_set, batch.delete_collection_namespaced_job):
            delete(self.namespace, propagation_policy="Background")
        kubernetes.client.CoreV1Api(self.api_client).delete_collection_namespaced_pod(
            self.namespace, grace_period_seconds=0)


def external_kubeconfig() -> str | None:
    """The cluster named by ``KUBECONFIG``, when the tests should use it instead of their own."""
    return os.environ.get("KUBECONFIG") or None
