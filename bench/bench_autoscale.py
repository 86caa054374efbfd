"""The KubeAI autoscaler's reaction to a step of load (issue 42), on the real control plane.

A KubeAI Model the portal controls (``minReplicas`` 1, ``maxReplicas`` 4, ``targetRequests`` 2,
``scaleDownDelaySeconds`` 0) in front of four simulated vLLM engines (devstack/sim_engine.py, one
sequence at a time, each request 2 s of decode), listed in hand-written EndpointSlices of the
Model's Service as tests/controllers/test_kubeai_model_controller.py does. The autoscaler
(``inference_gateway.autoscaler.run``) runs in a thread at ``INTERVAL`` seconds, its window one
interval long. Each round sends 8 requests at once (2 per engine: ceil(8 / 2) = 4 replicas) and
times, from the moment they were sent:

- ``autoscale.step_reaction_s``: until both the desired replicas are published
  (``inference_portal_model_desired_replicas`` on the portal's ``/metrics`` reads 4) and the
  Model's Deployment asks for 4 replicas; the median of ``ROUNDS`` rounds (the load then ends and
  the Model goes back to 1 before the next). ``autoscale.step_reaction_max_s``: the slowest round.
- ``autoscale.step_reaction_intervals``: the median over ``INTERVAL`` (target: under 2).
- ``autoscale.step_wall_s`` / ``autoscale.step_cpu_ms``: one interval's work for the Model (read
  its engines, decide), the median over the run, in wall time and in this process's CPU time
  (``time.process_time``: the reading threads count too); ``autoscale.scaling_step_wall_s`` /
  ``autoscale.scaling_step_cpu_ms``: the same for the intervals that scaled (the spec patch and
  the reconcile: admission, the Deployment's apply, the status). Under load, the CPU figures are
  the ones to compare with the interval.
- ``autoscale.load_1min``: the machine's load when the figures were taken.

Leaves out: KubeAI's default 10-minute window (an average over it reacts to a step only as the
step fills the window: by design, minutes), the pods' own start (kwok starts them at once, a real
engine loads its weights for minutes), and the watch that mirrors the Model into the portal (the
controller stores the status it writes itself).
"""

from __future__ import annotations

import os
import statistics
import threading
import time

import requests
from django.conf import settings
from django.test import Client

from clusters.models import Cluster
from devstack.control_plane import apply_crds_to, running_control_plane
from inference_gateway.autoscaler import Autoscaler
from inference_gateway.autoscaler import run as run_autoscaler
from inference_gateway.models import BackendHost
from scheduler.refresh import refresh_node_pools
from tests.gateway.test_load_balancing import host_address
from tests.support.clusters import KubeCluster
from tests.support.fault_proxy import FaultProxy
from tests.support.sim_engines import Engine, launch, list_behind

INTERVAL = 1.0
POLL_SECONDS = 0.05  # the bench's own reads of /metrics and the Deployment share the autoscaler's process
ROUNDS = 5
ENGINES = 4
PER_ENGINE = 2
SCALED = ENGINES * PER_ENGINE // 2  # targetRequests 2
ENGINE_OPTIONS = ("--model", "bench", "--max-num-seqs", "1", "--decode-ms", "5", "--decode-ms-per-seq", "0")
SERIES = 'inference_portal_model_desired_replicas{cluster="bench",kind="Model",name="bench",namespace="{}"}'


def _model() -> dict:
    return {
        "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "bench"},
        "spec": {"url": "hf://bench/model", "engine": "VLLM", "features": ["TextGeneration"],
                 "resourceProfile": "bench:1", "minReplicas": 1, "maxReplicas": ENGINES, "targetRequests": 2,
                 "scaleDownDelaySeconds": 0},
    }  # fmt: skip


def _send(engine: Engine) -> None:
    body = {"model": "bench", "messages": [{"role": "user", "content": "go"}], "max_tokens": 400}
    requests.post(f"{engine.url}/v1/chat/completions", json=body, timeout=120)


def _published(metrics: Client, namespace: str) -> float | None:
    series = SERIES.replace("{}", namespace) + " "
    for line in metrics.get("/metrics").content.decode().splitlines():
        if line.startswith(series):
            return float(line.rsplit(" ", 1)[1])
    return None


def _replicas(kube: KubeCluster) -> int:
    return ((kube.get("apps/v1", "Deployment", "model-bench") or {}).get("spec") or {}).get("replicas") or 0


class TimedAutoscaler(Autoscaler):
    """The autoscaler, its steps timed (wall and process CPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.timed: dict[bool, list[tuple[float, float]]] = {True: [], False: []}  # scaled -> [(wall, CPU)]

    def step(self, cluster: Cluster, now: float | None = None) -> dict:
        wall, cpu = time.perf_counter(), time.process_time()
        decisions = super().step(cluster, now)
        scaled = any(decision.scaled for decision in decisions.values())
        self.timed[scaled].append((time.perf_counter() - wall, time.process_time() - cpu))
        return decisions

    def medians(self, scaled: bool) -> tuple[float, float]:
        """Median wall seconds and CPU milliseconds of the steps that did (or did not) scale."""
        walls, cpus = zip(*self.timed[scaled], strict=True)
        return statistics.median(walls), statistics.median(cpus) * 1000


def _round(kube: KubeCluster, engines: list[Engine], metrics: Client) -> float:
    """One step of load; seconds until the metric and the Deployment both say :data:`SCALED`."""
    sent = time.monotonic()
    load = [threading.Thread(target=_send, args=(engine,), daemon=True)
            for engine in engines for _ in range(PER_ENGINE)]  # fmt: skip
    for thread in load:
        thread.start()
    seen = {"metric": None, "deployment": None}
    while None in seen.values():
        if time.monotonic() - sent > 60:
            raise RuntimeError(f"no reaction within 60 s: {seen}")
        if seen["metric"] is None and _published(metrics, kube.namespace) == SCALED:
            seen["metric"] = time.monotonic() - sent
        if seen["deployment"] is None and _replicas(kube) == SCALED:
            seen["deployment"] = time.monotonic() - sent
        time.sleep(POLL_SECONDS)
    for thread in load:
        thread.join(timeout=120)
    deadline = time.monotonic() + 60  # the load is over: back to minReplicas before the next step
    while _replicas(kube) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return max(seen.values())


def run() -> dict[str, float]:
    settings.KUBEAI_RESOURCE_PROFILES = {"bench": {"requests": {"cpu": "100m", "memory": "256Mi"}}}
    settings.KUBEAI_AUTOSCALING_INTERVAL = settings.KUBEAI_AUTOSCALING_WINDOW = INTERVAL
    settings.METRICS_TOKEN = "bench"
    with running_control_plane(prepare=apply_crds_to) as plane, plane.api_client() as api_client:
        workdir = plane.workdir
        proxy = FaultProxy(plane.url, str(workdir / "ca.crt"), str(workdir / "apiserver.crt"),
                           str(workdir / "apiserver.key")).start()  # fmt: skip
        kube = KubeCluster(api_client, name="bench", plane=plane, proxy=proxy)
        engines: list[Engine] = []
        stop = threading.Event()
        autoscaler_thread = None
        try:
            cluster: Cluster = kube.register(managed_kinds=["Model"])
            refresh_node_pools(cluster)
            address = host_address()
            BackendHost.objects.create(cluster=cluster, host=address)
            for index in range(ENGINES):
                launch(f"b{index}", *ENGINE_OPTIONS, host=address, started=engines)
            kube.write(_model())
            kube.sync()
            list_behind(api_client, kube.namespace, "model-bench", engines)
            autoscaler = TimedAutoscaler()
            autoscaler_thread = threading.Thread(target=run_autoscaler, args=(stop, autoscaler), daemon=True)
            autoscaler_thread.start()
            metrics = Client(HTTP_AUTHORIZATION="Bearer bench")
            reactions = [_round(kube, engines, metrics) for _ in range(ROUNDS)]
        finally:
            stop.set()
            if autoscaler_thread is not None:
                autoscaler_thread.join(timeout=30)
            for engine in engines:
                engine.stop()
            kube.close()
            proxy.stop()
    median = statistics.median(reactions)
    return {
        "autoscale.step_reaction_s": median,
        "autoscale.step_reaction_max_s": max(reactions),
        "autoscale.step_reaction_intervals": median / INTERVAL,
        **dict(zip(("autoscale.step_wall_s", "autoscale.step_cpu_ms"), autoscaler.medians(False), strict=True)),
        **dict(zip(("autoscale.scaling_step_wall_s", "autoscale.scaling_step_cpu_ms"), autoscaler.medians(True),
                   strict=True)),
        "autoscale.load_1min": os.getloadavg()[0],
    }
