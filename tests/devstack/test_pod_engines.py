"""The live demo's engines behind the KubeAI Models' Services (devstack/pod_engines.py), on the real
control plane: a Pod of a Model that scales gets an engine of its own, listed by a slice named after
the Pod as soon as the Pod exists; a Pod of a Model held at one replica gets the shared engines; a
Pod that goes takes its slice (and its engine) with it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from django.conf import settings

from devstack.control_plane import Process
from devstack.pod_engines import PodEngines
from models_app.kubeai_controller import MANAGED_BY, PORT, service_name
from models_app.models import KubeAIModel

KIND = KubeAIModel.kube
SHARED = [("shared-0.localhost", 9)]  # the demo's shared engines; this test only reads their slices


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (answer := condition()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)
    return answer


@pytest.fixture
def pod_engines(kube, tmp_path: Path) -> Iterator[PodEngines]:
    def spawn(name: str, port: int) -> Process:
        log = tmp_path / f"{name}.log"
        popen = subprocess.Popen([sys.executable, "-m", "devstack.sim_engine", "--host", "127.0.0.1", "--port",
                                  str(port), "--name", name], cwd=settings.BASE_DIR, stdout=log.open("w"),
                                 stderr=subprocess.STDOUT)  # fmt: skip
        return Process(name, popen, log)

    engines = PodEngines(kubernetes.client.ApiClient(kube.api_client.configuration), spawn, SHARED)
    engines.start()
    yield engines
    engines.stop()


def a_model_with_a_pod(kube, name: str, **spec: Any) -> str:
    """A Model, a Service such as the portal renders for it (its labels, its ``model`` selector, the
    Model its owner) and one Pod of its, pending; the Pod's name."""
    cr = kube.write({"apiVersion": KIND.api_version, "kind": KIND.kind, "metadata": {"name": name}, "spec": {
        "features": ["TextGeneration"], "url": "hf://org/model", "engine": "VLLM", "resourceProfile": "cpu:1", **spec}})
    labels = {**MANAGED_BY, "model": name}
    owner = {"apiVersion": KIND.api_version, "kind": KIND.kind, "name": name, "uid": cr["metadata"]["uid"]}
    core = kubernetes.client.CoreV1Api(kube.api_client)
    core.create_namespaced_service(kube.namespace, {
        "metadata": {"name": service_name(name), "labels": labels, "ownerReferences": [owner]},
        "spec": {"selector": {"model": name}, "ports": [{"name": "http", "port": PORT}]}})
    pod = core.create_namespaced_pod(kube.namespace, {
        "metadata": {"generateName": f"model-{name}-", "labels": labels},
        "spec": {"containers": [{"name": "server", "image": "vllm"}]}})  # fmt: skip
    return pod.metadata.name


def slices(kube) -> dict[str, dict[str, Any]]:
    items = kubernetes.client.DiscoveryV1Api(kube.api_client).list_namespaced_endpoint_slice(kube.namespace).items
    return {item.metadata.name: item.to_dict() for item in items}


def test_a_scaling_models_pod_gets_its_own_engine_and_any_other_the_shared_ones(kube, pod_engines) -> None:
    scaling = a_model_with_a_pod(kube, "scaler", minReplicas=0, maxReplicas=3)
    single = a_model_with_a_pod(kube, "single", minReplicas=0, maxReplicas=1)
    service = service_name("single")

    own = wait_until(lambda: slices(kube).get(scaling), "a slice for the scaling Model's Pod")
    assert own["endpoints"][0]["target_ref"]["name"] == scaling
    engine = pod_engines.serving[(kube.namespace, scaling)]
    assert own["endpoints"][0]["addresses"] == [f"{engine.name}.localhost"] and engine.answers()
    assert own["metadata"]["labels"]["kubernetes.io/service-name"] == service_name("scaler")
    shared = wait_until(lambda: slices(kube).get(f"{service}-shared-0"), "the shared engines behind the other")
    assert shared["endpoints"][0]["addresses"] == ["shared-0.localhost"] and shared["ports"][0]["port"] == 9
    assert shared["metadata"]["labels"]["kubernetes.io/service-name"] == service
    assert single not in slices(kube) and len(pod_engines.serving) == 1  # no engine of its own

    core = kubernetes.client.CoreV1Api(kube.api_client)
    core.delete_namespaced_pod(scaling, kube.namespace, grace_period_seconds=0)
    core.delete_namespaced_pod(single, kube.namespace, grace_period_seconds=0)
    wait_until(lambda: not {scaling, f"{service}-shared-0"} & set(slices(kube)), "the slices gone with the Pods")
    wait_until(lambda: not engine.process.alive(), "the Pod's engine stopped with it")
