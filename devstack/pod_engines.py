"""The live demo's stand-in for a pod network: simulated engines behind the Services of the KubeAI
Models the portal runs (``models_app.kubeai_controller``), listed while the Model has Pods.

With kwok no container runs, so a Pod of ``model-<name>`` serves nothing, and the demo's control
plane runs no EndpointSlice controller. This does both jobs for the Services the portal renders for
KubeAI Models (label ``app.kubernetes.io/managed-by: inference-portal``, a ``model`` selector):
it lists the Models, those Services and their Pods (three requests, read as JSON: the client's
typed objects cost this process more CPU than the lists' transfer), then watches those Pods from
that list and lists again at their first change, or after ``WATCH_SECONDS`` (a Model's or Service's
own change). A Pod is so listed within a watch event of its creation, well before kwok reports it
ready and the controller says so (polled every half second, a wake from zero on a loaded machine
was sent on before its replica was listed and answered 502), and an idle demo costs a watch
request every few seconds, not a dozen lists a second. Then

- each live Pod (not terminating, not finished) of a Model that **scales** (:func:`scales`: its
  autoscaler may take it past one replica) gets an engine of its own (``manage.py sim_engine``, a
  fresh process: a new replica's KV cache starts cold, as a new pod's does) and an FQDN
  EndpointSlice named after the Pod, listing ``<engine>.localhost`` on the engine's port
  (kube-apiserver refuses loopback IPs in a slice; the gateway resolves names under ``localhost``
  to loopback, RFC 6761, and follows them only with ``GATEWAY_ALLOW_LOOPBACK``). A Pod that goes
  takes its slice and its engine with it. So that Model's replicas are what answers: the gateway
  picks among them, the autoscaler reads their ``/metrics`` (``inference_gateway.autoscaler``),
  and a scale-out adds engines that take load;
- any other Model with a live Pod has the demo's shared engines (``shared``, the ones behind the
  ModelServices) listed behind its Service, one slice per engine, taken away when its last Pod
  goes. A Model that never runs past one replica needs no engine of its own to show what it does,
  and an engine per Pod of every Model (a Django process each, 2.5 s of CPU to start) made the
  demo heavy on a loaded machine: four engines started with the demo, and a Model woken from
  zero answered 502 when its Pod's engine was not up by the time the controller reported it ready.

An engine is listed as soon as its Pod exists, before kwok reports the Pod ready: the engine
already answers (``SPARE`` engines are kept started ahead, as starting one takes seconds on a busy
machine), and a request the gateway held to wake the Model from zero is sent on as soon as the
controller reports a ready replica, which must find the replica listed. Left out: the pod's
readiness gating its endpoint, and in-flight requests finishing on a terminating pod (its engine
stops with it).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes
import requests
import urllib3

from devstack.control_plane import Process, stop_together
from devstack.ports import free_port
from models_app.models import KubeAIModel

logger = logging.getLogger(__name__)
WATCH_SECONDS = 5  # also how long Ctrl-C waits for this thread at most
RETRY_SECONDS = 0.5  # after a failed list or watch, or while a Pod waits for an engine
# Engines started ahead of the Pods that will take them: one is what a wake from zero needs at once;
# a scale-out's further replicas are listed as their engines start (the ones running take the load).
SPARE = 1
SLICE_MANAGER = "inference-portal-live-demo"
SERVICE_SELECTOR = "app.kubernetes.io/managed-by=inference-portal,model"  # the KubeAI controller's Services and Pods
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
FINISHED = ("Succeeded", "Failed")


def scales(spec: dict[str, Any]) -> bool:
    """Whether a Model's autoscaler may run it on more than one replica (KubeAI: ``maxReplicas``
    unset is no bound), so that each replica needs an engine of its own to take a share of the load."""
    return not spec.get("autoscalingDisabled") and (spec.get("maxReplicas") is None or spec["maxReplicas"] > 1)


def engine_slice(name: str, service: str, address: str, port: int, pod: tuple[str, str] | None = None
                 ) -> dict[str, Any]:
    """An FQDN EndpointSlice ``name`` of ``service`` listing one engine, ``address`` on ``port``
    (with ``pod``, (namespace, name), the Pod it stands for)."""
    endpoint: dict[str, Any] = {"addresses": [address], "conditions": {"ready": True}}
    if pod is not None:
        endpoint["targetRef"] = {"kind": "Pod", "namespace": pod[0], "name": pod[1]}
    return {"metadata": {"name": name, "labels": {SERVICE_NAME_LABEL: service,
                                                  "endpointslice.kubernetes.io/managed-by": SLICE_MANAGER}},
            "addressType": "FQDN",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [endpoint]}  # fmt: skip


@dataclass
class Engine:
    name: str
    port: int
    process: Process

    def answers(self) -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200
        except requests.RequestException:
            return False


class PodEngines:
    """Engines for the Pods of the portal's KubeAI Models; :meth:`start` runs it in a thread until
    :meth:`stop`. ``spawn(name, port)`` starts one engine process listening on ``port``; ``shared``
    are the (address, port) of the engines a Model that does not scale is served by."""

    def __init__(self, api_client: Any, spawn: Callable[[str, int], Process], shared: list[tuple[str, int]]) -> None:
        self.api_client = api_client  # closed by :meth:`stop`
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.discovery = kubernetes.client.DiscoveryV1Api(api_client)
        self.spawn = spawn
        self.shared = shared
        self.spare: list[Engine] = []
        self.serving: dict[tuple[str, str], Engine] = {}  # (namespace, Pod) -> its engine
        self.sharing: set[tuple[str, str]] = set()  # (namespace, Service) listing the shared engines
        self.unserved = 0  # live Pods of scaling Models still without an engine
        self.started = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="pod engines", daemon=True)

    def start(self) -> None:
        self._refill()
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=30)
        stop_together([engine.process for engine in [*self.serving.values(), *self.spare]])
        self.serving.clear()
        self.spare.clear()
        self.api_client.close()

    def _refill(self) -> None:
        while len(self.spare) < SPARE:
            self.started += 1
            name, port = f"pod-engine-{self.started}", free_port()
            self.spare.append(Engine(name, port, self.spawn(name, port)))

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                resource_version = self.step()
                if self.unserved:  # no spare engine answered yet: try again shortly, not at the next change
                    self.stopped.wait(RETRY_SECONDS)
                else:
                    self._until_pods_change(resource_version)
            except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
                logger.warning("pod engines: %s", error)  # the next list tries again
                self.stopped.wait(RETRY_SECONDS)

    def _until_pods_change(self, resource_version: str) -> None:
        """Return at the first change to the Pods listed at ``resource_version`` (or a watch that
        ends: expired, or ``WATCH_SECONDS`` without one)."""
        watch = kubernetes.watch.Watch()
        for _ in watch.stream(self.core.list_pod_for_all_namespaces, label_selector=SERVICE_SELECTOR,
                              resource_version=resource_version, timeout_seconds=WATCH_SECONDS,
                              _request_timeout=WATCH_SECONDS + 5):  # fmt: skip
            watch.stop()
            return

    def _list(self, list_for_all_namespaces: Callable[..., Any]) -> dict[str, Any]:
        """The portal's KubeAI Services or Pods in every namespace, as the API server's JSON."""
        return json.loads(list_for_all_namespaces(label_selector=SERVICE_SELECTOR, _preload_content=False).data)

    def step(self) -> str:
        """One pass: an engine and a slice for every new live Pod of a Model that scales, none for a
        Pod that went; the shared engines behind any other Model's Service while it has a live Pod.
        Returns the resourceVersion of the Pods' list."""
        kind = KubeAIModel.kube
        specs = {(item["metadata"]["namespace"], item["metadata"]["name"]): item.get("spec") or {}
                 for item in self.custom.list_cluster_custom_object(kind.group, kind.version, kind.plural)["items"]}
        live: dict[tuple[str, str], list[str]] = {}  # (namespace, the Pods' model label) -> live Pods
        pods = self._list(self.core.list_pod_for_all_namespaces)
        for pod in pods["items"]:
            metadata = pod["metadata"]
            if metadata.get("deletionTimestamp") is None and (pod.get("status") or {}).get("phase") not in FINISHED:
                live.setdefault((metadata["namespace"], metadata["labels"].get("model")), []).append(metadata["name"])
        own: dict[tuple[str, str], str] = {}  # (namespace, Pod) -> its Service
        shared: set[tuple[str, str]] = set()
        for service in self._list(self.core.list_service_for_all_namespaces)["items"]:
            namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
            members = live.get((namespace, (service["spec"].get("selector") or {}).get("model")))
            if not members:
                continue
            model = next((reference["name"] for reference in service["metadata"].get("ownerReferences") or []
                          if reference.get("kind") == kind.kind), None)  # fmt: skip
            if scales(specs.get((namespace, model), {"maxReplicas": 1})):
                own.update({(namespace, pod): name for pod in members})
            else:
                shared.add((namespace, name))
        for key in [key for key in self.serving if key not in own]:
            self._release(key)
        for key, service in sorted(own.items()):
            if key not in self.serving:
                self._assign(key, service)
        self.unserved = len(own) - len(self.serving)
        for key in sorted(self.sharing - shared):
            self._unshare(key)
        for key in sorted(shared - self.sharing):
            self._share(key)
        self._refill()
        return pods["metadata"]["resourceVersion"]

    def _assign(self, key: tuple[str, str], service: str) -> None:
        engine = next((engine for engine in self.spare if engine.answers()), None)
        if engine is None:  # none up yet: the next poll
            return
        self.spare.remove(engine)
        namespace, pod = key
        self.discovery.create_namespaced_endpoint_slice(
            namespace, engine_slice(pod, service, f"{engine.name}.localhost", engine.port, key))
        self.serving[key] = engine

    def _release(self, key: tuple[str, str]) -> None:
        namespace, pod = key
        self._delete_slice(namespace, pod)
        self.serving.pop(key).process.stop()

    def _share(self, key: tuple[str, str]) -> None:
        namespace, service = key
        for index, (address, port) in enumerate(self.shared):
            try:
                self.discovery.create_namespaced_endpoint_slice(
                    namespace, engine_slice(f"{service}-shared-{index}", service, address, port))
            except kubernetes.client.ApiException as error:
                if error.status != 409:  # listed by an earlier try whose next one failed
                    raise
        self.sharing.add(key)

    def _unshare(self, key: tuple[str, str]) -> None:
        namespace, service = key
        for index in range(len(self.shared)):
            self._delete_slice(namespace, f"{service}-shared-{index}")
        self.sharing.discard(key)

    def _delete_slice(self, namespace: str, name: str) -> None:
        try:
            self.discovery.delete_namespaced_endpoint_slice(name, namespace)
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
