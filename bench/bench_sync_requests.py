"""How many requests the portal sends the API server for managed models in steady state.

Issue 44: 2,089 apiserver requests a minute for 154 models at a 15 s poll, every object read live
each pass. Here, on the tests' real control plane (devstack/control_plane.py; kwok runs the pods),
``MODELS`` managed InferenceModels are started and left ready; then every request the portal sends
is counted at the fault proxy it reaches the cluster through (tests/support/fault_proxy.py: each
request as Kubernetes' RequestInfo names it) for ``WINDOW_S`` seconds of steady state as the beat
runs it: a full resync at the start (beat: every 5 minutes) and a reconcile pass every 15 s
(``POLLING_INTERVAL``), with the process's informer caches (clusters/kube/informers.py) listing
once and watching as they do in a worker. Nothing is computed from a sample: the figure is what the
proxy saw, divided by the window.

- ``sync.apiserver_requests_per_min_per_100_models`` (target under 20): every request of the
  window (passes, the resync, the informers' lists and watches), per minute and per 100 models.
- ``sync.apiserver_requests_per_reconcile_pass_per_100_models``: the median pass's requests.
- ``sync.requests_load_1min``: the machine's load when they were taken.

Left out: the watcher process's own watches (one per kind and namespace, re-opened every 5-10
minutes, whatever the number of models). Printed too: the window's requests by verb and resource.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from clusters.models import Cluster
from clusters.sync.controllers import reconcile_cluster
from clusters.sync.resync import resync_cluster
from devstack.control_plane import apply_crds_to, running_control_plane
from tests.support.clusters import KubeCluster
from tests.support.fault_proxy import FaultProxy

MODELS = 100
POLL_S = 15.0  # POLLING_INTERVAL, as in the issue
WINDOW_S = float(os.environ.get("BENCH_REQUESTS_WINDOW_S", "300"))  # the beat's resync period: one resync
READY_WITHIN_S = 600


def _model(index: int, namespace: str) -> dict[str, Any]:
    """A CPU model (no GPU, no pool): admission lets all of them start; a day's cooldown keeps them up."""
    manifest = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-llama-2-7b.yaml").read_text())
    manifest["metadata"] = {"name": f"steady-{index:03d}", "namespace": namespace}
    spec = manifest["spec"]
    spec.update(modelName=f"steady-{index:03d}", memory="1Gi", cooldownPeriod="24h", nodeSelector={},
                backendUrl=f"http://steady-{index:03d}.{namespace}.svc:8000")  # fmt: skip
    spec["resources"] = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}
    return manifest


def _ready(kube: KubeCluster) -> int:
    return sum(1 for d in kube.list("apps/v1", "Deployment") if (d.get("status") or {}).get("readyReplicas"))


def _steady_requests(kube: KubeCluster) -> dict[str, float]:
    cluster = kube.register(managed_kinds=["InferenceModel"])
    for index in range(MODELS):
        kube.write(_model(index, kube.namespace))
    deadline = time.monotonic() + READY_WITHIN_S
    while _ready(kube) < MODELS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {_ready(kube)} of {MODELS} Deployments ready within {READY_WITHIN_S} s")
        kube.sync()
        time.sleep(1.0)
    kube.sync()  # statuses caught up, informers listed and watching: the steady state starts here
    cluster = Cluster.objects.get(pk=cluster.pk)
    seen = len(kube.proxy.requests_seen)
    started = time.monotonic()
    resync_cluster(cluster)
    passes: list[int] = []
    while (due := started + POLL_S * len(passes)) < started + WINDOW_S:
        time.sleep(max(0.0, due - time.monotonic()))  # the beat's schedule: a pass every POLL_S
        before = len(kube.proxy.requests_seen)
        reconcile_cluster(cluster)
        passes.append(len(kube.proxy.requests_seen) - before)
    time.sleep(max(0.0, started + WINDOW_S - time.monotonic()))
    window = kube.proxy.requests_seen[seen:]
    minutes = (time.monotonic() - started) / 60
    for (verb, plural), count in sorted(Counter((r.verb, r.plural) for r in window).items()):
        print(f"  {minutes:.1f} min window: {verb:<6} {plural:<28} {count:>5}")
    print(f"  {len(passes)} passes: {passes}")
    per_100 = 100 / MODELS
    return {
        "sync.apiserver_requests_per_reconcile_pass_per_100_models": statistics.median(passes) * per_100,
        "sync.apiserver_requests_per_min_per_100_models": len(window) / minutes * per_100,
    }


def run() -> dict[str, float]:
    with running_control_plane(prepare=apply_crds_to) as plane, plane.api_client() as api_client:
        workdir = plane.workdir
        proxy = FaultProxy(plane.url, str(workdir / "ca.crt"), str(workdir / "apiserver.crt"),
                           str(workdir / "apiserver.key")).start()  # fmt: skip
        kube = KubeCluster(api_client, name="bench-requests", plane=plane, proxy=proxy)
        try:
            figures = _steady_requests(kube)
        finally:
            kube.close()
            proxy.stop()
    figures["sync.requests_load_1min"] = os.getloadavg()[0]
    return figures
