"""The live demo's stand-in for a pod network: one simulated engine per Pod of each KubeAI Model the
portal runs (``models_app.kubeai_controller``), listed behind the Model's Service.

With kwok no container runs, so a Pod of ``model-<name>`` serves nothing, and the demo's control
plane runs no EndpointSlice controller. This does both jobs for the Services the portal renders for
KubeAI Models (label ``app.kubernetes.io/managed-by: inference-portal``, a ``model`` selector):
every ``POLL_SECONDS`` it lists their Pods; each live Pod (not terminating, not finished) gets an
engine of its own (``manage.py sim_engine``, a fresh process: a new replica's KV cache starts
cold, as a new pod's does) and an FQDN EndpointSlice named after the Pod, listing
``<engine>.localhost`` on the engine's port (kube-apiserver refuses loopback IPs in a slice; the
gateway resolves names under ``localhost`` to loopback, RFC 6761, and follows them only with
``GATEWAY_ALLOW_LOOPBACK``). A Pod that goes takes its slice and its engine with it. So the
Model's replicas are what answers: the gateway picks among them and the autoscaler reads their
``/metrics`` (``inference_gateway.autoscaler``), and a scale-out adds engines that take load.

An engine is listed as soon as its Pod exists, before kwok reports the Pod ready: the engine
already answers (``SPARE`` engines are kept started ahead, as starting one takes seconds on a busy
machine), and a request the gateway held to wake the Model from zero is sent on as soon as the
controller reports a ready replica, which must find the replica listed. Left out: the pod's
readiness gating its endpoint, and in-flight requests finishing on a terminating pod (its engine
stops with it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes
import requests

from devstack.control_plane import Process, stop_together
from devstack.ports import free_port

logger = logging.getLogger(__name__)
POLL_SECONDS = 0.5
SPARE = 2  # engines started ahead of the Pods that will take them
SLICE_MANAGER = "inference-portal-live-demo"
SERVICE_SELECTOR = "app.kubernetes.io/managed-by=inference-portal,model"  # the KubeAI controller's Services
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
FINISHED = ("Succeeded", "Failed")


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
    :meth:`stop`. ``spawn(name, port)`` starts one engine process listening on ``port``."""

    def __init__(self, api_client: Any, spawn: Callable[[str, int], Process]) -> None:
        self.api_client = api_client  # closed by :meth:`stop`
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.discovery = kubernetes.client.DiscoveryV1Api(api_client)
        self.spawn = spawn
        self.spare: list[Engine] = []
        self.serving: dict[tuple[str, str], Engine] = {}  # (namespace, Pod) -> its engine
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
        while not self.stopped.wait(POLL_SECONDS):
            try:
                self.step()
            except (kubernetes.client.ApiException, OSError, ValueError) as error:  # the next poll tries again
                logger.warning("pod engines: %s", error)

    def step(self) -> None:
        """One pass: an engine and a slice for every new live Pod, none for a Pod that went."""
        live: dict[tuple[str, str], str] = {}  # (namespace, Pod) -> its Service
        for service in self.core.list_service_for_all_namespaces(label_selector=SERVICE_SELECTOR).items:
            selector = ",".join(f"{key}={value}" for key, value in sorted((service.spec.selector or {}).items()))
            if not selector:
                continue
            namespace = service.metadata.namespace
            for pod in self.core.list_namespaced_pod(namespace, label_selector=selector).items:
                if pod.metadata.deletion_timestamp is None and (pod.status.phase or "") not in FINISHED:
                    live[(namespace, pod.metadata.name)] = service.metadata.name
        for key in [key for key in self.serving if key not in live]:
            self._release(key)
        for key, service in sorted(live.items()):
            if key not in self.serving:
                self._assign(key, service)
        self._refill()

    def _assign(self, key: tuple[str, str], service: str) -> None:
        engine = next((engine for engine in self.spare if engine.answers()), None)
        if engine is None:  # none up yet: the next poll
            return
        self.spare.remove(engine)
        namespace, pod = key
        self.discovery.create_namespaced_endpoint_slice(namespace, {
            "metadata": {"name": pod, "labels": {SERVICE_NAME_LABEL: service,
                                                 "endpointslice.kubernetes.io/managed-by": SLICE_MANAGER}},
            "addressType": "FQDN",
            "ports": [{"name": "http", "port": engine.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [f"{engine.name}.localhost"], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "namespace": namespace, "name": pod}}],
        })  # fmt: skip
        self.serving[key] = engine

    def _release(self, key: tuple[str, str]) -> None:
        namespace, pod = key
        try:
            self.discovery.delete_namespaced_endpoint_slice(pod, namespace)
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
        self.serving.pop(key).process.stop()
